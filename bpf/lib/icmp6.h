/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ICMPv6 error messages (RFC 4443 2.4), written once for tc and XDP.
 *
 * The invoking packet is turned into the error in place: trimmed to what
 * fits the IPv6 minimum MTU, room made in front for a new IPv6 + ICMPv6
 * header, and sent back out of the interface it came in on, from the
 * invoking destination to its source, Ethernet addresses swapped. The
 * caller applies RFC 4443 2.4 (e) (never answer an error) and (f) (rate
 * limit) before; the firewall's Parameter Problem is the user today.
 *
 *     r = icmp6_err_tc(skb, &p, ICMPV6_PARAMPROB, 0, ptr, DROP_FW_ARGS_UNKNOWN);
 *     if (r) -> drop with reason r; else bpf_redirect(ingress ifindex, 0)
 *     r = icmp6_err_xdp(ctx, &p, ICMPV6_PARAMPROB, 0, ptr);
 *     if (r) -> XDP_DROP with reason r; else XDP_TX
 * p is re-derived from the context inside (the head moved).
 */
#ifndef SRCHAIN_ICMP6_H
#define SRCHAIN_ICMP6_H

#include "common.h"
#include "csum.h"

#ifndef ICMPV6_PARAMPROB
#define ICMPV6_PARAMPROB 4
#endif

/* 40-byte IPv6 header + 8-byte ICMPv6 header in front of as much of the
 * invoking packet as fits the IPv6 minimum MTU (RFC 4443 2.4 (c)).
 */
#define ICMP6_ERR_HDRS 48
#define ICMP6_ERR_QUOTE (1280 - ICMP6_ERR_HDRS)

/* The invoking packet's MACs and addresses, saved before the rewrite. */
struct icmp6_err_src {
	__u8 smac[ETH_ALEN], dmac[ETH_ALEN];
	struct in6_addr src, dst;
};

static __always_inline int icmp6_err_save(const struct pkt *p, struct icmp6_err_src *s)
{
	struct ethhdr *eth = pkt_ptr(p, 0, sizeof(*eth));
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));

	if (!eth || !ip6)
		return -1;
	__builtin_memcpy(s->smac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(s->dmac, eth->h_dest, ETH_ALEN);
	ipv6_addr_copy(&s->src, &ip6->saddr);
	ipv6_addr_copy(&s->dst, &ip6->daddr);
	return 0;
}

/* icmp6_err_fill writes the error (type, code, 32-bit parameter) into a
 * packet whose first 14 + 48 bytes were made room for and whose next
 * quote bytes are the invoking packet: Ethernet back to the sender, IPv6
 * from the invoking destination to its source, hop limit 64, and the
 * checksum (RFC 4443 2.3). Returns 0, or -1 if the packet is shorter
 * (a word that cannot be read would make a wrong checksum).
 */
static __always_inline int icmp6_err_fill(struct pkt *p, const struct icmp6_err_src *s, __u8 type,
					  __u8 code, __u32 param, __u32 quote)
{
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 i, off, end;
	__u64 sum;
	__u8 *icmp;

	eth = pkt_ptr(p, 0, sizeof(*eth));
	ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	icmp = pkt_ptr(p, p->l3off + sizeof(*ip6), 8);
	if (!eth || !ip6 || !icmp)
		return -1;
	__builtin_memcpy(eth->h_dest, s->smac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, s->dmac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	*(__be32 *)ip6 = bpf_htonl(0x60000000);
	ip6->payload_len = bpf_htons(8 + quote);
	ip6->nexthdr = IPPROTO_ICMPV6;
	ip6->hop_limit = 64;
	ipv6_addr_copy(&ip6->saddr, &s->dst);
	ipv6_addr_copy(&ip6->daddr, &s->src);
	icmp[0] = type;
	icmp[1] = code;
	*(__u16 *)&icmp[2] = 0;
	*(__be32 *)&icmp[4] = bpf_htonl(param);

	sum = csum_ipv6_pseudo(&s->src, &s->dst, 8 + quote, IPPROTO_ICMPV6);
	off = p->l3off + sizeof(*ip6);
	end = off + 8 + quote;
	for (i = 0; i < (8 + ICMP6_ERR_QUOTE) / 4; i++) {
		__be32 *w;
		__u8 *b;

		if (off + 4 <= end) {
			w = pkt_ptr(p, off & 0x7ff, 4);
			if (!w)
				return -1;
			sum += *w;
			off += 4;
			continue;
		}
		/* 1..3 trailing bytes, zero padded. */
		if (off < end) {
			__u8 tail[4] = {};
			__u32 n = end - off;

			b = pkt_ptr(p, off & 0x7ff, 1);
			if (!b)
				return -1;
			tail[0] = b[0];
			if (n > 1) {
				b = pkt_ptr(p, (off + 1) & 0x7ff, 1);
				if (!b)
					return -1;
				tail[1] = b[0];
			}
			if (n > 2) {
				b = pkt_ptr(p, (off + 2) & 0x7ff, 1);
				if (!b)
					return -1;
				tail[2] = b[0];
			}
			sum += *(__u32 *)tail;
		}
		break;
	}
	icmp = pkt_ptr(p, p->l3off + sizeof(*ip6), 8);
	if (!icmp)
		return -1;
	*(__u16 *)&icmp[2] = ~csum_fold64(sum);
	return 0;
}

/* icmp6_err_tc_from turns the skb into the error, from address from
 * (NULL: the invoking destination). Returns DROP_NONE (the
 * caller redirects it out of skb->ingress_ifindex) or the reason to drop
 * the invoking packet with: unsent when the kernel refuses to trim it,
 * DROP_ADJUST_ROOM, DROP_PKT_TRUNCATED.
 * A packet the sending host left in CHECKSUM_PARTIAL (veth from a local
 * stack) keeps that state: a device completing the quoted transport
 * checksum on transmit would invalidate the ICMPv6 checksum (no helper
 * resets it to CHECKSUM_NONE).
 */
static __always_inline __u32 icmp6_err_tc_from(struct __sk_buff *skb, struct pkt *p, __u8 type, __u8 code,
					       __u32 param, __u32 unsent, const struct in6_addr *from)
{
	struct icmp6_err_src s;
	__u32 quote;

	if (icmp6_err_save(p, &s))
		return DROP_PKT_TRUNCATED;
	if (from)
		ipv6_addr_copy(&s.dst, from);
	quote = skb->len - sizeof(struct ethhdr);
	if (quote > ICMP6_ERR_QUOTE)
		quote = ICMP6_ERR_QUOTE;
	/* Trim only when needed: bpf_skb_change_tail refuses skbs marked
	 * skb->encapsulation, which every packet the local seg6 encap made
	 * is. Such a packet too long to quote whole is dropped unanswered.
	 */
	if (quote < skb->len - sizeof(struct ethhdr) &&
	    bpf_skb_change_tail(skb, sizeof(struct ethhdr) + quote, 0))
		return unsent;
	if (bpf_skb_adjust_room(skb, ICMP6_ERR_HDRS, BPF_ADJ_ROOM_MAC, 0))
		return DROP_ADJUST_ROOM;
	/* The old checksum state no longer describes the packet. */
	bpf_csum_level(skb, BPF_CSUM_LEVEL_RESET);
	p->data = (void *)(long)skb->data;
	p->data_end = (void *)(long)skb->data_end;
	if (icmp6_err_fill(p, &s, type, code, param, quote))
		return DROP_PKT_TRUNCATED;
	return DROP_NONE;
}

/* icmp6_err_tc is icmp6_err_tc_from from the invoking destination. */
static __always_inline __u32 icmp6_err_tc(struct __sk_buff *skb, struct pkt *p, __u8 type, __u8 code,
					  __u32 param, __u32 unsent)
{
	return icmp6_err_tc_from(skb, p, type, code, param, unsent, NULL);
}

/* icmp6_err_xdp turns the frame into the error. Returns DROP_NONE (the
 * caller returns XDP_TX) or the reason to drop the invoking packet with.
 */
static __always_inline __u32 icmp6_err_xdp(struct xdp_md *ctx, struct pkt *p, __u8 type, __u8 code,
					   __u32 param)
{
	struct icmp6_err_src s;
	__u32 l3len, quote;

	if (icmp6_err_save(p, &s))
		return DROP_PKT_TRUNCATED;
	l3len = p->data_end - p->data - sizeof(struct ethhdr);
	quote = l3len > ICMP6_ERR_QUOTE ? ICMP6_ERR_QUOTE : l3len;
	if ((quote < l3len && bpf_xdp_adjust_tail(ctx, -(int)(l3len - quote))) ||
	    bpf_xdp_adjust_head(ctx, -ICMP6_ERR_HDRS))
		return DROP_ADJUST_ROOM;
	p->data = (void *)(long)ctx->data;
	p->data_end = (void *)(long)ctx->data_end;
	if (icmp6_err_fill(p, &s, type, code, param, quote))
		return DROP_PKT_TRUNCATED;
	return DROP_NONE;
}

#endif /* SRCHAIN_ICMP6_H */
