/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain End in XDP: the fast path twin of bpf/end.c (C10).
 *
 * Shares lib/end.h (end_classify: the same decision as tc), lib/srh.h
 * and the maps (the loader hands this object the tc object's maps). It
 * completes only End packets end_classify accepts whose new DA the FIB
 * resolves (hop limit--, SL--, DA, MACs, XDP_REDIRECT), deciding before
 * it writes anything; everything else goes on with XDP_PASS UNTOUCHED to
 * the tc End program on the same interface, which decides again, counts
 * the pass reason, and hands it to the kernel's seg6local End:
 *   - frames whose destination MAC is not the interface's (if_macs);
 *   - End.X SIDs (tc uses bpf_redirect_neigh), cfg_stack_forward;
 *   - every END_PASS of end_classify, FIB results other than SUCCESS.
 * Malformed packets the kernel drops too are dropped here and counted.
 * SID counters are bumped only for packets this program redirects or
 * drops (tc counts the ones passed on).
 * It is the PIPE_END stage of the node's XDP pipeline (lib/pipeline.h):
 * a packet that is not to one of its SIDs goes to the next stage.
 * Native XDP_REDIRECT into a veth needs NAPI on the peer (GRO on or an
 * XDP program there; MACHINE-NOTES).
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "end.h"
#include "fib.h"
#include "pipeline.h"
#include "end_opot.h"

/* The MAC address of each interface the program is attached to
 * (datapath.End.AttachXDP writes it): XDP has no pkt_type, so frames for
 * another host, broadcast and multicast are recognised by comparing the
 * destination MAC. An interface missing here passes everything to tc.
 */
struct if_mac {
	__u8 addr[ETH_ALEN];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct if_mac);
} if_macs SEC(".maps");

static __always_inline int xdrop(struct xdp_md *ctx, __u32 counter, __u64 len, __u32 reason)
{
	count_sid(counter, len);
	count_drop(reason);
	return pipe_ret(PIPE_END, XDP_DROP);
}

/* to_tc: the tc End decides again and counts the reason. */
static __always_inline int to_tc(struct xdp_md *ctx)
{
	return pipe_ret(PIPE_END, XDP_PASS);
}

SEC("xdp")
int srchain_end_xdp(struct xdp_md *ctx)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct bpf_fib_lookup params;
	struct sid_entry *sid;
	struct end_plan pl = {};
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	struct if_mac *mac;
	__u32 reason, counter, ifindex = ctx->ingress_ifindex;
	__u64 len;
	long rc;
	int verdict;

	if (cfg_stack_forward)
		return pipe_next(ctx, PIPE_END); /* tc hands everything to the stack */
	p.data = (void *)(long)ctx->data;
	p.data_end = (void *)(long)ctx->data_end;
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return pipe_next(ctx, PIPE_END);
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return pipe_next(ctx, PIPE_END);
	sid = sid_lookup(&ip6->daddr);
	if (!sid)
		return pipe_next(ctx, PIPE_END);
	if (sid->behavior != SRCHAIN_BEH_END)
		return to_tc(ctx); /* End.X: tc's bpf_redirect_neigh */
	mac = bpf_map_lookup_elem(&if_macs, &ifindex);
	if (!mac || *(__u32 *)mac->addr != *(__u32 *)eth->h_dest ||
	    *(__u16 *)&mac->addr[4] != *(__u16 *)&eth->h_dest[4])
		return to_tc(ctx); /* not for this host: tc and the kernel decide */
	counter = sid->counter;
	/* IP bytes, as the kernel's seg6local counters and ip6tables. */
	len = p.data_end - p.data - p.l3off;

	verdict = end_classify(&p, len, sid, &pl, &reason);
	if (verdict == END_DROP)
		return xdrop(ctx, counter, len, reason);
	if (verdict != END_FAST)
		return to_tc(ctx);

	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return to_tc(ctx);
	rc = fib_lookup_ip6_dst(ctx, &params, ip6, &pl.nda, ifindex, 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return to_tc(ctx); /* the kernel's End via tc */

	/* Redirecting: now, and only now, write the packet, the OPoT proof
	 * first (lib/end_opot.h; a packet handed to tc is tc's to update),
	 * unless the pipeline's OPoT stage did (pipe_done).
	 */
	if (cfg_opot && !pipe_done(ctx, PIPE_DONE_OPOT))
		end_opot_xdp(ctx, &pl.si, !pl.shift);
	if (end_write(&p, &pl))
		return xdrop(ctx, counter, len, DROP_PKT_TRUNCATED);
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!eth)
		return xdrop(ctx, counter, len, DROP_PKT_TRUNCATED);
	fib_set_macs(eth, &params);
	count_sid(counter, len);
	return pipe_ret(PIPE_END, bpf_redirect(params.ifindex, 0));
}

char _license[] SEC("license") = "Dual BSD/GPL";
