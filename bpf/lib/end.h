/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SRv6 End and End.X (RFC 8986 4.1, 4.2) on a parsed packet.
 *
 * Attach-point neutral: works on a struct pkt, so a tc program
 * (bpf/end.c) and an XDP program can share it. The entry program does
 * the SID lookup, srh_parse, end_apply, then forwards (lib/fib.h).
 */
#ifndef SRCHAIN_END_H
#define SRCHAIN_END_H

#include "common.h"
#include "counters.h"
#include "srh.h"

/* Behaviors a SID map entry can name. Values are ABI with
 * internal/datapath (Behavior constants).
 */
#define SRCHAIN_BEH_END 1
#define SRCHAIN_BEH_END_X 2

/* Value of the SID map (key: the 16-byte SID). Layout mirrored by
 * internal/datapath.sidEntry.
 */
struct sid_entry {
	__u32 behavior; /* SRCHAIN_BEH_* */
	__u32 oif;      /* End.X: outgoing ifindex */
	__u32 counter;  /* slot in sid_counters */
	__u32 plen;     /* LOC+FUNCT length of the SID prefix (0 or 128: whole address) */
	struct in6_addr nh6; /* End.X: next hop (zero: the new DA is on-link) */
	__u32 csid;     /* End NEXT-C-SID flavor: block bits << 8 | C-SID bits; 0: none */
};

/* SIDs served by the End programs. Key: the SID with its ARGS bits zero
 * (the address masked to the entry's plen, LOC+FUNCT; RFC 8986 3.1).
 * Defined here so the tc and XDP objects declare identical maps and the
 * loader can share one instance between them (MapReplacements).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SRCHAIN_MAX_SID_COUNTERS);
	__type(key, struct in6_addr);
	__type(value, struct sid_entry);
} sids SEC(".maps");

/* The prefix lengths shorter than 128 that SIDs in `sids` have (SIDs with
 * ARGS bits), longest first, so a destination is matched on LOC+FUNCT as
 * the kernel's seg6local route (a prefix route) matches it. Kept by the
 * loader (datapath.End.SetSID) from the map's contents. One entry.
 */
#define SID_LENS_MAX 4
struct sid_len_set {
	__u32 n;                 /* valid entries of len */
	__u8 len[SID_LENS_MAX];  /* 1..127, descending */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sid_len_set);
} sid_lens SEC(".maps");

/* ipv6_mask_word is the network-order mask of bits [32w, 32w+32) of a
 * /plen prefix.
 */
static __always_inline __u32 ipv6_mask_word(__u32 plen, __u32 w)
{
	__u32 bits = plen > 32 * w ? plen - 32 * w : 0;

	if (bits >= 32)
		return 0xffffffff;
	if (bits == 0)
		return 0;
	return bpf_htonl(0xffffffffU << (32 - bits));
}

/* sid_lookup finds the SID serving da: the exact address first (SIDs
 * without ARGS, the common case: one hash lookup), then da masked to each
 * shorter SID length in use, longest first (longest match, as the
 * routing table).
 */
static __always_inline struct sid_entry *sid_lookup(const struct in6_addr *da)
{
	struct sid_entry *e = bpf_map_lookup_elem(&sids, da);
	struct sid_len_set *l;
	__u32 zero = 0;
	int i;

	if (e)
		return e;
	l = bpf_map_lookup_elem(&sid_lens, &zero);
	if (!l)
		return NULL;
	for (i = 0; i < SID_LENS_MAX; i++) {
		struct in6_addr key;
		__u32 plen, w;

		if (i >= l->n)
			break;
		plen = l->len[i];
		for (w = 0; w < 4; w++)
			key.in6_u.u6_addr32[w] = da->in6_u.u6_addr32[w] & ipv6_mask_word(plen, w);
		e = bpf_map_lookup_elem(&sids, &key);
		if (e && e->plen == plen)
			return e;
	}
	return NULL;
}

/* Why a packet to a SID went to the kernel's own seg6local End (the slow
 * path) untouched. Names mirrored by internal/datapath (passReasons);
 * only append. Counted per CPU in pass_counters by the tc program (the
 * XDP twin passes to tc, which decides again and counts).
 */
enum end_pass_reason {
	PASS_NONE = 0,
	PASS_NOT_HOST,     /* frame not addressed to this host (pkt_type) */
	PASS_IPV6_HDR,     /* version, jumbogram, payload length beyond the frame */
	PASS_TRAILING,     /* bytes beyond the payload length (the kernel trims) */
	PASS_SOURCE,       /* source ::, ::1, v4-mapped, multicast, link-local */
	PASS_HOP_BY_HOP,   /* Hop-by-Hop options (parsed by the kernel) */
	PASS_EXT_ORDER,    /* SRH not right after IPv6 + Destination Options, or SL 0 */
	PASS_LIMITS,       /* > SRCHAIN_MAX_SEGS segments or > SRCHAIN_MAX_TLVS TLVs */
	PASS_HMAC,         /* HMAC TLV: the kernel verifies it */
	PASS_HOP_LIMIT,    /* hop limit <= 1: the kernel's error quotes the original */
	PASS_NEXT_LOCAL,   /* next SID served here too: the kernel runs each pass */
	PASS_NEXT_SPECIAL, /* next SID link-local, multicast, loopback, unspecified */
	PASS_FIB,          /* FIB lookup not SUCCESS (fib_counters says which) */
	PASS_MTU,          /* End.X: too big for the adjacency */
	PASS_PULL,         /* could not linearize the packet */
	PASS_MAX,
};

#define SRCHAIN_PASS_SLOTS 32
_Static_assert(PASS_MAX <= SRCHAIN_PASS_SLOTS, "pass_counters too small");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SRCHAIN_PASS_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} pass_counters SEC(".maps");

static __always_inline void count_pass(__u32 reason)
{
	__u32 key = reason < SRCHAIN_PASS_SLOTS ? reason : 0;
	__u64 *v = bpf_map_lookup_elem(&pass_counters, &key);

	if (v)
		*v += 1;
}

/* Load-time options of the End programs (set from Go before load, see
 * datapath.EndOptions):
 *   cfg_stack_forward  non-zero: never forward from the program; after the
 *                      End rewrite hand every packet to the stack
 *                      (TC_ACT_OK; XDP passes everything untouched to tc),
 *                      so netfilter FORWARD/POSTROUTING rules, policy
 *                      routing and the kernel's MTU handling apply on an
 *                      End node. End.X then follows the routing table
 *                      for the new DA (docs/datapath.md).
 */
SRCHAIN_CONFIG(__u32, cfg_stack_forward, 0);

/* end_next_da performs the checks of RFC 8986 4.1 that precede the rewrite
 * on a packet whose SRH si srh_parse validated (S09, SL > last entry + 1,
 * is already excluded; SL = last entry + 1 is legal and moves to
 * segment[last entry]) and copies the next SID, segment[SL - 1], to *nda
 * without touching the packet:
 *   SL == 0 -> DROP_SRH_SL_ZERO. The kernel would stop processing the
 *              SRH and process the next header (S02-S03); a SID that
 *              srchain runs as End is never the final SID of a list, so
 *              this is a misdirected or forged packet.
 * The hop limit is not checked here (S05-S07 of 4.1 are not applied
 * before the rewrite): like the kernel's seg6local End, which rewrites and
 * calls dst_input, srchain rewrites whatever the hop limit and leaves
 * hop-limit exhaustion to whoever forwards: the program takes its fast
 * path only when the hop limit is > 1 and otherwise hands the rewritten
 * packet to the stack, whose ip6_forward sends ICMPv6 Time Exceeded (or
 * delivers it when the next SID is local, e.g. a kernel End.DT6).
 */
static __always_inline __u32 end_next_da(const struct pkt *p, const struct srh_info *si,
					 struct in6_addr *nda)
{
	struct in6_addr *seg;
	__u8 sl = si->sl;

	if (sl == 0)
		return DROP_SRH_SL_ZERO;
	seg = srh_segment(p, si, sl - 1);
	if (!seg)
		return DROP_SRH_TRUNCATED;
	ipv6_addr_copy(nda, seg);
	return DROP_NONE;
}

/* end_apply performs the End rewrite of RFC 8986 4.1 on the packet:
 * end_next_da's checks, then SL-- and DA = segment[SL] (S12-S14; S12 also
 * decrements the hop limit, which is NOT done here: whoever forwards the
 * packet does it, the program before a redirect or the kernel's
 * ip6_forward when the packet is handed to the stack, so it happens
 * exactly once).
 */
static __always_inline __u32 end_apply(const struct pkt *p, const struct srh_info *si)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off & 0x3fff, sizeof(*ip6));
	struct srh_fixed *srh = srh_fixed_hdr(p, si);
	struct in6_addr nda;
	__u32 reason;

	if (!ip6 || !srh)
		return DROP_PKT_TRUNCATED;
	reason = end_next_da(p, si, &nda);
	if (reason)
		return reason;
	srh->segments_left = si->sl - 1;
	ipv6_addr_copy(&ip6->daddr, &nda);
	return DROP_NONE;
}

/* Outcome of end_classify. */
#define END_FAST 0 /* the fast path completes it: plan filled */
#define END_PASS 1 /* hand to the kernel untouched; *reason: enum end_pass_reason */
#define END_DROP 2 /* the kernel drops it too; *reason: drop reason */

/* end_plan is what end_classify found: the validated SRH and the next
 * SID, to write only once the forwarding decision is made.
 */
struct end_plan {
	struct srh_info si;
	struct in6_addr nda;
	__u32 shift; /* NEXT-C-SID: nda is the shifted container, SL stays */
};

/* csid_shift is the NEXT-C-SID step of RFC 9800 section 4.1.1 for an End
 * with the flavor (csid: block bits << 8 | C-SID bits, whole bytes, as
 * the kernel requires): when the destination's argument (the bits after
 * block + C-SID) is not zero, *out is the destination with the argument
 * shifted left by one C-SID behind the block, zeros after, and the
 * result is 1; with a zero argument the result is 0 and the End goes on
 * as without the flavor (SL - 1, next segment).
 */
static __always_inline int csid_shift(const struct in6_addr *da, __u32 csid, struct in6_addr *out)
{
	__u32 lb = (csid >> 8) / 8, nf = (csid & 0xff) / 8, i;
	__u8 arg = 0;

	if (nf == 0 || lb + nf >= 16)
		return 0; /* no room for an argument */
	/* Branch-free masks (all-ones or zero), so the unrolled loops stay
	 * straight-line code for the verifier: keep = i < lb, in = i + nf
	 * < 16, tail = i >= lb + nf.
	 */
	for (i = 0; i < 16; i++) {
		__u8 b = da->in6_u.u6_addr8[i];
		__u8 src = da->in6_u.u6_addr8[(i + nf) & 15];
		__u8 keep = -(__u8)((i - lb) >> 31);
		__u8 in = -(__u8)((i + nf - 16) >> 31);
		__u8 tail = ~(__u8)-(__u8)((i - lb - nf) >> 31);

		arg |= b & tail;
		out->in6_u.u6_addr8[i] = (b & keep) | (src & in & ~keep);
	}
	return arg != 0;
}

/* end_tlvs_kernel walks the TLV area as the kernel's seg6_validate_srh
 * does (every TLV, type 0 included, is type + length + value; they must
 * tile the area), for at most SRCHAIN_MAX_TLVS TLVs. END_DROP when they
 * do not tile (the kernel drops), END_PASS when there are more (the
 * kernel decides), END_FAST otherwise. Reading type 0 as a TLV, not as
 * RFC 8754's 1-byte Pad1, is the kernel's reading: the fast path must
 * agree with the slow path on every packet.
 */
static __always_inline int end_tlvs_kernel(const struct pkt *p, const struct srh_info *si)
{
	__u32 end = si->srhoff + si->srhlen;
	__u32 off = si->tlvoff;
	int i;

	for (i = 0; i < SRCHAIN_MAX_TLVS; i++) {
		__u8 *tlv;

		if (off == end)
			return END_FAST;
		if (off + 2 > end)
			return END_DROP;
		off &= 0x3fff; /* no-op at run time, bounds the verifier (srh.h) */
		tlv = pkt_ptr(p, off, 2);
		if (!tlv)
			return END_DROP;
		off += 2 + (__u32)tlv[1];
		if (off > end)
			return END_DROP;
	}
	return off == end ? END_FAST : END_PASS;
}

/* ipv6_addr_special: unspecified, loopback, IPv4-mapped, multicast or
 * link-local: addresses ip6_rcv_core / ip6_forward treat specially as a
 * source (RFC 4291 2.5.2, 2.5.3, 2.7; v4-mapped sources are dropped on
 * input), or that a forwarding lookup treats specially as a destination.
 */
static __always_inline int ipv6_addr_special(const struct in6_addr *a)
{
	__u32 w0 = bpf_ntohl(a->in6_u.u6_addr32[0]);

	if ((w0 >> 24) == 0xff || (w0 & 0xffc00000) == 0xfe800000)
		return 1;
	if (w0 != 0 || a->in6_u.u6_addr32[1] != 0)
		return 0;
	if (a->in6_u.u6_addr32[2] == bpf_htonl(0xffff))
		return 1; /* ::ffff:0:0/96 */
	return a->in6_u.u6_addr32[2] == 0 &&
	       (a->in6_u.u6_addr32[3] == 0 || a->in6_u.u6_addr32[3] == bpf_htonl(1));
}

/* end_next_checks: the new destination must be one the fast path can
 * forward to: not special (the kernel's lookup treats those apart), not
 * a SID of this node (the kernel runs every local pass and counts them).
 */
static __always_inline int end_next_checks(struct end_plan *pl, __u32 *reason)
{
	*reason = PASS_NEXT_SPECIAL;
	if (ipv6_addr_special(&pl->nda))
		return END_PASS;
	*reason = PASS_NEXT_LOCAL;
	if (sid_lookup(&pl->nda))
		return END_PASS;
	*reason = 0;
	return END_FAST;
}

/* end_classify decides, before anything is written, whether the End fast
 * path can complete this packet exactly as the kernel's seg6local End
 * (followed by ip6_forward) would, on a linear packet whose IPv6 header
 * at p->l3off is addressed to a SID and that the caller has checked is
 * addressed to this host at layer 2. `have` is the number of bytes from
 * the IPv6 header to the end of the frame.
 *
 * The fast path takes only the common form: IPv6 version 6 without
 * trailing bytes, an ordinary unicast source, the SRH (routing type 4,
 * Segments Left > 0) right after the IPv6 header or after up to
 * SRCHAIN_MAX_EXTHDRS Destination Options headers, at most
 * SRCHAIN_MAX_SEGS segments and SRCHAIN_MAX_TLVS TLVs, no HMAC checked
 * by the kernel, hop limit > 1. Everything else is END_PASS: the kernel
 * runs its own End (the SID's seg6local route is the slow path), so its
 * result is the kernel's by construction. END_DROP only where the kernel
 * certainly drops too: the routing header the kernel's seg6_get_srh
 * would pick is truncated, not type 4, or fails seg6_validate_srh.
 */
static __always_inline int end_classify(const struct pkt *p, __u32 have, const struct sid_entry *sid,
					struct end_plan *pl, __u32 *reason)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	struct srh_info *si = &pl->si;
	struct ipv6_walk w = {};
	struct srh_fixed *srh;
	__u32 len, seglen, pktlen;
	int r;

	*reason = PASS_IPV6_HDR;
	if (!ip6 || ip6->version != 6 || ip6->payload_len == 0)
		return END_PASS;
	pktlen = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	if (pktlen > have)
		return END_PASS;
	*reason = PASS_TRAILING;
	if (pktlen < have)
		return END_PASS;
	*reason = PASS_SOURCE;
	if (ipv6_addr_special(&ip6->saddr))
		return END_PASS;
	*reason = PASS_HOP_BY_HOP;
	if (ip6->nexthdr == IPPROTO_HOPOPTS)
		return END_PASS;

	/* NEXT-C-SID with a non-zero argument: the kernel shifts the
	 * container without looking at any SRH (seg6_local.c
	 * end_next_csid_core; RFC 9800 4.1.1), Segments Left 0 included.
	 */
	pl->shift = 0;
	if (sid->csid) {
		struct in6_addr da;

		ipv6_addr_copy(&da, &ip6->daddr);
		pl->shift = csid_shift(&da, sid->csid, &pl->nda);
		if (pl->shift) {
			pl->si.ip6off = p->l3off;
			*reason = PASS_HOP_LIMIT;
			if (ip6->hop_limit <= 1)
				return END_PASS;
			goto next; /* one copy of the checks: verifier cost */
		}
	}

	/* Destination Options only (the first header is not Hop-by-Hop):
	 * anything else before the routing header (Fragment, AH, more
	 * options headers) is for the kernel's ipv6_find_hdr.
	 */
	*reason = PASS_EXT_ORDER;
	si->ip6off = p->l3off;
	w.nh = ip6->nexthdr;
	w.off = p->l3off + sizeof(*ip6);
	if (ipv6_walk(p, &w, IPV6_WALK_OPTS, SRCHAIN_MAX_EXTHDRS, 0, NULL) || w.nh != IPPROTO_ROUTING)
		return END_PASS;
	si->srhoff = w.off;
	srh = pkt_ptr(p, si->srhoff, sizeof(*srh));
	if (!srh) {
		*reason = DROP_SRH_TRUNCATED;
		return END_DROP;
	}
	/* A routing header with Segments Left 0 is skipped by the kernel
	 * (IP6_FH_F_SKIP_RH), which looks for another one behind it.
	 */
	if (srh->segments_left == 0)
		return END_PASS;
	if (srh->type != SRCHAIN_SRH_TYPE) {
		*reason = DROP_SRH_BAD_TYPE;
		return END_DROP;
	}
	len = ((__u32)srh->hdrlen + 1) * 8;
	if (p->data + si->srhoff + len > p->data_end) {
		*reason = DROP_SRH_TRUNCATED;
		return END_DROP;
	}
	/* seg6_validate_srh: last entry <= hdrlen / 2 - 1, SL <= last
	 * entry + 1, TLVs tile the rest.
	 */
	seglen = ((__u32)srh->last_entry + 1) * 16;
	if ((__u32)srh->hdrlen * 8 < seglen) {
		*reason = DROP_SRH_BAD_LEN;
		return END_DROP;
	}
	if (srh->segments_left > (__u32)srh->last_entry + 1) {
		*reason = DROP_SRH_SL_OVER_LAST;
		return END_DROP;
	}
	*reason = PASS_LIMITS;
	if (srh->last_entry >= SRCHAIN_MAX_SEGS)
		return END_PASS;
	si->srhlen = len;
	si->tlvoff = si->srhoff + sizeof(*srh) + seglen;
	si->sl = srh->segments_left;
	si->last_entry = srh->last_entry;
	si->flags = srh->flags;
	si->nexthdr = srh->nexthdr;
	r = end_tlvs_kernel(p, si);
	if (r == END_DROP)
		*reason = DROP_TLV_BAD;
	if (r != END_FAST)
		return r;

	if (srh_hmac_present(p, si)) {
		/* SRH right after the IPv6 header: the kernel verifies the
		 * HMAC (with its keys), so let it. Behind a Destination
		 * Options header the kernel's check reads that header as the
		 * SRH (seg6_hmac_validate_skb uses the transport header) and
		 * misses the HMAC: srchain, which verifies none, drops
		 * (docs/datapath.md, "Where the kernel is wrong").
		 */
		if (si->srhoff == p->l3off + sizeof(*ip6)) {
			*reason = PASS_HMAC;
			return END_PASS;
		}
		*reason = DROP_UNSUPPORTED;
		return END_DROP;
	}
	*reason = PASS_HOP_LIMIT;
	if (ip6->hop_limit <= 1)
		return END_PASS;
	r = end_next_da(p, si, &pl->nda);
	if (r) {
		*reason = r;
		return END_DROP;
	}
next:
	return end_next_checks(pl, reason);
}

/* end_write performs the planned rewrite: SL--, DA = next SID, hop
 * limit-- (RFC 8986 4.1 S12-S14), or for a NEXT-C-SID shift DA = the
 * shifted container and hop limit-- with SL unchanged (RFC 9800 4.1.1),
 * for a packet the program forwards itself right after.
 */
static __always_inline __u32 end_write(const struct pkt *p, const struct end_plan *pl)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, pl->si.ip6off & 0x3fff, sizeof(*ip6));
	struct srh_fixed *srh;

	if (!ip6)
		return DROP_PKT_TRUNCATED;
	if (!pl->shift) {
		srh = srh_fixed_hdr(p, &pl->si);
		if (!srh)
			return DROP_PKT_TRUNCATED;
		srh->segments_left = pl->si.sl - 1;
	}
	ipv6_addr_copy(&ip6->daddr, &pl->nda);
	ip6->hop_limit -= 1;
	return DROP_NONE;
}

#endif /* SRCHAIN_END_H */
