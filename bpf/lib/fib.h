/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Forwarding helpers: FIB lookup, MAC rewrite, redirect.
 *
 * Policy of the End programs (docs/datapath.md, "Fast path or kernel"):
 * look the new DA up BEFORE rewriting (fib_lookup_ip6_dst);
 *   - BPF_FIB_LKUP_RET_SUCCESS: the program writes the packet (hop
 *     limit--, SL, DA), the MACs from the lookup, and redirects to
 *     params.ifindex;
 *   - anything else (no route, no neighbour entry yet, blackhole,
 *     unreachable, MTU exceeded, local destination, route with an lwtunnel
 *     encap, forwarding disabled): the packet goes to the kernel
 *     UNTOUCHED, whose own seg6local End for the SID does everything
 *     (neighbour resolution, ICMPv6 errors, local delivery).
 * fib_counters counts lookups by return code so operators can see how
 * much traffic takes the slow path (the End programs' pass_counters say
 * why, lib/end.h).
 */
#ifndef SRCHAIN_FIB_H
#define SRCHAIN_FIB_H

#include "common.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Slots of fib_counters: BPF_FIB_LKUP_RET_* (0..FIB_SLOT_RET_MAX-1), then
 * srchain's own outcomes.
 */
#define FIB_SLOT_RET_MAX 16
#define FIB_SLOT_REDIRECT_NEIGH 16 /* End.X: bpf_redirect_neigh to a pinned nexthop */
#define FIB_SLOT_STACK_FORWARD 17  /* cfg_stack_forward: handed to the stack by configuration */
#define FIB_SLOT_HOP_LIMIT 18      /* unused since issue 8 (pass_counters "hop-limit"); slot kept: ABI */
#define FIB_SLOT_MTU 19            /* End.X: bpf_check_mtu failed: handed to the stack */
#define FIB_SLOT_MAX 32

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FIB_SLOT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} fib_counters SEC(".maps");

/* fib_count adds one to slot (clamped into the map). */
static __always_inline void fib_count(__u32 slot)
{
	__u32 key = slot < FIB_SLOT_MAX ? slot : FIB_SLOT_MAX - 1;
	__u64 *v = bpf_map_lookup_elem(&fib_counters, &key);

	if (v)
		*v += 1;
}

/* BPF_FIB_LOOKUP_MARK (Linux 6.10): use the mark from the lookup
 * parameters for policy routing (fib rules "fwmark"). Debian 12's UAPI
 * headers (6.1) lack it; the value is the kernel's (1U << 5), and the mark
 * is the first 32 bits of the smac/dmac union (struct bpf_fib_lookup, input
 * side), which the old header names smac[0..3].
 */
#ifndef BPF_FIB_LOOKUP_MARK
#define BPF_FIB_LOOKUP_MARK (1U << 5)
#endif

/* fib_lookup_ip6_dst_flags fills params from ip6 with destination daddr (the
 * new DA: the packet may or may not be rewritten yet) and runs
 * bpf_fib_lookup for a packet that arrived on ifindex, with the packet mark for fwmark rules (skb->mark at tc; XDP has
 * none, pass 0). ctx is the program's context (struct __sk_buff * or
 * struct xdp_md *). Returns the BPF_FIB_LKUP_RET_* code (negative on
 * helper error) and counts it. params->tot_len is set, so the helper
 * checks the packet against the route's MTU (BPF_FIB_LKUP_RET_FRAG_NEEDED).
 */
static __always_inline long fib_lookup_ip6_dst_flags(void *ctx, struct bpf_fib_lookup *params,
						     const struct ipv6hdr *ip6,
						     const struct in6_addr *daddr, __u32 ifindex,
						     __u32 mark, __u32 flags)
{
	long rc;

	__builtin_memset(params, 0, sizeof(*params));
	params->family = AF_INET6;
	/* flowinfo minus the version nibble: traffic class + flow label. */
	params->flowinfo = *(const __be32 *)ip6 & bpf_htonl(0x0fffffff);
	params->l4_protocol = ip6->nexthdr;
	params->tot_len = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	params->ifindex = ifindex;
	ipv6_addr_copy((struct in6_addr *)params->ipv6_src, &ip6->saddr);
	ipv6_addr_copy((struct in6_addr *)params->ipv6_dst, daddr);

	if (mark) {
		*(__u32 *)params->smac = mark; /* union member "mark" (6.10+) */
		flags |= BPF_FIB_LOOKUP_MARK;
	}

	rc = bpf_fib_lookup(ctx, params, sizeof(*params), flags);
	fib_count(rc >= 0 && rc < FIB_SLOT_RET_MAX ? (__u32)rc : FIB_SLOT_MAX - 1);
	return rc;
}

/* fib_lookup_ip6_dst is fib_lookup_ip6_dst_flags through the rules. */
static __always_inline long fib_lookup_ip6_dst(void *ctx, struct bpf_fib_lookup *params,
					       const struct ipv6hdr *ip6,
					       const struct in6_addr *daddr, __u32 ifindex,
					       __u32 mark)
{
	return fib_lookup_ip6_dst_flags(ctx, params, ip6, daddr, ifindex, mark, 0);
}

/* fib_lookup_ip6_mark looks up ip6's (already rewritten) destination. */
static __always_inline long fib_lookup_ip6_mark(void *ctx, struct bpf_fib_lookup *params,
						const struct ipv6hdr *ip6, __u32 ifindex,
						__u32 mark)
{
	return fib_lookup_ip6_dst(ctx, params, ip6, &ip6->daddr, ifindex, mark);
}

/* fib_lookup_ip6 is fib_lookup_ip6_mark without a mark. */
static __always_inline long fib_lookup_ip6(void *ctx, struct bpf_fib_lookup *params,
					   const struct ipv6hdr *ip6, __u32 ifindex)
{
	return fib_lookup_ip6_dst(ctx, params, ip6, &ip6->daddr, ifindex, 0);
}

/* fib_set_macs writes the lookup's MAC addresses into the Ethernet header. */
static __always_inline void fib_set_macs(struct ethhdr *eth, const struct bpf_fib_lookup *params)
{
	__builtin_memcpy(eth->h_dest, params->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, params->smac, ETH_ALEN);
}

/* ip6_dec_hop_limit decrements the hop limit (the caller has checked it
 * is > 1, RFC 8200 3).
 */
static __always_inline void ip6_dec_hop_limit(struct ipv6hdr *ip6)
{
	ip6->hop_limit -= 1;
}

#endif /* SRCHAIN_FIB_H */
