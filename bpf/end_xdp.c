/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain End in XDP: the fast path twin of bpf/end.c (C10).
 *
 * Shares lib/end.h, lib/srh.h and the maps (the loader hands this object
 * the tc object's sids / counter maps). It completes only what it can do
 * entirely at XDP: End with a successful FIB lookup (hop limit--, MACs,
 * XDP_REDIRECT). Everything else goes on with XDP_PASS to the tc End
 * program, which must be attached to the same interface:
 *   - End.X SIDs: passed untouched (tc uses bpf_redirect_neigh);
 *   - FIB miss, no neighbour, next SID local, ...: passed with End already
 *     applied (hop limit untouched); tc sees the new DA, runs End again if
 *     it is a local SID, else hands the packet to the stack (lib/fib.h);
 *   - malformed packets: dropped here and counted by reason.
 * Native XDP_REDIRECT into a veth needs NAPI on the peer (GRO on or an
 * XDP program there; MACHINE-NOTES).
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "end.h"
#include "fib.h"

static __always_inline int xdrop(__u32 reason)
{
	count_drop(reason);
	return XDP_DROP;
}

SEC("xdp")
int srchain_end_xdp(struct xdp_md *ctx)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct bpf_fib_lookup params;
	struct sid_entry *sid;
	struct srh_info si = {};
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 reason, pktlen, have;
	long rc;

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
	count_sid(sid->counter, p.data_end - p.data);

	if (ip6->version != 6 || ip6->payload_len == 0)
		return xdrop(DROP_UNSUPPORTED);
	pktlen = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	have = p.data_end - p.data - p.l3off;
	if (pktlen > have)
		return xdrop(DROP_PKT_TRUNCATED);
	if (pktlen < have) {
		/* Trim trailing bytes as ip6_rcv_core would. */
		if (bpf_xdp_adjust_tail(ctx, -(int)(have - pktlen)))
			return xdrop(DROP_ADJUST_ROOM);
		p.data = (void *)(long)ctx->data;
		p.data_end = (void *)(long)ctx->data_end;
	}

	reason = srh_parse(&p, &si);
	if (reason)
		return xdrop(reason);
	if (srh_hmac_present(&p, &si))
		return xdrop(DROP_UNSUPPORTED);
	reason = end_apply(&p, &si);
	if (reason)
		return xdrop(reason);
	ip6 = pkt_ptr(&p, si.ip6off, sizeof(*ip6));
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!ip6 || !eth)
		return xdrop(DROP_PKT_TRUNCATED);
	if (bpf_map_lookup_elem(&sids, &ip6->daddr))
		return XDP_PASS; /* next SID local: tc runs it */

	rc = fib_lookup_ip6(ctx, &params, ip6, ctx->ingress_ifindex);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS; /* slow path via tc and the stack */
	ip6_dec_hop_limit(ip6);
	fib_set_macs(eth, &params);
	return bpf_redirect(params.ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";
