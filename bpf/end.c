/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain End / End.X in tc (tcx ingress).
 *
 * For every IPv6 packet whose destination is in the `sids` map, run the
 * SRv6 End (RFC 8986 4.1) or End.X (4.2) behavior and forward the result;
 * everything else passes untouched (TC_ACT_OK), so the program can sit on
 * any interface. Malformed SRv6 packets to a SID are dropped and counted
 * by reason (lib/counters.h). Forwarding policy: lib/fib.h.
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "end.h"
#include "fib.h"
#include "csum.h"

/* Words the End rewrite touches, for the CHECKSUM_COMPLETE fix-up: the
 * IPv6 word holding the hop limit, the destination, the SRH word holding
 * segments left. All start at even offsets from the IPv6 header (the SRH
 * at a multiple of 8), so their one's-complement sum is position free.
 */
struct end_words {
	__be32 ip6w1;
	struct in6_addr daddr;
	__be32 srhw0;
};

static __always_inline int end_words_read(const struct pkt *p, const struct srh_info *si,
					  struct end_words *w)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off, sizeof(*ip6));
	__be32 *srhw = pkt_ptr(p, si->srhoff, 4);

	if (!ip6 || !srhw)
		return -1;
	w->ip6w1 = ((__be32 *)ip6)[1];
	ipv6_addr_copy(&w->daddr, &ip6->daddr);
	w->srhw0 = *srhw;
	return 0;
}

/* end_csum_fix folds the change of the End words into skb->csum
 * (CHECKSUM_COMPLETE; a no-op for other checksum states).
 */
static __always_inline void end_csum_fix(struct __sk_buff *skb, const struct pkt *p,
					 const struct srh_info *si, struct end_words *before)
{
	struct end_words after;

	if (end_words_read(p, si, &after) == 0)
		skb_csum_replace(skb, before, &after, sizeof(after));
}

/* to_stack hands the rewritten packet to the kernel (lib/fib.h), counting
 * why in fib_counters.
 */
static __always_inline int to_stack(struct __sk_buff *skb, const struct pkt *p,
				    const struct srh_info *si, struct end_words *before,
				    __u32 slot)
{
	end_csum_fix(skb, p, si, before);
	fib_count(slot);
	return TC_ACT_OK;
}

static __always_inline int drop(__u32 reason)
{
	count_drop(reason);
	return TC_ACT_SHOT;
}

SEC("tc")
int srchain_end(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct end_words before;
	struct bpf_fib_lookup params;
	struct sid_entry *sid;
	struct srh_info si = {};
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 reason, pktlen;
	long rc;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;

	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6) {
		/* Non-linear head: make the headers readable, then retry. */
		if (bpf_skb_pull_data(skb, 0))
			return TC_ACT_OK;
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return TC_ACT_OK; /* not even an IPv6 header: the stack drops it */
	}

	sid = bpf_map_lookup_elem(&sids, &ip6->daddr);
	if (!sid)
		return TC_ACT_OK;
	/* IP bytes, as the kernel's seg6local counters and ip6tables. */
	count_sid(sid->counter, skb->len - p.l3off);

	/* The SRH may lie beyond the linear head (GRO, some drivers): pull
	 * the whole packet once. Rare on the forwarding path.
	 */
	if (p.data_end - p.data < skb->len) {
		if (bpf_skb_pull_data(skb, 0))
			return drop(DROP_PKT_TRUNCATED);
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return drop(DROP_PKT_TRUNCATED);
	}
	if (ip6->version != 6)
		return drop(DROP_UNSUPPORTED);
	/* Payload length 0 announces a jumbogram (RFC 2675): not handled. */
	if (ip6->payload_len == 0)
		return drop(DROP_UNSUPPORTED);
	pktlen = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	if (p.data + p.l3off + pktlen > p.data_end)
		return drop(DROP_PKT_TRUNCATED);
	if (p.data + p.l3off + pktlen < p.data_end) {
		/* Trailing bytes beyond the payload length: the kernel trims
		 * them in ip6_rcv_core; do the same so both forward the same
		 * bytes.
		 */
		if (bpf_skb_change_tail(skb, p.l3off + pktlen, 0))
			return drop(DROP_ADJUST_ROOM);
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
	}

	reason = srh_parse(&p, &si);
	if (reason)
		return drop(reason);
	/* The kernel's End verifies an HMAC TLV flagged by H and drops it
	 * without a key (seg6_hmac_validate_skb); srchain does not verify
	 * HMACs, so it drops those packets too, as unsupported.
	 */
	if (srh_hmac_present(&p, &si))
		return drop(DROP_UNSUPPORTED);
	if (end_words_read(&p, &si, &before))
		return drop(DROP_PKT_TRUNCATED);
	/* The rewrite happens whatever the hop limit (lib/end.h). */
	reason = end_apply(&p, &si);
	if (reason)
		return drop(reason);
	ip6 = pkt_ptr(&p, si.ip6off, sizeof(*ip6));
	if (!ip6)
		return drop(DROP_PKT_TRUNCATED);

	if (bpf_map_lookup_elem(&sids, &ip6->daddr)) {
		/* The next SID is served here too (e.g. SL = last entry + 1
		 * leads to segment[last entry], often this node's SID): run
		 * the packet through this program again, as the kernel
		 * re-routes it to its seg6local route. No hop limit change
		 * or check: the pass that finally forwards handles it once,
		 * like ip6_forward does. Each pass decrements SL, so this
		 * ends.
		 */
		end_csum_fix(skb, &p, &si, &before);
		return bpf_redirect(skb->ingress_ifindex, BPF_F_INGRESS);
	}

	/* Configured to leave forwarding to the kernel (netfilter FORWARD /
	 * POSTROUTING, policy routing, MTU: lib/end.h cfg_stack_forward).
	 */
	if (cfg_stack_forward)
		return to_stack(skb, &p, &si, &before, FIB_SLOT_STACK_FORWARD);
	/* Hop limit exhausted: the kernel's ip6_forward sends ICMPv6 Time
	 * Exceeded for the rewritten packet (or delivers it if the new DA is
	 * local), exactly as after the kernel's own End (RFC 8986 4.1
	 * S05-S07 happen there).
	 */
	if (ip6->hop_limit <= 1)
		return to_stack(skb, &p, &si, &before, FIB_SLOT_HOP_LIMIT);

	if (sid->behavior == SRCHAIN_BEH_END_X) {
		/* RFC 8986 4.2: forward to the SID's adjacency whatever the
		 * routing table says about the new DA.
		 */
		struct bpf_redir_neigh nh = { .nh_family = AF_INET6 };
		__u32 oif = sid->oif;
		__u32 mtu_len = 0;
		int zero_nh;

		/* Too big for the adjacency (GSO packets: per segment): the
		 * stack forwards it and sends Packet Too Big if its route's
		 * MTU is exceeded too (docs/datapath.md).
		 */
		if (bpf_check_mtu(skb, oif, &mtu_len, 0, BPF_MTU_CHK_SEGS) != BPF_MTU_CHK_RET_SUCCESS)
			return to_stack(skb, &p, &si, &before, FIB_SLOT_MTU);
		ipv6_addr_copy((struct in6_addr *)nh.ipv6_nh, &sid->nh6);
		zero_nh = !(nh.ipv6_nh[0] | nh.ipv6_nh[1] | nh.ipv6_nh[2] | nh.ipv6_nh[3]);
		ip6_dec_hop_limit(ip6);
		end_csum_fix(skb, &p, &si, &before);
		fib_count(FIB_SLOT_REDIRECT_NEIGH);
		if (zero_nh)
			return bpf_redirect_neigh(oif, NULL, 0, 0);
		return bpf_redirect_neigh(oif, &nh, sizeof(nh), 0);
	}

	/* The lookup uses skb->mark (fwmark rules) and checks the route MTU
	 * (tot_len set: BPF_FIB_LKUP_RET_FRAG_NEEDED -> stack).
	 */
	rc = fib_lookup_ip6_mark(skb, &params, ip6, skb->ingress_ifindex, skb->mark);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		eth = pkt_ptr(&p, 0, sizeof(*eth));
		if (!eth)
			return drop(DROP_PKT_TRUNCATED);
		ip6_dec_hop_limit(ip6);
		fib_set_macs(eth, &params);
	}
	end_csum_fix(skb, &p, &si, &before);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS)
		return bpf_redirect(params.ifindex, 0);
	/* Slow path (lib/fib.h): the stack forwards the rewritten packet. */
	return TC_ACT_OK;
}

char _license[] SEC("license") = "Dual BSD/GPL";
