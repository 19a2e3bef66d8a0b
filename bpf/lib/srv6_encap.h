/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SRv6 encapsulation and decapsulation, written once for tc and XDP
 * (lib/ctx.h). For the SR proxies and the eBPF ingress.
 *
 *   srv6_encaps  H.Encaps (RFC 8986 5.1): push an outer IPv6 header and
 *                an SRH in front of the IPv6 or IPv4 packet.
 *   srv6_decap   strip the outer IPv6 header and all its extension
 *                headers down to an inner IPv6 or IPv4 packet (RFC 8986
 *                4.4 End.DX6 / 4.6 End.DX4 "remove the outer IPv6 header
 *                with all its extension headers").
 * Both return DROP_NONE or a drop reason, and leave c->p re-derived.
 * Their Go model is internal/srv6 (Encap builds what srv6_encaps writes;
 * the inner packet is what srv6_decap leaves), checked by the
 * BPF_PROG_TEST_RUN tables of internal/datapath (bpf/test/encap.c).
 */
#ifndef SRCHAIN_SRV6_ENCAP_H
#define SRCHAIN_SRV6_ENCAP_H

#include "common.h"
#include "ctx.h"
#include "ipv6.h"
#include "srh.h"

/* Extension headers srv6_decap removes at most (HBH, DestOpts, SRH,
 * DestOpts, ... as RFC 8200 4.1 orders them).
 */
#define SRV6_DECAP_MAX_EXT 6

/* SRV6_MAX_TLV_ROOM is the most TLV bytes srv6_encaps_fl reserves (the
 * eBPF ingress's OPoT TLV, 24).
 */
#define SRV6_MAX_TLV_ROOM 32

/* srv6_encaps: travel holds the n SIDs in the order they are visited
 * (travel[0] becomes the destination); the SRH lists them reversed
 * (RFC 8754 2: segment[0] is the last), SL = last entry = n - 1, no TLVs,
 * flags and tag 0. Outer header: traffic class and flow label 0, hop
 * limit hop_limit, source src, next header 43. Checks: 1 <= n <=
 * SRCHAIN_MAX_SEGS and an IPv6 or IPv4 packet behind Ethernet, else
 * DROP_UNSUPPORTED; the new payload length fits 16 bits, else
 * DROP_UNSUPPORTED; no room, DROP_ADJUST_ROOM. At XDP the room comes
 * from the frame's headroom, XDP_PACKET_HEADROOM (256) on most drivers:
 * 48 + 16 n must fit, so at most 13 SIDs there.
 */
static __always_inline __u32 srv6_encaps_fl(struct pctx *c, const int kind, const struct in6_addr *src,
					    const struct in6_addr *travel, __u32 n, __u8 hop_limit,
					    __be32 flowinfo, __u32 tlvroom);

static __always_inline __u32 srv6_encaps(struct pctx *c, const int kind, const struct in6_addr *src,
					 const struct in6_addr *travel, __u32 n, __u8 hop_limit)
{
	return srv6_encaps_fl(c, kind, src, travel, n, hop_limit, 0, 0);
}

/* srv6_encaps_fl is srv6_encaps with the outer traffic class and flow
 * label given: flowinfo is the outer header's first word in network
 * order (the version nibble is ignored), as the eBPF ingress computes it
 * the way the kernel's seg6 encap does (lib/ingress.h). tlvroom (a
 * multiple of 8, at most SRV6_MAX_TLV_ROOM) bytes after the segment
 * list are counted in the SRH and payload lengths and left for the
 * caller, who must fill them with TLVs before the packet leaves: tc
 * pushes them zeroed (not summed into CHECKSUM_COMPLETE), XDP leaves
 * whatever the headroom held.
 */
static __always_inline __u32 srv6_encaps_fl(struct pctx *c, const int kind, const struct in6_addr *src,
					    const struct in6_addr *travel, __u32 n, __u8 hop_limit,
					    __be32 flowinfo, __u32 tlvroom)
{
	struct srh_fixed *srh;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 srhlen, inner, i;
	__s64 csum = 0;
	int fix;
	__u8 nh;

	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!eth)
		return DROP_PKT_TRUNCATED;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		nh = IPPROTO_IPV6;
	else if (eth->h_proto == bpf_htons(ETH_P_IP))
		nh = IPPROTO_IPIP;
	else
		return DROP_UNSUPPORTED;
	if (n < 1 || n > SRCHAIN_MAX_SEGS || tlvroom > SRV6_MAX_TLV_ROOM || tlvroom % 8)
		return DROP_UNSUPPORTED;
	srhlen = sizeof(*srh) + n * sizeof(struct in6_addr) + tlvroom;
	inner = ctx_l3_len(c, kind);
	if (inner + srhlen > 0xffff)
		return DROP_UNSUPPORTED;
	if (ctx_push(c, kind, sizeof(*ip6) + srhlen, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6))
		return DROP_ADJUST_ROOM;

	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	srh = pkt_ptr(&c->p, c->p.l3off + sizeof(*ip6), sizeof(*srh));
	if (!eth || !ip6 || !srh)
		return DROP_PKT_TRUNCATED;
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	*(__be32 *)ip6 = bpf_htonl(0x60000000) | (flowinfo & bpf_htonl(0x0fffffff));
	ip6->payload_len = bpf_htons(srhlen + inner);
	ip6->nexthdr = IPPROTO_ROUTING;
	ip6->hop_limit = hop_limit;
	ipv6_addr_copy(&ip6->saddr, src);
	ipv6_addr_copy(&ip6->daddr, &travel[0]);
	srh->nexthdr = nh;
	srh->hdrlen = (srhlen - 8) / 8;
	srh->type = SRCHAIN_SRH_TYPE;
	srh->segments_left = n - 1;
	srh->last_entry = n - 1;
	srh->flags = 0;
	srh->tag = 0;
	fix = ctx_csum_complete(c, kind);
	if (fix) {
		csum = bpf_csum_diff(NULL, 0, (__be32 *)ip6, sizeof(*ip6), 0);
		csum = bpf_csum_diff(NULL, 0, (__be32 *)srh, sizeof(*srh), csum);
	}
	for (i = 0; i < SRCHAIN_MAX_SEGS; i++) {
		struct in6_addr *seg;

		if (i >= n)
			break;
		seg = pkt_ptr(&c->p, c->p.l3off + sizeof(*ip6) + sizeof(*srh) + i * sizeof(*seg),
			      sizeof(*seg));
		if (!seg)
			return DROP_PKT_TRUNCATED;
		ipv6_addr_copy(seg, &travel[(n - 1 - i) & (SRCHAIN_MAX_SEGS - 1)]);
		if (fix)
			csum = bpf_csum_diff(NULL, 0, (__be32 *)seg, sizeof(*seg), csum);
	}
	/* CHECKSUM_COMPLETE: the room was zero when pushed (its sum 0);
	 * add what now fills it.
	 */
	if (fix && csum >= 0)
		bpf_csum_update(c->ctx, csum);
	return DROP_NONE;
}

/* srv6_decap removes the IPv6 header at c->p.l3off and the extension
 * headers after it (ipv6_walk, IPV6_WALK_ALL, at most
 * SRV6_DECAP_MAX_EXT) and leaves the inner packet behind the Ethernet
 * header, whose type it sets. The upper-layer header must be IPv6 (41)
 * or IPv4 (4) in a non-fragment (else DROP_UNSUPPORTED); headers cut
 * short are DROP_PKT_TRUNCATED.
 */
static __always_inline __u32 srv6_decap(struct pctx *c, const int kind)
{
	struct ipv6hdr *ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	struct ipv6_walk w = {};
	struct ethhdr *eth;
	__u32 r, len;
	__u8 nh;

	if (!ip6)
		return DROP_PKT_TRUNCATED;
	w.nh = ip6->nexthdr;
	w.off = c->p.l3off + sizeof(*ip6);
	r = ipv6_walk(&c->p, &w, IPV6_WALK_ALL, SRV6_DECAP_MAX_EXT, CTX_MAX_ROOM, NULL);
	if (r)
		return r;
	nh = w.nh;
	if (w.nonfirst || (nh != IPPROTO_IPV6 && nh != IPPROTO_IPIP))
		return DROP_UNSUPPORTED;
	len = w.off - c->p.l3off;
	if (len >= CTX_MAX_ROOM)
		return DROP_UNSUPPORTED;
	if (!pkt_ptr(&c->p, w.off & (2 * CTX_MAX_ROOM - 1), nh == IPPROTO_IPV6 ? 40 : 20))
		return DROP_PKT_TRUNCATED;
	if (ctx_pull(c, kind, len,
		     nh == IPPROTO_IPV6 ? BPF_F_ADJ_ROOM_DECAP_L3_IPV6 : BPF_F_ADJ_ROOM_DECAP_L3_IPV4))
		return DROP_ADJUST_ROOM;
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!eth)
		return DROP_PKT_TRUNCATED;
	eth->h_proto = nh == IPPROTO_IPV6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP);
	return DROP_NONE;
}

#endif /* SRCHAIN_SRV6_ENCAP_H */
