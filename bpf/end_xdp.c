/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain End in XDP: the fast path twin of bpf/end.c (C10).
 *
 * Shares lib/end.h, lib/srh.h and the maps (the loader hands this object
 * the tc object's sids / counter maps). It completes only what it can do
 * entirely at XDP: End with hop limit > 1 whose new DA the FIB resolves
 * (hop limit--, SL--, DA, MACs, XDP_REDIRECT). It decides on a copy of the
 * new DA and writes the packet only when it redirects it, so everything
 * else goes on with XDP_PASS UNTOUCHED (a packet half-processed here would
 * confuse tc and break CHECKSUM_COMPLETE) to the tc End program, which
 * must be attached to the same interface and does the whole job:
 *   - End.X SIDs (tc uses bpf_redirect_neigh), cfg_stack_forward;
 *   - hop limit <= 1, FIB miss, no neighbour, next SID local, trailing
 *     bytes after the payload, ...;
 *   - malformed packets: dropped here and counted by reason.
 * SID counters are bumped only for packets this program redirects or
 * drops (tc counts the ones passed on).
 * Native XDP_REDIRECT into a veth needs NAPI on the peer (GRO on or an
 * XDP program there; MACHINE-NOTES).
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "end.h"
#include "fib.h"

static __always_inline int xdrop(__u32 counter, __u64 len, __u32 reason)
{
	count_sid(counter, len);
	count_drop(reason);
	return XDP_DROP;
}

SEC("xdp")
int srchain_end_xdp(struct xdp_md *ctx)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct bpf_fib_lookup params;
	struct srh_fixed *srh;
	struct sid_entry *sid;
	struct srh_info si = {};
	struct in6_addr nda;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 reason, pktlen, have, counter;
	__u64 len;
	long rc;

	if (cfg_stack_forward)
		return XDP_PASS; /* tc hands everything to the stack */
	p.data = (void *)(long)ctx->data;
	p.data_end = (void *)(long)ctx->data_end;
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return XDP_PASS;
	sid = bpf_map_lookup_elem(&sids, &ip6->daddr);
	if (!sid || sid->behavior != SRCHAIN_BEH_END)
		return XDP_PASS;
	counter = sid->counter;
	/* IP bytes, as the kernel's seg6local counters and ip6tables. */
	len = p.data_end - p.data - p.l3off;

	if (ip6->version != 6 || ip6->payload_len == 0)
		return xdrop(counter, len, DROP_UNSUPPORTED);
	pktlen = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	have = p.data_end - p.data - p.l3off;
	if (pktlen > have)
		return xdrop(counter, len, DROP_PKT_TRUNCATED);
	if (pktlen < have)
		return XDP_PASS; /* trailing bytes: tc trims, then runs End */

	reason = srh_parse(&p, &si);
	if (reason)
		return xdrop(counter, len, reason);
	if (srh_hmac_present(&p, &si))
		return xdrop(counter, len, DROP_UNSUPPORTED);
	reason = end_next_da(&p, &si, &nda);
	if (reason)
		return xdrop(counter, len, reason);
	if (ip6->hop_limit <= 1)
		return XDP_PASS; /* tc rewrites, the stack sends Time Exceeded */
	if (bpf_map_lookup_elem(&sids, &nda))
		return XDP_PASS; /* next SID local: tc runs End twice */

	rc = fib_lookup_ip6_dst(ctx, &params, ip6, &nda, ctx->ingress_ifindex, 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS; /* slow path via tc and the stack */

	/* Redirecting: now, and only now, write the packet. */
	ip6 = pkt_ptr(&p, si.ip6off, sizeof(*ip6));
	srh = srh_fixed_hdr(&p, &si);
	if (!ip6 || !srh)
		return xdrop(counter, len, DROP_PKT_TRUNCATED);
	srh->segments_left = si.sl - 1;
	ipv6_addr_copy(&ip6->daddr, &nda);
	ip6_dec_hop_limit(ip6);
	fib_set_macs(eth, &params);
	count_sid(counter, len);
	return bpf_redirect(params.ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";
