/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The eBPF ingress (headend): chain table, H.Insert, and the outer
 * header fields computed as the kernel's seg6 encap computes them
 * (net/ipv6/seg6_iptunnel.c). bpf/ingress.c composes it with the
 * firewall's classifier (lib/fw_*.h) and lib/srv6_encap.h.
 *
 * Classification: every chain's match becomes firewall rules (one per
 * destination x source pair, advanced mode: the packet's own fields),
 * built by internal/ingress with internal/firewall's compiler into this
 * object's copies of the fw_* maps. The rule the packet matches indexes
 * ing_policy (same generation as the classifier's tables: one word,
 * fw_gen, switches both).
 */
#ifndef SRCHAIN_INGRESS_H
#define SRCHAIN_INGRESS_H

#include "common.h"
#include "counters.h"
#include "ctx.h"
#include "fw_maps.h"
#include "opot.h"
#include "opot_dp.h"

#define ING_MODE_NONE 0
#define ING_MODE_ENCAP 1  /* H.Encaps (RFC 8986 5.1) */
#define ING_MODE_INSERT 2 /* H.Insert (kernel seg6 "inline") */

/* Chains whose counters ing_counters holds (spec.MaxChains). */
#define ING_MAX_CHAINS 20000

/* What a classifier rule steers into. One per rule slot and generation
 * (key gen * FW_RULE_SLOTS + rule); mode ING_MODE_NONE: no chain.
 */
struct ing_policy {
	__u32 chain;      /* ing_counters slot: the chain's index on the node */
	__u32 mode;       /* ING_MODE_* */
	__u32 nsegs;      /* segments in segs (travel order) */
	__u32 hop_limit4; /* outer hop limit of an IPv4 packet (see below) */
	/* Headend extension (ING_EXT_*, ing_headend_ext): 0 none,
	 * ING_EXT_OPOT the chain's OPoT TLV (encap mode only).
	 */
	__u32 ext;
	/* Per-flow setup (seed 004, internal/flowsetup): a non-zero pool
	 * makes this the policy of a chain with an NF pool; the flow's entry
	 * in ing_flows picks one of its nvariants policies, kept in
	 * ing_variants from vbase on (same generation).
	 */
	__u32 pool;
	__u32 nvariants;
	__u32 vbase;
	struct in6_addr segs[SRCHAIN_MAX_SEGS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * FW_RULE_SLOTS);
	__type(key, __u32);
	__type(value, struct ing_policy);
} ing_policies SEC(".maps");

/* Per-flow setup. ing_variants holds, per generation, the variant
 * policies of every pool chain (ING_VARIANT_SLOTS, at most
 * ING_MAX_VARIANTS per chain). ing_flows maps a flow (the packet's
 * addresses, protocol, ports, and its chain's pool id) to the variant the
 * flow-setup loop chose. A packet of a pool chain with no entry is copied
 * into ing_reports and consumed: the loop installs the entry and sends
 * the packet on itself (encapsulated with the chosen variant), so the
 * first packet is not lost and no flow changes instance.
 */
#define ING_MAX_VARIANTS 8
#define ING_VARIANT_SLOTS 1024
#define ING_MAX_FLOWS 65536
#define ING_REPORT_MAX 2048 /* bytes of a reported packet (from its IP header); a power of two */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FW_GENS * ING_VARIANT_SLOTS);
	__type(key, __u32);
	__type(value, struct ing_policy);
} ing_variants SEC(".maps");

struct ing_flow_key {
	struct in6_addr src; /* IPv4 as IPv4-mapped */
	struct in6_addr dst;
	__u32 pool;          /* ing_policy.pool */
	__u16 sport;         /* host order; 0 unless TCP/UDP */
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

/* The flow key of the packet being classified (per CPU): kept off the
 * stack, which the classifier, the FIB lookups and the rewrite share.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ing_flow_key);
} ing_key_scratch SEC(".maps");

struct ing_flow {
	__u32 variant;
	__u32 pad;
	__u64 last; /* bpf_ktime_get_ns of a recent packet (refreshed once a second) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ING_MAX_FLOWS);
	__type(key, struct ing_flow_key);
	__type(value, struct ing_flow);
} ing_flows SEC(".maps");

struct ing_flow_report {
	__u64 ktime;   /* bpf_ktime_get_ns when the packet arrived */
	struct ing_flow_key key;
	__u32 chain;   /* the policy's chain (index in the node's config) */
	__u32 ifindex;
	__u32 len;     /* the packet's IP length */
	__u32 caplen;  /* bytes of it in data */
	__u8 data[ING_REPORT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} ing_reports SEC(".maps");

/* ing_flow_fill builds the flow key from the classifier's view. */
static __always_inline void ing_flow_fill(const struct fw_view *v, __u32 pool, struct ing_flow_key *k)
{
	__u32 sp = v->val[FW_F_SPORT - FW_NADDR], dp = v->val[FW_F_DPORT - FW_NADDR];

	__builtin_memset(k, 0, sizeof(*k));
	ipv6_addr_copy(&k->src, &v->addr[FW_F_SRC]);
	ipv6_addr_copy(&k->dst, &v->addr[FW_F_DST]);
	k->pool = pool;
	k->proto = v->val[FW_F_PROTO - FW_NADDR] & 0xff;
	k->sport = sp < 65536 ? sp : 0;
	k->dport = dp < 65536 ? dp : 0;
}

/* ing_flow_touch keeps an active flow's entry fresh for the idle sweep
 * of the flow-setup loop, writing at most once a second per flow.
 */
static __always_inline void ing_flow_touch(struct ing_flow *f)
{
	__u64 now = bpf_ktime_get_ns();

	if (now - f->last > 1000000000ULL)
		f->last = now;
}

/* The kernel's routing decision for a flow (ing_kernel_steers in
 * ingress.c), cached so that the fast path pays one hash lookup, not a
 * FIB lookup through every ip rule of the node (5-tuple chains add one
 * rule each): per input interface, mark, addresses, protocol, ports and
 * TOS, for ING_ROUTE_TTL_NS and the chain set it was made with (the
 * first word of ing_config.hash). A route the operator changes is
 * honoured within that time.
 */
#define ING_ROUTE_TTL_NS 1000000000ULL
#define ING_MAX_ROUTES 65536

struct ing_route_key {
	struct in6_addr src; /* IPv4: the address in the last word */
	struct in6_addr dst;
	__u32 ifindex;
	__u32 mark;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 tos;   /* IPv4 TOS */
	__u8 v6;
	__u8 pad;
	__be32 flowinfo; /* IPv6 traffic class + flow label */
	__u32 pad2;
};

struct ing_route {
	__u32 steers; /* 1: the kernel sends it into a chain's seg6 route */
	__u32 tag;    /* ing_config.hash's first word when made */
	__u64 expires;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ING_MAX_ROUTES);
	__type(key, struct ing_route_key);
	__type(value, struct ing_route);
} ing_routes SEC(".maps");

/* The key being built (per CPU): off the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ing_route_key);
} ing_route_scratch SEC(".maps");

/* Node-wide settings, written by the loader. */
struct ing_config {
	struct in6_addr tunsrc; /* outer source (ip sr tunsrc) */
	__s32 flowlabel;        /* net.ipv6.seg6_flowlabel: -1, 0 or 1 */
	/* fib_direct: the node's ip rules are the kernel's defaults and
	 * srchain's chain rules only (checked by the loader), none of which
	 * an outer SRv6 packet can match: the first segment is looked up in
	 * the main table directly (BPF_FIB_LOOKUP_DIRECT), not through one
	 * rule per 5-tuple chain.
	 */
	__u32 fib_direct;
	__u8 hash[32];          /* SHA-256 of the applied config (internal/ingress) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ing_config);
} ing_config_map SEC(".maps");

/* The MAC address of every interface the XDP program is attached to,
 * written by the loader: XDP sees frames before the stack sets
 * skb->pkt_type, and a unicast frame to another host's MAC is not the
 * router's to forward (the kernel drops it as PACKET_OTHERHOST). An
 * array (the verifier inlines its lookup) indexed by ifindex modulo
 * ING_MAC_SLOTS; the entry names its ifindex, so a collision only sends
 * frames the slow way (to tc).
 */
#define ING_MAC_SLOTS 4096

struct ing_mac {
	__u8 addr[6];
	__u16 pad;
	__u32 ifindex;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ING_MAC_SLOTS);
	__type(key, __u32);
	__type(value, struct ing_mac);
} ing_macs SEC(".maps");

/* Packets and IP bytes (of the packet as it arrived) steered into each
 * chain, by tc or XDP (each packet counted once, by whoever encapsulates).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ING_MAX_CHAINS);
	__type(key, __u32);
	__type(value, struct sid_counter);
} ing_counters SEC(".maps");

/* Slots of ing_outcomes: what happened to classified packets. */
#define ING_OUT_REDIRECT 0  /* encapsulated, FIB hit, redirected */
#define ING_OUT_STACK 1     /* encapsulated, handed to the stack (FIB miss, hop limit, MTU) */
#define ING_OUT_XDP_PASS 2  /* XDP left it to tc untouched */
#define ING_OUT_NO_CHAIN 3  /* classified, no chain */
#define ING_OUT_NOT_OURS 4  /* not looked at: not for this host, multicast, malformed */
#define ING_OUT_FLOW_SETUP 5 /* a pool chain's packet with no flow entry: reported, consumed */
#define ING_OUT_KERNEL 6     /* left to the kernel's own path untouched (docs/datapath.md) */
#define ING_OUT_TOO_BIG 7    /* too big for the chain: answered with PTB / fragmentation needed */
#define ING_OUT_MAX 8

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ING_OUT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ing_outcomes SEC(".maps");

static __always_inline void ing_outcome(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&ing_outcomes, &slot);

	if (v)
		*v += 1;
}

static __always_inline void ing_count(__u32 chain, __u64 len)
{
	struct sid_counter *c;

	if (chain >= ING_MAX_CHAINS)
		return;
	c = bpf_map_lookup_elem(&ing_counters, &chain);
	if (c) {
		c->packets += 1;
		c->bytes += len;
	}
}

/* ing_flowinfo is the outer header's first word (traffic class and flow
 * label, network order) as seg6_do_srh_encap writes it:
 *   - traffic class: the inner IPv6 packet's; 0 for IPv4;
 *   - flow label (seg6_make_flowlabel, sysctl net.ipv6.seg6_flowlabel):
 *     0 (default) the inner IPv6 packet's, 0 for IPv4; < 0 always 0;
 *     > 0 the skb's flow hash rotated by 16 bits, its low 20 bits in
 *     network order (hash is that hash; the caller has it only at tc).
 * inner is the IPv6 packet's first word, 0 for IPv4.
 */
static __always_inline __be32 ing_flowinfo(__be32 inner, int v6, __s32 mode, __u32 hash)
{
	__be32 tclass = v6 ? (inner & bpf_htonl(0x0ff00000)) : 0;

	if (mode > 0) {
		__u32 h = (hash << 16) | (hash >> 16);

		return tclass | (h & bpf_htonl(0x000fffff));
	}
	if (mode == 0 && v6)
		return tclass | (inner & bpf_htonl(0x000fffff));
	return tclass;
}

/* srv6_insert is H.Insert as the kernel's seg6 "inline" mode does it
 * (seg6_do_srh_inline): an SRH of n + 1 entries goes right after the
 * fixed IPv6 header (before any extension header, as the kernel puts
 * it), segment[0] = the original destination, segment[i] = travel[n - i],
 * SL = last entry = n, flags and tag 0, next header = the IPv6 header's;
 * the destination becomes travel[0], the payload length grows, the
 * traffic class, flow label and hop limit stay. Upper-layer checksums
 * do not change (they use the final destination, RFC 8200 8.1). At tc
 * CHECKSUM_COMPLETE is fixed. n + 1 <= SRCHAIN_MAX_SEGS.
 */
static __always_inline __u32 srv6_insert(struct pctx *c, const int kind, const struct in6_addr *travel,
					 __u32 n)
{
	struct ipv6hdr old, *ip6;
	struct srh_fixed *srh;
	struct ethhdr eth, *e;
	__u32 srhlen, i;
	__s64 csum = 0;
	int fix;

	if (n < 1 || n + 1 > SRCHAIN_MAX_SEGS)
		return DROP_UNSUPPORTED;
	e = pkt_ptr(&c->p, 0, sizeof(*e));
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!e || !ip6 || c->p.l3off != sizeof(*e))
		return DROP_PKT_TRUNCATED;
	__builtin_memcpy(&eth, e, sizeof(eth));
	__builtin_memcpy(&old, ip6, sizeof(old));
	srhlen = sizeof(*srh) + (n + 1) * sizeof(struct in6_addr);
	if (bpf_ntohs(old.payload_len) + srhlen > 0xffff)
		return DROP_UNSUPPORTED;
	if (kind == CTX_XDP) {
		if (bpf_xdp_adjust_head(c->ctx, -(int)srhlen))
			return DROP_ADJUST_ROOM;
		ctx_reload(c, kind);
		e = pkt_ptr(&c->p, 0, sizeof(*e));
		if (!e)
			return DROP_PKT_TRUNCATED;
		__builtin_memcpy(e, &eth, sizeof(eth));
	} else {
		/* BPF_ADJ_ROOM_NET: room after the fixed IPv6 header, which
		 * the kernel moves to the new front with the MAC header.
		 */
		if (bpf_skb_adjust_room(c->ctx, srhlen, BPF_ADJ_ROOM_NET, 0))
			return DROP_ADJUST_ROOM;
		ctx_reload(c, kind);
	}
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	srh = pkt_ptr(&c->p, c->p.l3off + sizeof(*ip6), sizeof(*srh));
	if (!ip6 || !srh)
		return DROP_PKT_TRUNCATED;
	__builtin_memcpy(ip6, &old, sizeof(old));
	ip6->payload_len = bpf_htons(bpf_ntohs(old.payload_len) + srhlen);
	ip6->nexthdr = IPPROTO_ROUTING;
	ipv6_addr_copy(&ip6->daddr, &travel[0]);
	srh->nexthdr = old.nexthdr;
	srh->hdrlen = 2 * (n + 1);
	srh->type = SRCHAIN_SRH_TYPE;
	srh->segments_left = n;
	srh->last_entry = n;
	srh->flags = 0;
	srh->tag = 0;
	fix = ctx_csum_complete(c, kind);
	if (fix) {
		csum = bpf_csum_diff((__be32 *)&old, sizeof(old), (__be32 *)ip6, sizeof(*ip6), 0);
		csum = bpf_csum_diff(NULL, 0, (__be32 *)srh, sizeof(*srh), csum);
	}
	for (i = 0; i < SRCHAIN_MAX_SEGS; i++) {
		struct in6_addr *seg;

		if (i > n)
			break;
		seg = pkt_ptr(&c->p, c->p.l3off + sizeof(*ip6) + sizeof(*srh) + i * sizeof(*seg),
			      sizeof(*seg));
		if (!seg)
			return DROP_PKT_TRUNCATED;
		if (i == 0)
			ipv6_addr_copy(seg, &old.daddr);
		else
			ipv6_addr_copy(seg, &travel[(n - i) & (SRCHAIN_MAX_SEGS - 1)]);
		if (fix)
			csum = bpf_csum_diff(NULL, 0, (__be32 *)seg, sizeof(*seg), csum);
	}
	if (fix && csum >= 0)
		bpf_csum_update(c->ctx, csum);
	return DROP_NONE;
}

/* ING_EXT_OPOT (ing_policy.ext): the chain proves its order with OPoT
 * (issue 11; seed 003 "ingress init"). The SRH gets OPOT_TLV_LEN bytes
 * of room after its segment list, and the headend writes the TLV there
 * (ing_headend_ext): no second pass over a kernel-built SRH, as the tc
 * headend stage (bpf/opot.c) needs behind the kernel's seg6 encap.
 * The chain's entry and parameters are the OPoT driver's own maps
 * (opot_chains, opot_node_params, opot_seqs, opot_stats), which
 * internal/ingress loads in place of this object's copies.
 */
#define ING_EXT_OPOT 1

/* ing_ext_room is the TLV room policy pol's extension needs. */
static __always_inline __u32 ing_ext_room(const struct ing_policy *pol)
{
	return pol->ext == ING_EXT_OPOT ? OPOT_TLV_LEN : 0;
}

/* ing_headend_ext is THE place where a headend extension fills the room
 * srv6_encaps_fl left in the SRH it just built (c->p re-derived, the SRH
 * right after the outer IPv6 header at c->p.l3off + 40). OPoT: the
 * chain is found as the tc headend stage finds it, by its last SID
 * (segment[0]); the entry must be a headend's whose SID is the first
 * segment. A chain without its entry or profile is dropped here,
 * counted: the verifier would drop it anyway (as the tc stage does).
 */
static __always_inline __u32 ing_headend_ext(struct pctx *c, const int kind, const struct ing_policy *pol)
{
	struct opot_chain_key k;
	struct opot_chain *ch;
	__u32 n = pol->nsegs, off, r;
	__u64 *first, *sid;
	__u8 *tlv;

	if (!pol->ext)
		return DROP_NONE;
	if (pol->ext != ING_EXT_OPOT || pol->mode != ING_MODE_ENCAP || n < 1 || n > SRCHAIN_MAX_SEGS)
		return DROP_UNSUPPORTED;
	__builtin_memcpy(k.last, &pol->segs[(n - 1) & (SRCHAIN_MAX_SEGS - 1)], sizeof(k.last));
	ch = bpf_map_lookup_elem(&opot_chains, &k);
	if (!ch || (ch->role && ch->role != OPOT_ROLE_HEADEND))
		return DROP_OPOT_NO_PROFILE;
	first = (__u64 *)&pol->segs[0];
	sid = (__u64 *)ch->sid;
	if (first[0] != sid[0] || first[1] != sid[1])
		return DROP_OPOT_NO_PROFILE;
	off = c->p.l3off + sizeof(struct ipv6hdr) + 8 + n * sizeof(struct in6_addr);
	/* As the tc headend stage: a GSO packet's segments would share one
	 * proof (docs/opot.md "GSO"). XDP frames are single packets.
	 */
	if (kind == CTX_TC && ((struct __sk_buff *)c->ctx)->gso_segs > 1)
		r = DROP_OPOT_GSO;
	else
		r = opot_headend(&c->p, off, ch->idx, ch->slot);
	if (r) {
		opot_count(ch->idx, r);
		return r;
	}
	/* CHECKSUM_COMPLETE: the room was pushed zeroed (sum 0). */
	if (ctx_csum_complete(c, kind)) {
		tlv = opot_tlv(&c->p, off);
		if (!tlv)
			return DROP_PKT_TRUNCATED;
		bpf_csum_update(c->ctx, bpf_csum_diff(NULL, 0, (__be32 *)tlv, OPOT_TLV_LEN, 0));
	}
	return DROP_NONE;
}

#endif /* SRCHAIN_INGRESS_H */
