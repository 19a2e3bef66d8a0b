/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SERA firewall (seed 000): field extraction, bit-vector classification
 * and SR actions. Used by bpf/firewall.c; the tables are built by
 * internal/firewall (Compile + Load), whose Go types mirror the structs
 * here.
 *
 * Classification is bpf-iptables' linear bit-vector search: every field
 * value maps (LPM trie for addresses and interfaces, arrays for the small
 * integer domains) to a bitmap id; bitmap id -> one bit per rule. The
 * packet's rule is the first set bit of the AND of its fields' bitmaps.
 * Each bitmap carries a summary (bit w set iff word w is non-zero), so the
 * search first ANDs the summaries and then visits only candidate words:
 * the cost is bounded by FW_MAX_WORDS, not by the number of rules, and for
 * typical rule sets it is a handful of words whatever the rule count.
 */
#ifndef SRCHAIN_FW_H
#define SRCHAIN_FW_H

#include "common.h"
#include "counters.h"
#include "srh.h"

#define FW_MAX_RULES 10240
#define FW_MAX_WORDS (FW_MAX_RULES / 64)
#define FW_SUM_WORDS 3 /* ceil(FW_MAX_WORDS / 64) */

/* Field ids: internal/firewall Field. The first FW_NADDR are looked up in
 * fw_lpm, the others in fw_idx.
 */
enum {
	FW_F_SRC, FW_F_DST, FW_F_INNER_SRC, FW_F_INNER_DST, FW_F_PSID, FW_F_NSID,
	FW_F_LSID, FW_F_IIF, FW_F_OIF, FW_F_ASID,
	FW_F_PROTO, FW_F_SPORT, FW_F_DPORT, FW_F_SRH, FW_F_NEXTHDR, FW_F_HDRLEN,
	FW_F_SEGS, FW_F_LAST, FW_F_TAG,
	FW_F_FAM,  /* 4 or 6: the family of the packet -s/-d are read from */
	FW_F_IFAM, /* 4 or 6: the family of the inner (original) packet */
	FW_NFIELDS,
};
#define FW_NADDR (FW_F_ASID + 1)
#define FW_NINT (FW_NFIELDS - FW_NADDR)

/* fw_idx layout: for each integer field, Domain()+1 slots (the last is
 * "absent"), in field order. Mirrored by firewall.idxBase.
 */
#define FW_D8 257
#define FW_D16 65537
#define FW_IDX_PROTO 0
#define FW_IDX_SPORT (FW_IDX_PROTO + FW_D8)
#define FW_IDX_DPORT (FW_IDX_SPORT + FW_D16)
#define FW_IDX_SRH (FW_IDX_DPORT + FW_D16)
#define FW_IDX_NEXTHDR (FW_IDX_SRH + 3)
#define FW_IDX_HDRLEN (FW_IDX_NEXTHDR + FW_D8)
#define FW_IDX_SEGS (FW_IDX_HDRLEN + FW_D8)
#define FW_IDX_LAST (FW_IDX_SEGS + FW_D8)
#define FW_IDX_TAG (FW_IDX_LAST + FW_D8)
#define FW_IDX_FAM (FW_IDX_TAG + FW_D16)
#define FW_IDX_IFAM (FW_IDX_FAM + FW_D8)
#define FW_IDX_SIZE (FW_IDX_IFAM + FW_D8)

/* Verdicts: internal/firewall Verdict. */
#define FW_ACT_ACCEPT 1
#define FW_ACT_DROP 2
#define FW_ACT_REJECT 3
#define FW_ACT_GO_NEXT 4
#define FW_ACT_SKIP_NEXT 5
#define FW_ACT_GO_LAST 6
#define FW_ACT_EVAL_ARGS 7

#define FW_MODE_BASIC 0
#define FW_MODE_ADVANCED 1

struct fw_bitmap {
	__u64 sum[FW_SUM_WORDS];
	__u64 w[FW_MAX_WORDS];
};

struct fw_lpm_key {
	__u32 prefixlen; /* 8 (field byte) + address bits */
	__u8 field;
	__u8 addr[16];
} __attribute__((packed));

/* Per prefix field: bitmap of a present value no prefix matched, of an
 * absent value.
 */
struct fw_fdef {
	__u32 nomatch;
	__u32 absent;
};

/* Double buffering: every table holds two generations (fw_cfg slots 0
 * and 1, keys offset by the generation); fw_gen says which one packets
 * use. The loader fills the idle generation and flips fw_gen (one word):
 * a packet sees one whole rule set, old or new, never a mix.
 */
#define FW_GENS 2
#define FW_LPM_GEN 16 /* fw_lpm field byte: field + 16 * generation */
#define FW_RULE_SLOTS (FW_MAX_RULES + 1)

struct fw_config {
	__u32 gen;       /* this slot's generation (0 or 1): key offsets */
	__u32 mode;      /* FW_MODE_* */
	__u32 used;      /* bit f: some rule tests field f */
	__u32 nrules;    /* rules loaded; slot nrules of fw_rules is the policy */
	__u32 args_bits; /* eval-args: low bits of the active SID (0..64) */
	__u32 nused;     /* number of used fields, listed in fields[] */
	__u8 fields[24]; /* the used fields' ids, in order (FW_NFIELDS used) */
	/* SR actions apply only to packets addressed to the NF's SID prefix
	 * (sid/sid_len; sid_len 255: any destination). Others are accepted.
	 */
	struct in6_addr sid;
	__u32 sid_len;
	__u32 icmp_rate; /* Parameter Problems per second and CPU (burst the same) */
	__u8 hash[32];   /* SHA-256 of the rule set and settings (Config.Hash) */
};

/* Token bucket of the ICMPv6 errors (RFC 4443 2.4 (f)), per CPU. */
struct fw_bucket {
	__u64 tokens;
	__u64 last; /* ns */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_bucket);
} fw_icmp_bucket SEC(".maps");

/* eval-args key: ARGS value of one generation. */
struct fw_args_key {
	__u64 args;
	__u64 gen;
};

struct fw_rule {
	__u32 verdict;
};

struct fw_count {
	__u64 packets;
	__u64 bytes;
};

/* max_entries of the table maps are set by the loader to what the rule
 * set needs; the values here are the defaults of an empty set.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_bitmap);
} fw_bitmaps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fw_lpm_key);
	__type(value, __u32);
} fw_lpm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_IDX_SIZE);
	__type(key, __u32);
	__type(value, __u32);
} fw_idx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_NADDR);
	__type(key, __u32);
	__type(value, struct fw_fdef);
} fw_fdef SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS);
	__type(key, __u32);
	__type(value, struct fw_config);
} fw_cfg SEC(".maps");

/* The generation packets use (0 or 1). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} fw_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct fw_rule);
} fw_rules SEC(".maps");

/* Per generation: a new rule set starts from zero. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_GENS * FW_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct fw_count);
} fw_rule_counters SEC(".maps");

/* eval-args: ARGS value -> FW_ACT_* (never EVAL_ARGS). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FW_GENS * 256);
	__type(key, struct fw_args_key);
	__type(value, __u32);
} fw_args SEC(".maps");

/* The packet as the rules see it (internal/firewall View). */
struct fw_view {
	struct in6_addr addr[FW_NADDR];
	__u8 present[FW_NADDR];
	__u32 val[FW_NINT]; /* absent: the field's domain size */
	__u32 uids[FW_NFIELDS]; /* classify: bitmap id of each field */
	__u32 tmp;              /* fw_forget */
};

/* Per-CPU scratch for the view: it does not fit the 512-byte stack next
 * to the classifier's state.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_view);
} fw_scratch SEC(".maps");

/* What the actions need to know about the packet. */
struct fw_pkt {
	struct srh_info si;
	int sr;    /* a valid SRH (routing type 4) was found */
	int encap; /* the SRH is followed by an IPv4/IPv6 packet */
	int icmp_err; /* the packet is an ICMPv6 error message */
};

#define FW_MAX_EXT 6     /* extension headers walked before the transport */
#define FW_MAX_OFF 2048  /* headers must start within this many bytes */

#ifndef IPPROTO_FRAGMENT
#define IPPROTO_FRAGMENT 44
#endif

static __always_inline void fw_addr_v4(struct in6_addr *dst, __be32 a)
{
	/* IPv4-mapped IPv6 (::ffff:a.b.c.d): v4 and v6 rules share one space. */
	dst->in6_u.u6_addr32[0] = 0;
	dst->in6_u.u6_addr32[1] = 0;
	dst->in6_u.u6_addr32[2] = bpf_htonl(0xffff);
	dst->in6_u.u6_addr32[3] = a;
}

static __always_inline void fw_set_addr(struct fw_view *v, int f, const struct in6_addr *a)
{
	ipv6_addr_copy(&v->addr[f], a);
	v->present[f] = 1;
}

/* fw_ports reads the transport ports at off when proto is TCP or UDP. */
static __always_inline void fw_ports(const struct pkt *p, struct fw_view *v, __u32 proto, __u32 off)
{
	__be16 *ports;

	v->val[FW_F_PROTO - FW_NADDR] = proto;
	v->val[FW_F_SPORT - FW_NADDR] = 65536;
	v->val[FW_F_DPORT - FW_NADDR] = 65536;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return;
	if (off > FW_MAX_OFF)
		return;
	ports = pkt_ptr(p, off, 4);
	if (!ports)
		return;
	v->val[FW_F_SPORT - FW_NADDR] = bpf_ntohs(ports[0]);
	v->val[FW_F_DPORT - FW_NADDR] = bpf_ntohs(ports[1]);
}

/* fw_ip4 fills src/dst/proto/ports from an IPv4 header at off into the
 * given address fields. Non-first fragments carry no ports.
 */
static __always_inline __u32 fw_ip4(const struct pkt *p, struct fw_view *v, __u32 off,
				    int fsrc, int fdst, int transport)
{
	struct iphdr *ip4;

	if (off > FW_MAX_OFF)
		return DROP_PKT_TRUNCATED;
	ip4 = pkt_ptr(p, off, sizeof(*ip4));
	if (!ip4)
		return DROP_PKT_TRUNCATED;
	fw_addr_v4(&v->addr[fsrc], ip4->saddr);
	v->present[fsrc] = 1;
	/* IPv4 addresses are kept IPv4-mapped; the family field keeps IPv4
	 * and IPv6 rules apart (an IPv6 prefix never matches IPv4).
	 */
	v->val[(fsrc == FW_F_SRC ? FW_F_FAM : FW_F_IFAM) - FW_NADDR] = 4;
	fw_addr_v4(&v->addr[fdst], ip4->daddr);
	v->present[fdst] = 1;
	if (transport) {
		__u32 l4off = off + ((__u32)ip4->ihl & 0xf) * 4;

		/* Non-first fragments have no transport header: no ports. */
		if (ip4->frag_off & bpf_htons(0x1fff))
			l4off = FW_MAX_OFF + 1;
		fw_ports(p, v, ip4->protocol, l4off);
	}
	return DROP_NONE;
}

#ifndef IPPROTO_AH
#define IPPROTO_AH 51
#endif

/* fw_forget returns x through map memory, so the verifier knows nothing
 * of it: the states of the header walk's paths (different offsets) become
 * equal after the caller's bound check and are pruned, instead of
 * multiplying with every later loop.
 */
static __always_inline __u32 fw_forget(struct fw_view *v, __u32 x)
{
	*(volatile __u32 *)&v->tmp = x;
	return *(volatile __u32 *)&v->tmp;
}

/* fw_walk skips the IPv6 extension headers starting at *off (next header
 * *nh) as ip6tables' ipv6_find_hdr does for the transport: Hop-by-Hop,
 * Destination Options, Routing, Fragment and AH, at most FW_MAX_EXT of
 * them. A first fragment (offset 0) goes on to its transport; a non-first
 * fragment stops at its fragment header: *nh is the protocol it carries,
 * *nonfirst is set (no ports). rtoff (may be NULL) receives the offset of
 * the first routing header. A header whose first 2 bytes (8 for a
 * fragment header) are cut is DROP_PKT_TRUNCATED. Used for the outer and the inner IPv6 header.
 */
static __always_inline __u32 fw_walk(const struct pkt *p, struct fw_view *v, __u8 *nhp, __u32 *offp,
				     __u32 *rtoff, int *nonfirst)
{
	__u32 off = *offp;
	__u8 nh = *nhp;
	int i;

	for (i = 0; i < FW_MAX_EXT; i++) {
		__u8 *h;

		if (nh != IPPROTO_HOPOPTS && nh != IPPROTO_DSTOPTS && nh != IPPROTO_ROUTING &&
		    nh != IPPROTO_FRAGMENT && nh != IPPROTO_AH)
			break;
		off = fw_forget(v, off);
		if (off > FW_MAX_OFF)
			return DROP_PKT_TRUNCATED;
		h = pkt_ptr(p, off, 2);
		if (!h)
			return DROP_PKT_TRUNCATED;
		if (nh == IPPROTO_ROUTING && rtoff && !*rtoff)
			*rtoff = off;
		if (nh == IPPROTO_FRAGMENT) {
			h = pkt_ptr(p, off, 8);
			if (!h)
				return DROP_PKT_TRUNCATED;
			nh = h[0];
			off += 8;
			/* Fragment offset (13 bits) != 0: no transport here. */
			if ((((__u32)h[2] << 8) | h[3]) & 0xfff8) {
				*nonfirst = 1;
				break;
			}
			continue;
		}
		if (nh == IPPROTO_AH)
			off += ((__u32)h[1] + 2) * 4;
		else
			off += ((__u32)h[1] + 1) * 8;
		nh = h[0];
	}
	*nhp = nh;
	*offp = fw_forget(v, off);
	return DROP_NONE;
}

/* fw_extract fills v (and fp) for the IPv6 packet at p->l3off.
 * Returns a drop reason for malformed packets (a routing header of type 4
 * that fails srh_validate / srh_validate_tlvs, truncated headers).
 */
static __always_inline __u32 fw_extract6(const struct pkt *p, __u32 mode, struct fw_view *v,
					 struct fw_pkt *fp)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	struct srh_fixed *srh;
	struct in6_addr *seg;
	__u32 off, rtoff = 0, reason;
	int nonfirst = 0;
	__u8 nh;

	if (!ip6)
		return DROP_PKT_TRUNCATED;
	nh = ip6->nexthdr;
	off = p->l3off + sizeof(*ip6);
	reason = fw_walk(p, v, &nh, &off, &rtoff, &nonfirst);
	if (reason)
		return reason;

	/* An ICMPv6 error (type < 128) is never answered with one (RFC
	 * 4443 2.4 (e)).
	 */
	if (nh == IPPROTO_ICMPV6 && !nonfirst && off <= FW_MAX_OFF) {
		__u8 *it = pkt_ptr(p, off, 1);

		fp->icmp_err = !it || it[0] < 128;
	}
	fw_set_addr(v, FW_F_SRC, &ip6->saddr);
	fw_set_addr(v, FW_F_DST, &ip6->daddr);
	v->val[FW_F_FAM - FW_NADDR] = 6;
	v->val[FW_F_SRH - FW_NADDR] = 0;

	if (rtoff && rtoff <= FW_MAX_OFF) {
		fp->si.ip6off = p->l3off;
		fp->si.srhoff = rtoff;
		srh = pkt_ptr(p, rtoff, sizeof(*srh));
		if (!srh)
			return DROP_SRH_TRUNCATED;
		/* Other routing types (2, 3, deprecated 0) are not SR traffic. */
		if (srh->type == SRCHAIN_SRH_TYPE) {
			reason = srh_validate(p, &fp->si);
			if (!reason)
				reason = srh_validate_tlvs(p, &fp->si);
			if (reason)
				return reason;
			fp->sr = 1;
			fw_set_addr(v, FW_F_ASID, &ip6->daddr);
			v->val[FW_F_SRH - FW_NADDR] = 1;
			v->val[FW_F_NEXTHDR - FW_NADDR] = srh->nexthdr;
			v->val[FW_F_HDRLEN - FW_NADDR] = srh->hdrlen;
			v->val[FW_F_SEGS - FW_NADDR] = srh->segments_left;
			v->val[FW_F_LAST - FW_NADDR] = srh->last_entry;
			v->val[FW_F_TAG - FW_NADDR] = bpf_ntohs(srh->tag);
			seg = srh_segment(p, &fp->si, 0);
			if (seg)
				fw_set_addr(v, FW_F_LSID, seg);
			if (fp->si.sl < fp->si.last_entry) {
				seg = srh_segment(p, &fp->si, (__u32)fp->si.sl + 1);
				if (seg)
					fw_set_addr(v, FW_F_PSID, seg);
			}
			if (fp->si.sl > 0) {
				seg = srh_segment(p, &fp->si, (__u32)fp->si.sl - 1);
				if (seg)
					fw_set_addr(v, FW_F_NSID, seg);
			}
		}
	}

	fp->encap = fp->sr && !nonfirst && (nh == IPPROTO_IPV6 || nh == IPPROTO_IPIP);
	if (fp->encap) {
		int basic = mode == FW_MODE_BASIC;

		if (nh == IPPROTO_IPIP) {
			reason = fw_ip4(p, v, off, FW_F_INNER_SRC, FW_F_INNER_DST, basic);
			if (reason)
				return reason;
		} else {
			struct ipv6hdr *in6;
			__u32 ioff = off + sizeof(*in6);
			int infrag = 0;
			__u8 inh;

			if (off > FW_MAX_OFF)
				return DROP_PKT_TRUNCATED;
			in6 = pkt_ptr(p, off, sizeof(*in6));
			if (!in6)
				return DROP_PKT_TRUNCATED;
			fw_set_addr(v, FW_F_INNER_SRC, &in6->saddr);
			fw_set_addr(v, FW_F_INNER_DST, &in6->daddr);
			v->val[FW_F_IFAM - FW_NADDR] = 6;
			if (basic) {
				inh = in6->nexthdr;
				reason = fw_walk(p, v, &inh, &ioff, NULL, &infrag);
				if (reason)
					return reason;
				fw_ports(p, v, inh, infrag ? FW_MAX_OFF + 1 : ioff);
			}
		}
		if (basic) {
			/* Legacy rules see the original packet (seed 000 IV.A). */
			ipv6_addr_copy(&v->addr[FW_F_SRC], &v->addr[FW_F_INNER_SRC]);
			ipv6_addr_copy(&v->addr[FW_F_DST], &v->addr[FW_F_INNER_DST]);
			v->val[FW_F_FAM - FW_NADDR] = v->val[FW_F_IFAM - FW_NADDR];
			return DROP_NONE;
		}
	} else if (fp->sr) {
		/* Insert mode: the original packet goes from the outer source
		 * to segment[0] (seed 000 IV.B, V.A): those are its inner
		 * addresses in both modes, and -d in basic mode.
		 */
		fw_set_addr(v, FW_F_INNER_SRC, &ip6->saddr);
		v->val[FW_F_IFAM - FW_NADDR] = 6;
		if (v->present[FW_F_LSID]) {
			ipv6_addr_copy(&v->addr[FW_F_INNER_DST], &v->addr[FW_F_LSID]);
			v->present[FW_F_INNER_DST] = 1;
			if (mode == FW_MODE_BASIC)
				ipv6_addr_copy(&v->addr[FW_F_DST], &v->addr[FW_F_LSID]);
		}
	}
	fw_ports(p, v, nh, nonfirst ? FW_MAX_OFF + 1 : off);
	return DROP_NONE;
}

/* fw_srh_absent: SL = last entry + 1 is a valid SRH (RFC 8986 4.1 S09,
 * srh_validate) whose active SID is only in the destination, but the
 * kernel's ip6t_srh does not match it at all (segments_left >
 * first_segment -> false): -m srh is false and every SRH field absent.
 * The SR actions still see the SRH (fp).
 */
static __always_inline void fw_srh_absent(struct fw_view *v)
{
	v->present[FW_F_PSID] = 0;
	v->present[FW_F_NSID] = 0;
	v->present[FW_F_LSID] = 0;
	v->present[FW_F_ASID] = 0;
	v->present[FW_F_INNER_SRC] = 0;
	v->present[FW_F_INNER_DST] = 0;
	v->val[FW_F_IFAM - FW_NADDR] = 256;
	v->val[FW_F_SRH - FW_NADDR] = 0;
	v->val[FW_F_NEXTHDR - FW_NADDR] = 256;
	v->val[FW_F_HDRLEN - FW_NADDR] = 256;
	v->val[FW_F_SEGS - FW_NADDR] = 256;
	v->val[FW_F_LAST - FW_NADDR] = 256;
	v->val[FW_F_TAG - FW_NADDR] = 65536;
}

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

/* Words the SR actions rewrite, for the CHECKSUM_COMPLETE fix-up (as in
 * bpf/end.c): the destination and the SRH word holding segments left.
 */
struct fw_words {
	struct in6_addr daddr;
	__be32 srhw0;
};

static __always_inline int fw_words_read(const struct pkt *p, const struct srh_info *si,
					 struct fw_words *w)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off, sizeof(*ip6));
	__be32 *srhw = pkt_ptr(p, si->srhoff, 4);

	if (!ip6 || !srhw)
		return -1;
	ipv6_addr_copy(&w->daddr, &ip6->daddr);
	w->srhw0 = *srhw;
	return 0;
}

/* fw_seg6 performs a SEG6 target action (seed 000 V.B, Listing 3):
 *   go-next   SL >= 1: SL -= 1, DA = segment[SL]   (RFC 8986 4.1 End)
 *   skip-next SL >= 2: SL -= 2, DA = segment[SL]
 *   go-last   SL >= 1: SL = 0,  DA = segment[0]
 * A failed precondition (or a non-SR packet) is DROP_FW_PRECOND. The hop
 * limit is left to the stack, which forwards the packet (lib/fib.h
 * policy), so it is decremented exactly once.
 */
static __always_inline __u32 fw_seg6(const struct pkt *p, const struct fw_pkt *fp, __u32 act)
{
	struct ipv6hdr *ip6;
	struct srh_fixed *srh;
	struct in6_addr *seg;
	__u32 sl;

	if (!fp->sr)
		return DROP_FW_PRECOND;
	sl = fp->si.sl;
	if (act == FW_ACT_GO_NEXT) {
		if (sl < 1)
			return DROP_FW_PRECOND;
		sl -= 1;
	} else if (act == FW_ACT_SKIP_NEXT) {
		if (sl < 2)
			return DROP_FW_PRECOND;
		sl -= 2;
	} else {
		if (sl < 1)
			return DROP_FW_PRECOND;
		sl = 0;
	}
	ip6 = pkt_ptr(p, fp->si.ip6off, sizeof(*ip6));
	srh = srh_fixed_hdr(p, &fp->si);
	seg = srh_segment(p, &fp->si, sl);
	if (!ip6 || !srh || !seg)
		return DROP_SRH_TRUNCATED;
	srh->segments_left = sl;
	ipv6_addr_copy(&ip6->daddr, seg);
	return DROP_NONE;
}

/* fw_in_sid reports whether da lies in the NF's SID prefix. */
static __always_inline int fw_in_sid(const struct in6_addr *da, const struct fw_config *cfg)
{
	__u32 len = cfg->sid_len, i;

	if (len > 128)
		return 1;
#pragma unroll
	for (i = 0; i < 4; i++) {
		__u32 bits = len > 32 * i ? len - 32 * i : 0, mask;

		if (bits > 32)
			bits = 32;
		mask = bits ? ~0U << (32 - bits) : 0;
		if ((bpf_ntohl(da->in6_u.u6_addr32[i]) ^ bpf_ntohl(cfg->sid.in6_u.u6_addr32[i])) & mask)
			return 0;
	}
	return 1;
}

/* fw_icmp_allow takes a token from this CPU's bucket: rate per second,
 * burst rate. Returns 0 when the error must not be sent.
 */
static __always_inline int fw_icmp_allow(__u32 rate)
{
	struct fw_bucket *b;
	__u32 zero = 0;
	__u64 now, el, add;

	b = bpf_map_lookup_elem(&fw_icmp_bucket, &zero);
	if (!b)
		return 0;
	now = bpf_ktime_get_ns();
	el = now - b->last;
	if (el >= 1000000000ULL) {
		b->tokens = rate;
		b->last = now;
	} else {
		add = el * rate / 1000000000ULL;
		if (add) {
			b->tokens += add;
			if (b->tokens > rate)
				b->tokens = rate;
			/* Advance by the time the whole tokens took, not
			 * to now: the fraction of a token carries over.
			 */
			b->last += add * 1000000000ULL / rate;
		}
	}
	if (!b->tokens)
		return 0;
	b->tokens -= 1;
	return 1;
}

/* fw_args_verdict: eval-args. The low args_bits of the active SID (the
 * destination address) select the action in fw_args (seed 000 V.B,
 * sysctl ip6t_seg6_args). Returns 0 for an unknown value.
 */
static __always_inline __u32 fw_args_verdict(const struct in6_addr *da, __u32 bits, __u32 gen)
{
	__u64 lo = ((__u64)bpf_ntohl(da->in6_u.u6_addr32[2]) << 32) | bpf_ntohl(da->in6_u.u6_addr32[3]);
	struct fw_args_key k;
	__u32 *act;

	if (bits < 64)
		lo &= (1ULL << bits) - 1;
	k.args = lo;
	k.gen = gen & 1;
	act = bpf_map_lookup_elem(&fw_args, &k);
	if (!act || *act == FW_ACT_EVAL_ARGS || *act == 0)
		return 0;
	return *act;
}

#endif /* SRCHAIN_FW_H */
