/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SERA firewall: bit-vector classification (bpf-iptables' linear
 * bit-vector search, see fw_maps.h): the packet's fields to bitmap ids,
 * then the first rule whose bit is set in every field's bitmap.
 */
#ifndef SRCHAIN_FW_CLASSIFY_H
#define SRCHAIN_FW_CLASSIFY_H

#include "common.h"
#include "fw_maps.h"

/* fw_addr_id looks prefix field f (< FW_NADDR) up in fw_lpm. */
static __always_inline __u32 fw_addr_id(const struct fw_view *v, __u32 f, __u32 gen)
{
	struct fw_lpm_key k = {};
	struct fw_fdef *d;
	__u32 key = f + gen * FW_NADDR, *id;

	if (f >= FW_NADDR)
		return 0;
	d = bpf_map_lookup_elem(&fw_fdef, &key);
	if (f >= FW_NADDR)
		return 0;
	if (!d)
		return 0;
	if (!v->present[f])
		return d->absent;
	k.field = f + gen * FW_LPM_GEN;
	__builtin_memcpy(k.addr, &v->addr[f], 16);
	/* Interfaces are 4-byte keys (the rest of addr is zero). */
	k.prefixlen = (f == FW_F_IIF || f == FW_F_OIF) ? 8 + 32 : 8 + 128;
	id = bpf_map_lookup_elem(&fw_lpm, &k);
	return id ? *id : d->nomatch;
}

/* Where each integer field's slots start in fw_idx, and its domain. */
static const __u32 fw_int_base[FW_NINT] = {
	FW_IDX_PROTO, FW_IDX_SPORT, FW_IDX_DPORT, FW_IDX_SRH, FW_IDX_NEXTHDR,
	FW_IDX_HDRLEN, FW_IDX_SEGS, FW_IDX_LAST, FW_IDX_TAG, FW_IDX_FAM, FW_IDX_IFAM,
};
static const __u32 fw_int_dom[FW_NINT] = { 256, 65536, 65536, 2, 256, 256, 256, 256, 65536, 256, 256 };

/* fw_int_id looks integer field number j (f - FW_NADDR) up in fw_idx. */
static __always_inline __u32 fw_int_id(const struct fw_view *v, __u32 j, __u32 gen)
{
	__u32 x, dom, *id;

	if (j >= FW_NINT)
		return 0;
	x = v->val[j];
	dom = fw_int_dom[j];
	if (x > dom)
		x = dom;
	x += fw_int_base[j] + gen * FW_IDX_SIZE;
	id = bpf_map_lookup_elem(&fw_idx, &x);
	return id ? *id : 0;
}

/* fw_ctz64 counts trailing zeros of a non-zero x without branches (BPF
 * has no such instruction, and branches here multiply verifier paths):
 * popcount(lowest set bit - 1), SWAR popcount.
 */
static __always_inline __u32 fw_ctz64(__u64 x)
{
	__u64 v = (x & -x) - 1;

	v = v - ((v >> 1) & 0x5555555555555555ULL);
	v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
	v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (v * 0x0101010101010101ULL) >> 56;
}

/* State of the candidate-word search (bpf_loop callback). */
struct fw_search {
	__u64 sum0, sum1, sum2; /* candidate words not visited yet */
	__u32 n;                /* used fields */
	__s32 result;           /* rule, FW_NO_MATCH, or -1 */
};

#define FW_NO_MATCH (-2)

/* fw_word_cb visits the next candidate word: the AND of the used fields'
 * words; a non-zero AND ends the search with its lowest bit. A bpf_loop
 * callback is verified once, not once per word.
 */
static long fw_word_cb(__u32 idx, void *data)
{
	struct fw_search *c = data;
	__u64 cand, acc = ~0ULL;
	struct fw_view *v;
	__u32 zero = 0, k, w;

	if (c->sum0) {
		cand = c->sum0;
		w = fw_ctz64(cand);
		c->sum0 = cand & (cand - 1);
	} else if (c->sum1) {
		cand = c->sum1;
		w = 64 + fw_ctz64(cand);
		c->sum1 = cand & (cand - 1);
	} else if (c->sum2) {
		cand = c->sum2;
		w = 128 + fw_ctz64(cand);
		c->sum2 = cand & (cand - 1);
	} else {
		return 1;
	}
	v = bpf_map_lookup_elem(&fw_scratch, &zero);
	if (!v || w >= FW_MAX_WORDS) {
		c->result = -1;
		return 1;
	}
#pragma clang loop unroll(disable)
	for (k = 0; k < FW_NFIELDS && k < c->n; k++) {
		struct fw_bitmap *bm = bpf_map_lookup_elem(&fw_bitmaps, &v->uids[k]);
		__u32 ww = w;

		/* Re-check next to the access: clang may otherwise index with
		 * a copy the verifier knows no bound of.
		 */
		asm volatile("" : "+r"(ww));
		if (!bm || ww >= FW_MAX_WORDS) {
			c->result = -1;
			return 1;
		}
		acc &= bm->w[ww];
	}
	if (acc) {
		c->result = w * 64 + fw_ctz64(acc);
		return 1;
	}
	return 0;
}

/* fw_classify returns the first matching rule, cfg->nrules when none
 * matches (the policy slot), or -1 on a map inconsistency. Only the used
 * fields (cfg->fields) are looked up and ANDed. Loops are kept rolled on
 * purpose: the verifier then sees one path per iteration instead of one
 * per combination of used fields.
 */
__attribute__((noinline)) int fw_classify(struct fw_view *v, const struct fw_config *cfg)
{
	__u64 sum0 = ~0ULL, sum1 = ~0ULL, sum2 = ~0ULL;
	struct fw_search search;
	__u32 n, k, gen;

	/* A global function: verified once, whatever path led here. Its
	 * loop bound n comes from map memory, so the verifier walks the
	 * loops once for every count instead of once per count.
	 */
	if (!v || !cfg)
		return -1;
	n = cfg->nused;
	gen = cfg->gen & 1;

#pragma clang loop unroll(disable)
	for (k = 0; k < FW_NFIELDS && k < n; k++) {
		struct fw_bitmap *bm;
		__u32 f = cfg->fields[k], id;

		if (f >= FW_NFIELDS)
			return -1;
		id = f < FW_NADDR ? fw_addr_id(v, f, gen) : fw_int_id(v, f - FW_NADDR, gen);
		v->uids[k] = id;
		bm = bpf_map_lookup_elem(&fw_bitmaps, &id);
		if (!bm)
			return -1;
		sum0 &= bm->sum[0];
		sum1 &= bm->sum[1];
		sum2 &= bm->sum[2];
	}

	search.sum0 = sum0;
	search.sum1 = sum1;
	search.sum2 = sum2;
	search.n = n;
	search.result = FW_NO_MATCH;
	bpf_loop(FW_MAX_WORDS + 1, fw_word_cb, &search, 0);
	if (search.result == FW_NO_MATCH)
		return cfg->nrules;
	return search.result;
}

#endif /* SRCHAIN_FW_CLASSIFY_H */
