/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* End.AN.NF (seed 002) on a stock kernel: srchain_anf_in strips and
 * stashes the outer header (insert mode: the SRH) before netfilter,
 * srchain_anf_out restores it after. Design, mark layout and limits: lib/anf.h, docs/netfilter.md.
 */
#include "common.h"
#include "counters.h"
#include "srh.h"
#include "fib.h"
#include "csum.h"
#include "ctx.h" /* BPF_F_ADJ_ROOM_DECAP_L3_* on old UAPI headers */
#include "anf.h"

/* tcx: TC_ACT_UNSPEC (-1) lets the next program on the hook run. */
#define TCX_NEXT -1

static __always_inline int drop(__u32 reason)
{
	count_drop(reason);
	return TC_ACT_SHOT;
}

/* inner_ttl_inc adds one to the inner packet's TTL / hop limit (unless
 * 255): the kernel's forwarding path decrements it once, End must not
 * (RFC 8986 4.1 touches only the outer header), so both cancel out.
 */
static __always_inline void inner_ttl_inc(struct __sk_buff *skb, struct pkt *p, __u8 nh)
{
	if (nh == IPPROTO_IPIP) {
		struct iphdr *ip4 = pkt_ptr(p, p->l3off, sizeof(*ip4));
		__be16 before, after;

		if (!ip4 || ip4->ttl == 255)
			return;
		before = *(__be16 *)&ip4->ttl;
		ip4->ttl += 1;
		after = *(__be16 *)&ip4->ttl;
		/* IPv4 header checksum; the header's one's-complement sum stays
		 * the same, so skb->csum (CHECKSUM_COMPLETE) needs nothing.
		 */
		bpf_l3_csum_replace(skb, p->l3off + offsetof(struct iphdr, check), before, after, 2);
	} else {
		struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
		__be32 before, after;

		if (!ip6 || ip6->hop_limit == 255)
			return;
		before = ((__be32 *)ip6)[1];
		ip6->hop_limit += 1;
		after = ((__be32 *)ip6)[1];
		skb_csum_replace(skb, &before, &after, sizeof(before));
	}
}

/* BPF_F_ADJ_ROOM_DECAP_IPXIP6 (Linux 6.18?): also clear skb->encapsulation
 * and the IPXIP6 GSO flag the sender's seg6 encapsulation set, so the
 * restore can encapsulate again (bpf_skb_adjust_room refuses to
 * encapsulate an skb marked encapsulated, -EALREADY).
 */
#ifndef BPF_F_ADJ_ROOM_DECAP_IPXIP6
#define BPF_F_ADJ_ROOM_DECAP_IPXIP6 (1ULL << 12)
#endif

/* anf_decap strips hlen bytes of outer header in front of an inner
 * packet of type nh, keeping the sender's GSO segment size (FIXED_GSO:
 * the segments still fit once the outer header is back). Kernels
 * without BPF_F_ADJ_ROOM_DECAP_IPXIP6 reject it: decapsulate without.
 */
static __always_inline long anf_decap(struct __sk_buff *skb, __u32 hlen, __u8 nh)
{
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO |
		      (nh == IPPROTO_IPV6 ? BPF_F_ADJ_ROOM_DECAP_L3_IPV6 : BPF_F_ADJ_ROOM_DECAP_L3_IPV4);

	if (!bpf_skb_adjust_room(skb, -(__s32)hlen, BPF_ADJ_ROOM_MAC, flags | BPF_F_ADJ_ROOM_DECAP_IPXIP6))
		return 0;
	return bpf_skb_adjust_room(skb, -(__s32)hlen, BPF_ADJ_ROOM_MAC, flags);
}

/* anf_strip_srh turns an insert-mode packet (H.Insert: SRH right behind
 * the fixed IPv6 header) back into the original packet for netfilter:
 * DA = segment 0 (the final destination), next header = the SRH's,
 * payload length without the SRH, then the SRH removed. skb->csum
 * (CHECKSUM_COMPLETE) follows each rewrite; the L4 checksum needs
 * nothing: the sender computed it over the final destination (RFC 8200
 * 8.1), which is now the DA.
 */
static __always_inline long anf_strip_srh(struct __sk_buff *skb, struct pkt *p, __u32 srhlen, __u8 nh,
					  const struct in6_addr *final)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	struct in6_addr before_da, after_da;
	__be32 before, after;

	if (!ip6 || bpf_ntohs(ip6->payload_len) < srhlen)
		return -1;
	before = ((__be32 *)ip6)[1];
	ip6->payload_len = bpf_htons(bpf_ntohs(ip6->payload_len) - srhlen);
	ip6->nexthdr = nh;
	after = ((__be32 *)ip6)[1];
	ipv6_addr_copy(&before_da, &ip6->daddr);
	ipv6_addr_copy(&ip6->daddr, final);
	ipv6_addr_copy(&after_da, final);
	skb_csum_replace(skb, &before, &after, sizeof(before));
	skb_csum_replace(skb, &before_da, &after_da, sizeof(before_da));
	/* NET: the room goes between the IPv6 header and what follows it,
	 * the SRH here; FIXED_GSO keeps the sender's segment size.
	 */
	return bpf_skb_adjust_room(skb, -(__s32)srhlen, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO);
}

SEC("tc")
int srchain_anf_in(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct anf_sid_key key = { .prefixlen = 128 };
	struct srh_info si = {};
	struct anf_entry *e;
	struct anf_sid *sid;
	struct in6_addr *next, *seg0, final;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u32 reason, hlen, slot, pktlen, args_bits, srhlen, insert;
	__u8 nh;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TCX_NEXT;
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6) {
		if (bpf_skb_pull_data(skb, 0))
			return TCX_NEXT;
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return TCX_NEXT;
	}
	ipv6_addr_copy(&key.addr, &ip6->daddr);
	sid = bpf_map_lookup_elem(&anf_sids, &key);
	if (!sid)
		return TCX_NEXT;
	args_bits = sid->args_bits;
	count_sid(sid->counter, skb->len - p.l3off);

	/* The whole outer header must be linear to be read and stashed. */
	if (p.data + p.l3off + ANF_MAX_HDR + 40 > p.data_end && p.data_end - p.data < skb->len) {
		if (bpf_skb_pull_data(skb, skb->len < p.l3off + ANF_MAX_HDR + 40 ? skb->len : p.l3off + ANF_MAX_HDR + 40))
			return drop(DROP_PKT_TRUNCATED);
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return drop(DROP_PKT_TRUNCATED);
	}
	if (ip6->version != 6 || ip6->payload_len == 0)
		return drop(DROP_UNSUPPORTED);
	pktlen = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	if (skb->len < p.l3off + pktlen)
		return drop(DROP_PKT_TRUNCATED);
	if (skb->len > p.l3off + pktlen) {
		/* Trailing bytes beyond the payload length (ip6_rcv_core trims). */
		if (bpf_skb_change_tail(skb, p.l3off + pktlen, 0))
			return drop(DROP_ADJUST_ROOM);
		p.data = (void *)(long)skb->data;
		p.data_end = (void *)(long)skb->data_end;
		ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
		if (!ip6)
			return drop(DROP_PKT_TRUNCATED);
	}
	/* Only an SRH right after the IPv6 header: with other extension
	 * headers in front (Hop-by-Hop, Destination Options) the packet is
	 * dropped, never passed to the kernel's End, which would forward
	 * it without netfilter (docs/netfilter.md).
	 */
	if (ip6->nexthdr != IPPROTO_ROUTING)
		return drop(DROP_NO_SRH);
	si.ip6off = p.l3off;
	si.srhoff = p.l3off + sizeof(*ip6);
	reason = srh_validate(&p, &si);
	if (!reason)
		reason = srh_validate_tlvs(&p, &si);
	if (reason)
		return drop(reason);
	if (si.sl == 0)
		return drop(DROP_SRH_SL_ZERO);
	if (srh_hmac_present(&p, &si))
		return drop(DROP_UNSUPPORTED);
	nh = si.nexthdr;
	/* An SRH followed by IPv4 / IPv6 is H.Encaps (RFC 8986 5.1);
	 * anything else is the original payload behind an SRH that
	 * H.Insert put there (the kernel's seg6 inline mode): insert mode,
	 * served on the original packet (docs/netfilter.md "Insert mode").
	 */
	insert = nh != IPPROTO_IPIP && nh != IPPROTO_IPV6;
	/* Hop limit exhausted: the kernel's End (the SID's seg6local route)
	 * sends ICMPv6 Time Exceeded, as for End (RFC 8986 4.1 S05-S07).
	 */
	if (ip6->hop_limit <= 1) {
		anf_count(ANF_STAT_TO_KERNEL);
		return TC_ACT_OK;
	}
	hlen = sizeof(*ip6) + si.srhlen;
	if (hlen > ANF_MAX_HDR)
		return drop(DROP_UNSUPPORTED);
	if (!insert && !pkt_ptr(&p, (p.l3off + hlen) & 0x3ff, nh == IPPROTO_IPV6 ? 40 : 20))
		return drop(DROP_PKT_TRUNCATED);
	next = srh_segment(&p, &si, si.sl - 1);
	seg0 = srh_segment(&p, &si, 0);
	if (!next || !seg0)
		return drop(DROP_SRH_TRUNCATED);
	ipv6_addr_copy(&final, seg0);
	srhlen = si.srhlen;

	slot = anf_slot_alloc();
	e = bpf_map_lookup_elem(&anf_stash, &slot);
	if (!e)
		return drop(DROP_UNSUPPORTED);
	/* Live and never restored: netfilter dropped or holds its packet.
	 * Live after restores: a datagram whose last piece did not come
	 * (netfilter dropped it, or the fragments were not reassembled and
	 * this slot held a non-last one); not counted as unclaimed.
	 */
	if (e->live && !e->uses)
		anf_count(ANF_STAT_UNCLAIMED);
	/* Re-bound hlen for the verifier after the compiler's reuse of it. */
	asm volatile("" : "+r"(hlen));
	if (hlen < sizeof(*ip6) + 8 || hlen > ANF_MAX_HDR)
		return drop(DROP_UNSUPPORTED);
	asm volatile("" : "+r"(hlen));
	hlen = ((hlen - 1) & (ANF_HDR_ROOM - 1)) + 1; /* [1, ANF_HDR_ROOM]: no change at run time */
	if (bpf_skb_load_bytes(skb, p.l3off, e->hdr, hlen))
		return drop(DROP_PKT_TRUNCATED);
	/* End on the stashed copy (RFC 8986 4.1 S14-S16): hop limit - 1,
	 * segments left - 1, DA = the new active segment.
	 */
	e->hdr[7] -= 1;
	e->hdr[sizeof(*ip6) + 3] = si.sl - 1;
	__builtin_memcpy(&e->hdr[24], next, sizeof(*next));
	e->hlen = hlen;
	e->insert = insert;
	e->uses = 0;
	e->ifindex = skb->ingress_ifindex;
	e->mark = skb->mark;
	e->ts = bpf_ktime_get_coarse_ns(); /* jiffy resolution: ample for a 1 s age limit, and cheap */
	e->live = 1;
	anf_count(ANF_STAT_STASHED);

	/* The ARG is that of the active SID, the DA on arrival (seed 002
	 * listing 3.2); read it before the header goes.
	 */
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return drop(DROP_PKT_TRUNCATED);
	skb->mark = anf_mark(slot, &ip6->daddr, args_bits);

	if (insert) {
		/* The packet's own hop limit stays: the kernel's forwarding
		 * lowers it once, End's decrement (RFC 8986 4.1 S14).
		 */
		if (anf_strip_srh(skb, &p, srhlen, nh, &final)) {
			e->live = 0;
			return drop(DROP_ADJUST_ROOM);
		}
		return TC_ACT_OK;
	}
	/* FIXED_GSO: a GSO packet keeps the sender's segment size, so the
	 * segments still fit once the outer header is back.
	 */
	if (anf_decap(skb, hlen, nh)) {
		e->live = 0;
		return drop(DROP_ADJUST_ROOM);
	}
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	if (!eth)
		return drop(DROP_PKT_TRUNCATED);
	eth->h_proto = nh == IPPROTO_IPV6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP);
	inner_ttl_inc(skb, &p, nh);
	return TC_ACT_OK;
}

#ifndef EALREADY
#define EALREADY 114
#endif

/* anf_encap makes room for hlen bytes of outer header (FIXED_GSO: the
 * sender's segment size stays). An skb still marked encapsulated by the
 * sender's seg6 encapsulation (kernels whose decapsulation does not
 * clear it, -EALREADY) gets the room without the ENCAP flag: its inner
 * header offsets and tunnel GSO type are those of the original outer
 * header, which had exactly this size, so they are right again once it
 * is back. skb->protocol then stays the inner family until the next
 * receiver parses the Ethernet header (docs/netfilter.md "Limits").
 */
static __always_inline long anf_encap(struct __sk_buff *skb, __u32 hlen, int *fallback)
{
	long r = bpf_skb_adjust_room(skb, hlen, BPF_ADJ_ROOM_MAC,
				     BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV6);

	if (r == -EALREADY) {
		*fallback = 1;
		r = bpf_skb_adjust_room(skb, hlen, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO);
	}
	return r;
}

/* anf_forward sends the restored SR packet to the next SID's
 * neighbour: FIB lookup (as if it arrived on ifindex), then redirect.
 *
 * An unresolved neighbour (NO_NEIGH) is resolved by bpf_redirect_neigh,
 * which queues the packet until the answer comes; the kernel then sends
 * the queued packet through the neighbour of the packet's route
 * (__neigh_update: dst_neigh_lookup_skb). At the restore device's egress
 * that route is still the fwmark route to srcanf0, whose NOARP
 * neighbour stamps srcanf0's own MAC as destination: the next hop drops
 * it (PACKET_OTHERHOST), so the first packet after a neighbour expired
 * was lost. With may_bounce the packet first goes through the restore
 * device's peer, whose receive path drops the route, and
 * srchain_anf_fwd resolves the neighbour from there.
 */
static __always_inline int anf_forward(struct __sk_buff *skb, __u32 ifindex, int may_bounce)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct bpf_fib_lookup params;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	long rc;

	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!eth || !ip6)
		return drop(DROP_PKT_TRUNCATED);
	/* tot_len 0: the helper checks the skb itself against the MTU of
	 * the route's device (GSO packets per segment).
	 */
	__builtin_memset(&params, 0, sizeof(params));
	params.family = AF_INET6;
	params.flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0fffffff);
	params.l4_protocol = ip6->nexthdr;
	params.ifindex = ifindex;
	ipv6_addr_copy((struct in6_addr *)params.ipv6_src, &ip6->saddr);
	ipv6_addr_copy((struct in6_addr *)params.ipv6_dst, &ip6->daddr);
	rc = bpf_fib_lookup(skb, &params, sizeof(params), 0);
	fib_count(rc >= 0 && rc < FIB_SLOT_RET_MAX ? (__u32)rc : FIB_SLOT_MAX - 1);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		fib_set_macs(eth, &params);
		return bpf_redirect(params.ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		struct bpf_redir_neigh rn = { .nh_family = AF_INET6 };

		if (may_bounce && cfg_peer_ifindex)
			return bpf_redirect(cfg_peer_ifindex, BPF_F_INGRESS);

		__builtin_memcpy(rn.ipv6_nh, params.ipv6_dst, sizeof(rn.ipv6_nh));
		fib_count(FIB_SLOT_REDIRECT_NEIGH);
		return bpf_redirect_neigh(params.ifindex, &rn, sizeof(rn), 0);
	}
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return drop(DROP_ANF_TOO_BIG);
	return drop(DROP_ANF_NO_ROUTE);
}

#ifndef IPPROTO_FRAGMENT
#define IPPROTO_FRAGMENT 44
#endif
/* More Fragments: bit 13 of IPv4's frag_off (RFC 791), bit 0 of the
 * IPv6 Fragment header's offset word (RFC 8200 4.5).
 */
#define ANF_IP4_MF 0x2000
#define ANF_IP6_M 0x0001
/* Extension headers stepped over to find an IPv6 Fragment header: the
 * kernel's fragmentation puts it behind the unfragmentable part
 * (Hop-by-Hop, Destination Options, Routing; RFC 8200 4.5).
 */
#define ANF_FRAG_SCAN 6

/* anf_more_fragments reports whether the inner packet at off (family nh)
 * is a fragment that is not the last of its datagram: its restore must
 * leave the slot live for the pieces that follow (lib/anf.h). Reads with
 * bpf_skb_load_bytes: the packet need not be linear. Unreadable: 0 (the
 * slot is consumed, as before).
 */
static __always_inline int anf_more_fragments(struct __sk_buff *skb, __u32 off, __u8 nh)
{
	__u8 h[4];
	__u8 next;
	int i;

	if (nh == IPPROTO_IPIP) {
		__be16 fo;

		if (bpf_skb_load_bytes(skb, off + offsetof(struct iphdr, frag_off), &fo, sizeof(fo)))
			return 0;
		return !!(fo & bpf_htons(ANF_IP4_MF));
	}
	if (bpf_skb_load_bytes(skb, off + offsetof(struct ipv6hdr, nexthdr), &next, 1))
		return 0;
	off += sizeof(struct ipv6hdr);
	for (i = 0; i < ANF_FRAG_SCAN; i++) {
		if (bpf_skb_load_bytes(skb, off, h, sizeof(h)))
			return 0;
		if (next == IPPROTO_FRAGMENT)
			return !!(h[3] & ANF_IP6_M);
		if (next != IPPROTO_HOPOPTS && next != IPPROTO_DSTOPTS && next != IPPROTO_ROUTING)
			return 0;
		next = h[0];
		off += ((__u32)h[1] + 1) * 8;
	}
	return 0;
}

SEC("tc")
int srchain_anf_out(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct anf_entry *e;
	struct ipv6hdr *ip6, orig;
	struct ethhdr *eth;
	__u32 mark = skb->mark, slot, hlen, inner, ifindex, add, insert;
	int fallback = 0, more;
	__u8 nh, sl;

	if (!(mark & ANF_MARK_FLAG))
		return drop(DROP_ANF_NO_SLOT);
	slot = (mark >> ANF_MARK_SLOT_SHIFT) & (ANF_SLOTS - 1);
	e = bpf_map_lookup_elem(&anf_stash, &slot);
	if (!e || !e->live)
		return drop(DROP_ANF_STALE);
	if (bpf_ktime_get_coarse_ns() - e->ts > cfg_max_age_ns) {
		e->live = 0;
		return drop(DROP_ANF_STALE);
	}
	if (skb->protocol == bpf_htons(ETH_P_IP))
		nh = IPPROTO_IPIP;
	else if (skb->protocol == bpf_htons(ETH_P_IPV6))
		nh = IPPROTO_IPV6;
	else
		return drop(DROP_UNSUPPORTED);
	/* Read before the header goes back in (offsets of the inner packet). */
	more = anf_more_fragments(skb, p.l3off, nh);
	hlen = e->hlen;
	asm volatile("" : "+r"(hlen));
	if (hlen < sizeof(*ip6) + 8 || hlen > ANF_MAX_HDR)
		return drop(DROP_ANF_STALE);
	asm volatile("" : "+r"(hlen));
	hlen = ((hlen - 1) & (ANF_HDR_ROOM - 1)) + 1; /* [1, ANF_HDR_ROOM]: no change at run time */
	inner = skb->len - p.l3off;
	insert = e->insert;
	sl = e->hdr[sizeof(*ip6) + 3]; /* segments left, End applied */
	add = hlen;
	if (insert) {
		/* Insert mode: the packet is the original IPv6 packet as
		 * netfilter left it; only the SRH comes back.
		 */
		if (nh != IPPROTO_IPV6)
			return drop(DROP_UNSUPPORTED);
		if (bpf_skb_load_bytes(skb, p.l3off, &orig, sizeof(orig)))
			return drop(DROP_PKT_TRUNCATED);
		add = hlen - sizeof(*ip6);
	}
	if (inner + add - sizeof(*ip6) > 0xffff)
		return drop(DROP_ANF_TOO_BIG);
	if (insert) {
		if (bpf_skb_adjust_room(skb, add, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
			return drop(DROP_ADJUST_ROOM);
	} else if (anf_encap(skb, hlen, &fallback)) {
		return drop(DROP_ADJUST_ROOM);
	}
	/* Insert mode writes the whole stashed header too (one bounded
	 * store for both modes); its IPv6 header is replaced below.
	 */
	if (bpf_skb_store_bytes(skb, p.l3off, e->hdr, hlen, 0))
		return drop(DROP_ADJUST_ROOM);
	ifindex = e->ifindex;
	skb->mark = e->mark;
	/* Only the last piece of a datagram consumes the slot: the pieces
	 * the kernel fragmented again after conntrack's reassembly all carry
	 * this slot (lib/anf.h, docs/netfilter.md "Fragments").
	 */
	e->uses += 1;
	if (more)
		anf_count(ANF_STAT_FRAG_KEPT);
	else
		e->live = 0;
	anf_count(ANF_STAT_RESTORED);

	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	eth = pkt_ptr(&p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!eth || !ip6)
		return drop(DROP_PKT_TRUNCATED);
	{
		struct srh_fixed *srh = pkt_ptr(&p, p.l3off + sizeof(*ip6), sizeof(*srh));

		if (!srh)
			return drop(DROP_PKT_TRUNCATED);
		/* NAT may have resized the inner packet; the family cannot change. */
		srh->nexthdr = insert ? orig.nexthdr : nh;
	}
	if (insert) {
		struct in6_addr *seg0 = pkt_ptr(&p, p.l3off + sizeof(*ip6) + sizeof(struct srh_fixed),
						sizeof(*seg0));

		if (!seg0)
			return drop(DROP_PKT_TRUNCATED);
		/* Segment 0 = the destination as netfilter left it (DNAT);
		 * DA = the next SID, or segment 0 itself once SL is 0. The
		 * rest of the IPv6 header as netfilter and forwarding left it:
		 * source (SNAT), traffic class, flow label, hop limit (lowered
		 * once by the forwarding: End's decrement). The L4 checksum
		 * covers segment 0 (RFC 8200 8.1): unchanged.
		 */
		ipv6_addr_copy(seg0, &orig.daddr);
		*(__be32 *)ip6 = *(__be32 *)&orig;
		ip6->hop_limit = orig.hop_limit;
		ipv6_addr_copy(&ip6->saddr, &orig.saddr);
		if (sl == 0)
			ipv6_addr_copy(&ip6->daddr, &orig.daddr);
		ip6->nexthdr = IPPROTO_ROUTING;
	}
	ip6->payload_len = bpf_htons(inner + add - sizeof(*ip6));
	eth->h_proto = bpf_htons(ETH_P_IPV6);

	/* Still marked encapsulated (anf_encap's fallback), an IPv4 inner
	 * GSO packet keeps skb->protocol IPv4, and the software GSO that
	 * its DODGY flag asks for at the next device would parse the outer
	 * IPv6 header as IPv4. Through the restore device's peer it is
	 * received again, which reads the protocol from the Ethernet header
	 * (eth_type_trans); srchain_anf_fwd forwards it from there.
	 */
	if (fallback && nh == IPPROTO_IPIP && skb->gso_size && cfg_peer_ifindex)
		return bpf_redirect(cfg_peer_ifindex, BPF_F_INGRESS);
	return anf_forward(skb, ifindex, 1);
}

/* srchain_anf_fwd (tcx ingress of the restore device's peer): forwards
 * restored packets that srchain_anf_out sent the long way round.
 */
SEC("tc")
int srchain_anf_fwd(struct __sk_buff *skb)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct ipv6hdr *ip6;

	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6 || skb->protocol != bpf_htons(ETH_P_IPV6))
		return drop(DROP_UNSUPPORTED);
	return anf_forward(skb, skb->ingress_ifindex, 0);
}

char _license[] SEC("license") = "Dual BSD/GPL";
