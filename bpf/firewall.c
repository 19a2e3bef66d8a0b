/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain SERA firewall in tc (tcx ingress), seed 000.
 *
 * Every IPv6 and IPv4 packet is classified by the rule set compiled into
 * the lib/fw.h maps (first match, iptables semantics) and the rule's
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
 *                   unknown values are dropped as DROP_FW_ARGS_UNKNOWN
 * No rule matching applies the policy (slot nrules of fw_rules).
 * Malformed SRv6 packets (type 4 routing header failing validation) are
 * dropped by reason. The mode (basic / advanced) is read per packet from
 * fw_cfg, so switching it is a map update.
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "fib.h"
#include "fw.h"

static __always_inline int fw_drop(__u32 reason)
{
	count_drop(reason);
	return TC_ACT_SHOT;
}

SEC("tc")
int srchain_fw(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct fw_view *vp;
	struct fw_pkt fp = {};
	struct fw_config *cfg;
	struct fw_rule *rule;
	struct fw_count *cnt;
	__u32 zero = 0, reason, verdict, slot;
	int idx, f;

	if (skb->protocol != bpf_htons(ETH_P_IPV6) && skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	cfg = bpf_map_lookup_elem(&fw_cfg, &zero);
	if (!cfg)
		return TC_ACT_UNSPEC;
	/* Headers may lie beyond the linear head (GRO): pull once. */
	if (skb->data_end - skb->data < skb->len && bpf_skb_pull_data(skb, 0))
		return fw_drop(DROP_PKT_TRUNCATED);
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;

	vp = bpf_map_lookup_elem(&fw_scratch, &zero);
	if (!vp)
		return TC_ACT_UNSPEC;
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

	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		reason = fw_extract6(&p, cfg->mode, vp, &fp);
	else
		reason = fw_ip4(&p, vp, p.l3off, FW_F_SRC, FW_F_DST, 1);
	if (reason)
		return fw_drop(reason);

	vp->addr[FW_F_IIF].in6_u.u6_addr32[0] = bpf_htonl(skb->ingress_ifindex);
	vp->present[FW_F_IIF] = 1;
	if ((cfg->used & (1U << FW_F_OIF)) && skb->protocol == bpf_htons(ETH_P_IPV6)) {
		/* -o: where the stack would send the packet now. Local SIDs
		 * and unresolved routes leave it absent.
		 */
		struct bpf_fib_lookup params;
		struct ipv6hdr *ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));

		if (ip6 && fib_lookup_ip6(skb, &params, ip6, skb->ingress_ifindex) == BPF_FIB_LKUP_RET_SUCCESS) {
			vp->addr[FW_F_OIF].in6_u.u6_addr32[0] = bpf_htonl(params.ifindex);
			vp->present[FW_F_OIF] = 1;
		}
	}

	idx = fw_classify(vp, cfg->used, cfg->nrules);
	if (idx < 0)
		return fw_drop(DROP_UNSUPPORTED);
	slot = idx;
	if (slot > FW_MAX_RULES)
		slot = FW_MAX_RULES;
	cnt = bpf_map_lookup_elem(&fw_rule_counters, &slot);
	if (cnt) {
		cnt->packets += 1;
		cnt->bytes += skb->len;
	}
	rule = bpf_map_lookup_elem(&fw_rules, &slot);
	verdict = rule ? rule->verdict : FW_ACT_ACCEPT;

	if (verdict == FW_ACT_EVAL_ARGS) {
		struct ipv6hdr *ip6;

		if (!fp.sr)
			return fw_drop(DROP_FW_PRECOND);
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return fw_drop(DROP_PKT_TRUNCATED);
		verdict = fw_args_verdict(&ip6->daddr, cfg->args_bits);
		if (!verdict)
			return fw_drop(DROP_FW_ARGS_UNKNOWN);
	}

	switch (verdict) {
	case FW_ACT_ACCEPT:
		return TC_ACT_UNSPEC;
	case FW_ACT_GO_NEXT:
	case FW_ACT_SKIP_NEXT:
	case FW_ACT_GO_LAST: {
		struct fw_words before, after;

		if (fp.sr && fw_words_read(&p, &fp.si, &before))
			return fw_drop(DROP_PKT_TRUNCATED);
		reason = fw_seg6(&p, &fp, verdict);
		if (reason)
			return fw_drop(reason);
		if (fw_words_read(&p, &fp.si, &after) == 0)
			bpf_csum_update(skb, bpf_csum_diff((__be32 *)&before, sizeof(before),
							   (__be32 *)&after, sizeof(after), 0));
		return TC_ACT_UNSPEC;
	}
	default:
		return fw_drop(DROP_FW_RULE);
	}
}

char _license[] SEC("license") = "Dual BSD/GPL";
