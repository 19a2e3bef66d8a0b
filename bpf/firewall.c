/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain SERA firewall in tc (tcx ingress) and XDP, seed 000.
 *
 * Every IPv6 and IPv4 packet is classified by the rule set compiled into
 * the lib/fw_maps.h maps (first match, iptables semantics) and the rule's
 * verdict applied:
 *   ACCEPT          TC_ACT_UNSPEC: the next tcx program (srchain's End
 *                   when the SID runs in eBPF) or the stack (the SID's
 *                   seg6local End route) handles it. TC_ACT_OK would end
 *                   the tcx chain and skip a following End program.
 *   DROP, REJECT    dropped, DROP_FW_RULE (REJECT sends no ICMP)
 *   SEG6 go-next, skip-next, go-last
 *                   SRH rewritten here, then TC_ACT_UNSPEC: the stack
 *                   forwards it (lib/fib.h policy: it decrements the hop
 *                   limit once)
 *   SEG6 eval-args  the ARGS of the active SID pick one of the above;
 *                   an unknown value is answered with an ICMPv6 Parameter
 *                   Problem pointing at the SID (DROP_FW_ARGS_UNKNOWN)
 * No rule matching applies the policy (slot nrules of fw_rules).
 * Malformed SRv6 packets (type 4 routing header failing validation) are
 * dropped by reason. The mode (basic / advanced) is read per packet from
 * fw_cfg, so switching it is a map update.
 *
 * srchain_fw_xdp is the same firewall at XDP (one object, shared maps and
 * counters), the first stage of the node's XDP pipeline (lib/pipeline.h):
 * ACCEPT hands the packet to the next stage (the XDP End), SR actions go
 * to the stack (XDP_PASS), drops are XDP_DROP, the Parameter Problem
 * is redirected back out of the interface it came in on. Every packet it decided on carries PIPE_DONE_FW in
 * its metadata, and the tc program lets those by: a packet is filtered
 * once, at XDP or at tc, never twice and never not at all.
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "fib.h"
#include "csum.h"
#include "icmp6.h"
#include "fw_maps.h"
#include "fw_extract.h"
#include "fw_classify.h"
#include "fw_actions.h"
#include "fw_ratelimit.h"
#include "pipeline.h"

/* What the parser may read: extension headers start within FW_MAX_OFF,
 * an SRH is at most 2048 bytes, then an inner header and ports; the
 * Parameter Problem's quote (ICMP6_ERR_QUOTE, 1232 bytes) is shorter.
 */
#define FW_PULL (14 + FW_MAX_OFF + 2048 + 64)

/* What fw_decide wants done with a packet. */
enum { FW_OUT_PASS, FW_OUT_DROP, FW_OUT_SEG6, FW_OUT_ICMP };

struct fw_out {
	__u32 kind;
	__u32 reason;               /* FW_OUT_DROP */
	__u32 ptr;                  /* FW_OUT_ICMP: Parameter Problem pointer */
	struct fw_words before, after; /* FW_OUT_SEG6: rewritten words */
};

/* fw_decide extracts, classifies and applies the verdict's packet
 * rewrite (SEG6 actions); the hook wrappers turn o into their return
 * codes. ctx is the program context (for bpf_fib_lookup).
 */
static __always_inline void fw_decide(void *ctx, struct pkt *p, __u16 proto, __u32 ifindex,
				      __u32 len, struct fw_out *o)
{
	struct fw_pkt fp = {};
	struct fw_view *vp;
	struct fw_config *cfg;
	struct fw_rule *rule;
	struct fw_count *cnt;
	__u32 zero = 0, reason, verdict, slot, gen, *genp;
	int idx, f;

	o->kind = FW_OUT_PASS;
	/* One read of the generation word: the whole packet uses it. */
	genp = bpf_map_lookup_elem(&fw_gen, &zero);
	gen = genp ? (*genp & 1) : 0;
	cfg = bpf_map_lookup_elem(&fw_cfg, &gen);
	vp = bpf_map_lookup_elem(&fw_scratch, &zero);
	if (!cfg || !vp)
		return;
#pragma unroll
	for (f = 0; f < FW_NADDR; f++)
		vp->present[f] = 0;
#pragma unroll
	for (f = 0; f < FW_NINT; f++)
		vp->val[f] = 256;
	vp->val[FW_F_SPORT - FW_NADDR] = 65536;
	vp->val[FW_F_DPORT - FW_NADDR] = 65536;
	vp->val[FW_F_TAG - FW_NADDR] = 65536;
	vp->val[FW_F_SRH - FW_NADDR] = 0;

	if (proto == bpf_htons(ETH_P_IPV6))
		reason = fw_extract6(p, cfg->mode, vp, &fp);
	else
		reason = fw_ip4(p, vp, p->l3off, FW_F_SRC, FW_F_DST, 1);
	if (reason)
		goto drop;
	if (fp.sr && fp.si.sl > fp.si.last_entry)
		fw_srh_absent(vp);

	vp->addr[FW_F_IIF].in6_u.u6_addr32[0] = bpf_htonl(ifindex);
	vp->present[FW_F_IIF] = 1;
	if ((cfg->used & (1U << FW_F_OIF)) && proto == bpf_htons(ETH_P_IPV6)) {
		/* -o: where the stack would send the packet now. Local SIDs
		 * and unresolved routes leave it absent.
		 */
		struct bpf_fib_lookup params;
		struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));

		if (ip6 && fib_lookup_ip6(ctx, &params, ip6, ifindex) == BPF_FIB_LKUP_RET_SUCCESS) {
			vp->addr[FW_F_OIF].in6_u.u6_addr32[0] = bpf_htonl(params.ifindex);
			vp->present[FW_F_OIF] = 1;
		}
	}

	idx = fw_classify(vp, cfg);
	if (idx < 0) {
		reason = DROP_UNSUPPORTED;
		goto drop;
	}
	slot = idx;
	if (slot > FW_MAX_RULES)
		slot = FW_MAX_RULES;
	slot += (cfg->gen & 1) * FW_RULE_SLOTS;
	cnt = bpf_map_lookup_elem(&fw_rule_counters, &slot);
	if (cnt) {
		cnt->packets += 1;
		/* IP bytes, as ip6tables counts them (skb->len at
		 * PREROUTING): the link-layer header is left out.
		 */
		cnt->bytes += len - p->l3off;
	}
	rule = bpf_map_lookup_elem(&fw_rules, &slot);
	verdict = rule ? rule->verdict : FW_ACT_ACCEPT;

	if (verdict >= FW_ACT_GO_NEXT && verdict <= FW_ACT_EVAL_ARGS) {
		struct ipv6hdr *ip6 = NULL;

		/* SR actions are for SR packets whose active SID is this
		 * NF's; an SR packet for another node's SID is accepted
		 * (routing forwards it). A non-SR packet (IPv4 included)
		 * matching an SR action fails its precondition below.
		 */
		if (fp.sr && cfg->sid_len <= 128) {
			ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
			if (ip6 && !fw_in_sid(&ip6->daddr, cfg))
				return;
		}
	}
	if (verdict == FW_ACT_EVAL_ARGS) {
		struct ipv6hdr *ip6;

		reason = DROP_FW_PRECOND;
		if (!fp.sr)
			goto drop;
		reason = DROP_PKT_TRUNCATED;
		ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
		if (!ip6)
			goto drop;
		verdict = fw_args_verdict(&ip6->daddr, cfg->args_bits, cfg->gen);
		if (!verdict) {
			/* Seed 000 V.B: Parameter Problem pointing at the active
			 * SID, segment[SL] of the SRH; with SL = last entry + 1
			 * it is only in the destination address (offset 24).
			 */
			reason = DROP_FW_ARGS_UNKNOWN;
			if (fp.icmp_err || !fw_icmp_allow(cfg->icmp_rate))
				goto drop; /* RFC 4443 2.4 (e), (f): no error sent */
			o->kind = FW_OUT_ICMP;
			o->ptr = fp.si.srhoff - fp.si.ip6off + 8 + 16 * (__u32)fp.si.sl;
			if (fp.si.sl > fp.si.last_entry)
				o->ptr = 24;
			return;
		}
	}

	switch (verdict) {
	case FW_ACT_ACCEPT:
		return;
	case FW_ACT_GO_NEXT:
	case FW_ACT_SKIP_NEXT:
	case FW_ACT_GO_LAST:
		reason = DROP_PKT_TRUNCATED;
		if (fp.sr && fw_words_read(p, &fp.si, &o->before))
			goto drop;
		reason = fw_seg6(p, &fp, verdict);
		if (reason)
			goto drop;
		reason = DROP_PKT_TRUNCATED;
		if (fw_words_read(p, &fp.si, &o->after))
			goto drop;
		o->kind = FW_OUT_SEG6;
		return;
	default:
		reason = DROP_FW_RULE;
	}
drop:
	o->kind = FW_OUT_DROP;
	o->reason = reason;
}

static __always_inline int fw_drop(__u32 reason)
{
	count_drop(reason);
	return TC_ACT_SHOT;
}

/* fw_param_problem (tc) turns the packet into the Parameter Problem
 * (lib/icmp6.h) and sends it back out of the interface it came in on; the
 * invoking packet is counted as dropped with DROP_FW_ARGS_UNKNOWN (the
 * caller applied the RFC 4443 2.4 (e)/(f) checks, fw_icmp_allow).
 */
static __always_inline int fw_param_problem(struct __sk_buff *skb, struct pkt *p, __u32 ptr)
{
	__u32 r = icmp6_err_tc(skb, p, ICMPV6_PARAMPROB, 0, ptr, DROP_FW_ARGS_UNKNOWN);

	if (r)
		return fw_drop(r);
	count_drop(DROP_FW_ARGS_UNKNOWN);
	return bpf_redirect(skb->ingress_ifindex, 0);
}

SEC("tc")
int srchain_fw(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct fw_out o = {};
	__u32 need;

	if (skb->protocol != bpf_htons(ETH_P_IPV6) && skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	/* Already filtered by srchain_fw_xdp in this node's pipeline. */
	if (pipe_tc_done(skb, PIPE_DONE_FW))
		return TC_ACT_UNSPEC;
	/* Headers may lie beyond the linear head (GRO): pull once, only
	 * what the parser can read (not the whole GRO payload).
	 */
	need = skb->len < FW_PULL ? skb->len : FW_PULL;
	if (skb->data_end - skb->data < need && bpf_skb_pull_data(skb, need))
		return fw_drop(DROP_PKT_TRUNCATED);
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;

	fw_decide(skb, &p, skb->protocol, skb->ingress_ifindex, skb->len, &o);
	switch (o.kind) {
	case FW_OUT_DROP:
		return fw_drop(o.reason);
	case FW_OUT_ICMP:
		return fw_param_problem(skb, &p, o.ptr);
	case FW_OUT_SEG6:
		skb_csum_replace(skb, &o.before, &o.after, sizeof(o.before));
		return TC_ACT_UNSPEC;
	}
	return TC_ACT_UNSPEC;
}

SEC("xdp")
int srchain_fw_xdp(struct xdp_md *ctx)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct fw_out o = {};
	struct ethhdr *eth;
	__u32 r;

	p.data = (void *)(long)ctx->data;
	p.data_end = (void *)(long)ctx->data_end;
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!eth || (eth->h_proto != bpf_htons(ETH_P_IPV6) && eth->h_proto != bpf_htons(ETH_P_IP)))
		return pipe_next(ctx, PIPE_FIREWALL); /* ARP and the like: not filtered, as at tc */
	fw_decide(ctx, &p, eth->h_proto, ctx->ingress_ifindex, p.data_end - p.data, &o);
	pipe_mark(ctx, PIPE_DONE_FW);
	switch (o.kind) {
	case FW_OUT_DROP:
		count_drop(o.reason);
		return pipe_ret(PIPE_FIREWALL, XDP_DROP);
	case FW_OUT_ICMP:
		r = icmp6_err_xdp(ctx, &p, ICMPV6_PARAMPROB, 0, o.ptr);
		if (r) {
			count_drop(r);
			return pipe_ret(PIPE_FIREWALL, XDP_DROP);
		}
		count_drop(DROP_FW_ARGS_UNKNOWN);
		/* Back out of the interface it came in on. Not XDP_TX: a veth
		 * flushes XDP_TX frames to its peer only when the peer runs
		 * an XDP program too, so the error would wait in the peer's
		 * ring for unrelated traffic; a redirect is flushed at once.
		 */
		return pipe_ret(PIPE_FIREWALL, bpf_redirect(ctx->ingress_ifindex, 0));
	case FW_OUT_SEG6:
		/* The stack forwards the rewritten packet (lib/fib.h
		 * policy); the End must not see it again.
		 */
		return pipe_ret(PIPE_FIREWALL, XDP_PASS);
	}
	return pipe_next(ctx, PIPE_FIREWALL);
}

char _license[] SEC("license") = "Dual BSD/GPL";
