/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ICMPv4 "fragmentation needed and DF set" (RFC 792, RFC 1191 4) at tc.
 *
 * The invoking packet (IPv4 without options, as the eBPF ingress takes
 * them) is turned into the error in place: trimmed to its IP header and
 * first 8 data bytes (RFC 792), room made in front for a new IPv4 +
 * ICMP header, Ethernet addresses swapped; the caller redirects it out of
 * the interface it came in on. The next-hop MTU field names the MTU the
 * sender must use (RFC 1191 4).
 */
#ifndef SRCHAIN_ICMP4_H
#define SRCHAIN_ICMP4_H

#include "common.h"
#include "csum.h"

#define ICMP4_ERR_HDRS 28  /* IPv4 header + ICMP header */
#define ICMP4_ERR_QUOTE 28 /* the invoking IPv4 header (no options) + 8 bytes */

/* icmp4_frag_needed_tc answers the skb's IPv4 packet with "fragmentation
 * needed" from address from, next-hop MTU mtu. Returns DROP_NONE (the
 * caller redirects it out of skb->ingress_ifindex) or the reason to
 * drop the invoking packet with (unsent when the kernel refuses to trim
 * it).
 */
static __always_inline __u32 icmp4_frag_needed_tc(struct __sk_buff *skb, struct pkt *p, __be32 from, __u16 mtu,
						  __u32 unsent)
{
	__u8 smac[ETH_ALEN], dmac[ETH_ALEN];
	struct ethhdr *eth;
	struct iphdr *ip4;
	__be32 to;
	__u8 *icmp;
	__s64 sum;

	eth = pkt_ptr(p, 0, sizeof(*eth));
	ip4 = pkt_ptr(p, sizeof(*eth), sizeof(*ip4));
	if (!eth || !ip4 || ip4->ihl != 5 || skb->len < sizeof(*eth) + ICMP4_ERR_QUOTE)
		return DROP_PKT_TRUNCATED;
	__builtin_memcpy(smac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(dmac, eth->h_dest, ETH_ALEN);
	to = ip4->saddr;
	if (skb->len > sizeof(*eth) + ICMP4_ERR_QUOTE &&
	    bpf_skb_change_tail(skb, sizeof(*eth) + ICMP4_ERR_QUOTE, 0))
		return unsent;
	if (bpf_skb_adjust_room(skb, ICMP4_ERR_HDRS, BPF_ADJ_ROOM_MAC, 0))
		return DROP_ADJUST_ROOM;
	bpf_csum_level(skb, BPF_CSUM_LEVEL_RESET);
	p->data = (void *)(long)skb->data;
	p->data_end = (void *)(long)skb->data_end;
	eth = pkt_ptr(p, 0, sizeof(*eth));
	ip4 = pkt_ptr(p, sizeof(*eth), sizeof(*ip4));
	icmp = pkt_ptr(p, sizeof(*eth) + sizeof(*ip4), 8 + ICMP4_ERR_QUOTE);
	if (!eth || !ip4 || !icmp)
		return DROP_PKT_TRUNCATED;
	__builtin_memcpy(eth->h_dest, smac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, dmac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);
	*(__u8 *)ip4 = 0x45;
	ip4->tos = 0xc0; /* internetwork control, as the kernel's icmp_send */
	ip4->tot_len = bpf_htons(ICMP4_ERR_HDRS + ICMP4_ERR_QUOTE);
	ip4->id = 0;
	ip4->frag_off = 0;
	ip4->ttl = 64;
	ip4->protocol = IPPROTO_ICMP;
	ip4->check = 0;
	ip4->saddr = from;
	ip4->daddr = to;
	sum = bpf_csum_diff(NULL, 0, (__be32 *)ip4, sizeof(*ip4), 0);
	if (sum < 0)
		return DROP_PKT_TRUNCATED;
	ip4->check = ~csum_fold64((__u64)sum);
	icmp[0] = 3; /* destination unreachable */
	icmp[1] = 4; /* fragmentation needed and DF set */
	*(__u16 *)&icmp[2] = 0;
	*(__u16 *)&icmp[4] = 0;
	*(__be16 *)&icmp[6] = bpf_htons(mtu);
	sum = bpf_csum_diff(NULL, 0, (__be32 *)icmp, 8 + ICMP4_ERR_QUOTE, 0);
	if (sum < 0)
		return DROP_PKT_TRUNCATED;
	*(__u16 *)&icmp[2] = ~csum_fold64((__u64)sum);
	return DROP_NONE;
}

#endif /* SRCHAIN_ICMP4_H */
