/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain End / End.X in tc (tcx ingress).
 *
 * For every IPv6 packet whose destination is in the `sids` map, decide
 * first (lib/end.h end_classify) whether the fast path can complete the
 * SRv6 End (RFC 8986 4.1) or End.X (4.2) exactly as the kernel would;
 * if so rewrite and forward, else hand the packet UNTOUCHED to the kernel
 * (TC_ACT_OK), whose seg6local route for the same SID is the slow path,
 * counting why in pass_counters. Malformed SRHs the kernel drops too are
 * dropped and counted by reason (lib/counters.h). Everything not to a
 * SID goes on untouched with TC_ACT_UNSPEC, so the program can sit on any
 * interface and the tcx programs after it (the node's pipeline order,
 * lib/pipeline.h) still see those packets; TC_ACT_OK would end the chain.
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "end.h"
#include "fib.h"
#include "csum.h"
#include "end_opot.h"

#ifndef PACKET_HOST
#define PACKET_HOST 0 /* linux/if_packet.h */
#endif
#ifndef PACKET_OTHERHOST
#define PACKET_OTHERHOST 3
#endif

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
	/* Offsets masked for the verifier (no-op at run time, lib/srh.h). */
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off & 0x3fff, sizeof(*ip6));
	__be32 *srhw = pkt_ptr(p, si->srhoff & 0x3fff, 4);

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

static __always_inline int drop(__u32 reason)
{
	count_drop(reason);
	return TC_ACT_SHOT;
}

static __always_inline int pass(__u32 reason)
{
	count_pass(reason);
	return TC_ACT_OK;
}

SEC("tc")
int srchain_end(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct end_words before;
	struct bpf_fib_lookup params;
	struct sid_entry *sid;
	struct end_plan pl = {};
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 reason;
	long rc;
	int verdict;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;

	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6) {
		/* Non-linear head: make the headers readable, then retry. */
		if (bpf_skb_pull_data(skb, 0))
			return TC_ACT_UNSPEC;
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return TC_ACT_UNSPEC; /* not even an IPv6 header: the stack drops it */
	}

	sid = sid_lookup(&ip6->daddr);
	if (!sid)
		return TC_ACT_UNSPEC;
	/* IP bytes, as the kernel's seg6local counters and ip6tables. */
	count_sid(sid->counter, skb->len - p.l3off);

	/* Another host's unicast, broadcast, multicast: the kernel drops
	 * or handles them (ip6_rcv_core, ip6_forward), not End.
	 */
	if (skb->pkt_type != PACKET_HOST) {
		/* A broadcast or multicast frame to a unicast SID is the
		 * kernel's End's to forward (drop_unicast_in_l2_multicast is
		 * off by default): it leaves with its proof updated.
		 */
		if (cfg_opot && skb->pkt_type != PACKET_OTHERHOST)
			end_opot_tc(skb, &pl.si, 0);
		return pass(PASS_NOT_HOST);
	}
	/* The SRH may lie beyond the linear head (GRO, some drivers): pull
	 * the whole packet once (no byte changes). Rare on the forwarding
	 * path.
	 */
	if (p.data_end - p.data < skb->len) {
		if (bpf_skb_pull_data(skb, 0))
			return pass(PASS_PULL);
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
	}
	verdict = end_classify(&p, p.data_end - p.data - p.l3off, sid, &pl, &reason);
	if (verdict == END_DROP)
		return drop(reason);
	/* The OPoT transit of this node's chains (lib/end_opot.h), on the
	 * packet the fast path forwards and on the one the kernel's End
	 * gets: either way it leaves with its proof updated.
	 */
	if (cfg_opot)
		end_opot_tc(skb, &pl.si, verdict == END_FAST && !pl.shift);
	if (verdict != END_FAST)
		return pass(reason);
	if (end_words_read(&p, &pl.si, &before))
		return drop(DROP_PKT_TRUNCATED);

	/* Configured to leave forwarding to the kernel (netfilter FORWARD /
	 * POSTROUTING, policy routing, MTU: lib/end.h cfg_stack_forward):
	 * rewrite, the stack forwards (and decrements the hop limit).
	 */
	if (cfg_stack_forward) {
		reason = end_apply(&p, &pl.si);
		if (reason)
			return drop(reason);
		end_csum_fix(skb, &p, &pl.si, &before);
		fib_count(FIB_SLOT_STACK_FORWARD);
		return TC_ACT_OK;
	}

	if (sid->behavior == SRCHAIN_BEH_END_X) {
		/* RFC 8986 4.2: forward to the SID's adjacency whatever the
		 * routing table says about the new DA.
		 */
		struct bpf_redir_neigh nh = { .nh_family = AF_INET6 };
		__u32 oif = sid->oif;
		__u32 mtu_len = 0;
		int zero_nh;

		/* Too big for the adjacency (GSO packets: per segment): the
		 * kernel's End.X decides (Packet Too Big). End leaves the
		 * length as it is, so this is known before the rewrite.
		 */
		if (bpf_check_mtu(skb, oif, &mtu_len, 0, BPF_MTU_CHK_SEGS) != BPF_MTU_CHK_RET_SUCCESS) {
			fib_count(FIB_SLOT_MTU);
			return pass(PASS_MTU);
		}
		ipv6_addr_copy((struct in6_addr *)nh.ipv6_nh, &sid->nh6);
		zero_nh = !(nh.ipv6_nh[0] | nh.ipv6_nh[1] | nh.ipv6_nh[2] | nh.ipv6_nh[3]);
		reason = end_write(&p, &pl);
		if (reason)
			return drop(reason);
		end_csum_fix(skb, &p, &pl.si, &before);
		fib_count(FIB_SLOT_REDIRECT_NEIGH);
		if (zero_nh)
			return bpf_redirect_neigh(oif, NULL, 0, 0);
		return bpf_redirect_neigh(oif, &nh, sizeof(nh), 0);
	}

	/* Decide on the new DA before writing it. The lookup uses skb->mark
	 * (fwmark rules) and checks the route MTU (tot_len set). Anything
	 * but SUCCESS (no route, no neighbour yet, local address, seg6
	 * encap route, MTU, forwarding off): the kernel's End does it all.
	 */
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return drop(DROP_PKT_TRUNCATED);
	rc = fib_lookup_ip6_dst(skb, &params, ip6, &pl.nda, skb->ingress_ifindex, skb->mark);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return pass(PASS_FIB);
	reason = end_write(&p, &pl);
	if (reason)
		return drop(reason);
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!eth)
		return drop(DROP_PKT_TRUNCATED);
	fib_set_macs(eth, &params);
	end_csum_fix(skb, &p, &pl.si, &before);
	return bpf_redirect(params.ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";
