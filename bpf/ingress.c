/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* srchain eBPF ingress (headend): classify to a chain with the
 * firewall's bit-vector engine, then H.Encaps or H.Insert, FIB lookup and
 * redirect. docs/datapath.md "The ingress program".
 *
 * srchain_ingress (tc, tcx ingress of every interface of the router) is
 * the complete implementation: a packet of a chain leaves it
 * encapsulated, redirected when the FIB resolves the first segment and
 * the outer hop limit allows it, else handed to the stack (TC_ACT_OK),
 * which forwards the outer packet exactly as it does after its own seg6
 * encap (ip6_forward: hop limit, neighbour resolution, Packet Too Big,
 * Time Exceeded). A packet of no chain, not addressed to this host, or
 * one the stack would drop (bad IPv4 header, multicast or loopback
 * addresses) goes on untouched (TC_ACT_UNSPEC: the next tcx program, then
 * the stack).
 *
 * srchain_ingress_xdp is the fast path: it decides on copies first and
 * rewrites only a packet it redirects (FIB hit, hop limit > 1, no
 * trailing bytes, flow label not hashed, room in the headroom); any
 * other packet goes to tc UNTOUCHED (XDP_PASS), so the tc program must
 * be attached to the same interface. It is the PIPE_INGRESS stage of
 * the node's XDP pipeline (lib/pipeline.h), the last one: a packet of no
 * chain goes on to the stack.
 *
 * The outer header is byte for byte the kernel's (seg6_do_srh_encap /
 * seg6_do_srh_inline, checked by test/e2e/ingress_diff_test.go): source
 * the node's tunsrc, hop limit the inner IPv6 packet's (an IPv4 packet:
 * the route device's IPv6 hop_limit, ip6_dst_hoplimit), traffic class
 * and flow label per lib/ingress.h ing_flowinfo, then the forwarding
 * hop decrements the outer hop limit as ip6_forward does.
 */
#include "common.h"
#include "counters.h"
#include "ctx.h"
#include "srh.h"
#include "fib.h"
#include "srv6_encap.h"
#include "fw_maps.h"
#include "fw_extract.h"
#include "fw_classify.h"
#include "ingress.h"
#include "pipeline.h"
#include "icmp6.h"
#include "icmp4.h"
#include "fw_ratelimit.h"

/* Headers the classifier reads (advanced mode: the packet's own
 * addresses, protocol and ports behind at most FW_MAX_EXT extension
 * headers).
 */
#define ING_PULL (14 + FW_MAX_OFF + 64)

/* XDP headroom (XDP_PACKET_HEADROOM) holds the outer IPv6 header and an
 * SRH of at most 13 segments; longer lists are left to tc.
 */
#define ING_XDP_MAX_SEGS 13

#ifndef PACKET_HOST
#define PACKET_HOST 0
#endif

/* What the classifier found: the chain's policy and the outer header the
 * rewrite will produce (for the FIB lookup before rewriting).
 */
struct ing_dec {
	struct ing_policy *pol;
	struct ing_config *cfg;
	struct ipv6hdr outer;
	__u32 l3len; /* the packet's IP length by its header */
	__be32 first; /* an IPv6 packet's first word (0 for IPv4) */
	int v6;
	__u32 ifindex; /* where it came in */
	__u32 mark;
	__u32 tag; /* the chain set's (ing_config.hash), for ing_routes */
	__u8 tos; /* an IPv4 packet's */
};

/* ing_classify's results. */
#define ING_NOT_OURS 0
#define ING_CHAIN 1
#define ING_FLOW_MISS 2 /* a pool chain's packet with no flow entry: its key in ing_key_scratch */
#define ING_KERNEL 3 /* left to the kernel's own path, untouched */

/* ing_ip4_ok: what ip_rcv_core and the input route lookup would refuse
 * (bad version, header length, total length or checksum; multicast,
 * broadcast, loopback, zero-net addresses) is not ours to steer. Nor is
 * what the kernel treats in a way the fast path does not copy, which
 * goes to the kernel's own path untouched (*kernel set):
 *   - IPv4 options (ip_rcv_options: malformed ones are dropped or
 *     answered with Parameter Problem, LSRR/SSRR dropped, RR/TS write the
 *     router's address or a timestamp into the header);
 *   - fragments, first or not (the kernel's rules see no ports on them:
 *     fib4_rules_early_flow_dissect stops at a fragment).
 */
static __always_inline int ing_ip4_ok(const struct pkt *p, __u32 have, __u32 *l3len, int *kernel)
{
	struct iphdr *ip4 = pkt_ptr(p, p->l3off, sizeof(*ip4));
	__u32 tot, sum = 0, i;
	__u8 s0, d0;

	if (!ip4 || ip4->version != 4 || ip4->ihl < 5)
		return 0;
	if (ip4->ihl != 5 || (ip4->frag_off & bpf_htons(0x3fff))) {
		*kernel = 1;
		return 0;
	}
	tot = bpf_ntohs(ip4->tot_len);
	if (tot < sizeof(*ip4) || tot > have)
		return 0;
#pragma unroll
	for (i = 0; i < 5; i++) {
		__u16 *w = pkt_ptr(p, p->l3off + i * 4, 4);

		if (!w)
			return 0;
		sum += w[0];
		sum += w[1];
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	if (sum != 0xffff)
		return 0;
	s0 = ((__u8 *)&ip4->saddr)[0];
	d0 = ((__u8 *)&ip4->daddr)[0];
	if ((d0 & 0xf0) == 0xe0 || ip4->daddr == 0xffffffff || d0 == 127 || d0 == 0)
		return 0;
	if ((s0 & 0xf0) == 0xe0 || ip4->saddr == 0xffffffff || s0 == 127 || s0 == 0)
		return 0;
	*l3len = tot;
	return 1;
}

/* ing_ip6_ext: IPv6 next-header values the fast path does not look
 * behind: extension headers (RFC 8200 4; the kernel processes a
 * Hop-by-Hop header in ipv6_rcv, and its rules' flow dissector reads
 * ports through some headers and not others: fragments, AH) and ESP.
 */
static __always_inline int ing_ip6_ext(__u8 nh)
{
	switch (nh) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_FRAGMENT:
	case 50: /* ESP */
	case IPPROTO_AH:
	case IPPROTO_DSTOPTS:
	case 135: /* Mobility */
	case 139: /* HIP */
	case 140: /* Shim6 */
	case 253: /* experimental (RFC 3692) */
	case 254:
		return 1;
	}
	return 0;
}

/* ing_ip6_ok: likewise for IPv6 (ip6_rcv_core): version, payload length
 * (no jumbograms), multicast source, loopback addresses; multicast and
 * link-local destinations never take a chain's route. What the kernel
 * treats in a way the fast path does not copy goes to the kernel's path
 * (*kernel set): a payload length of 0 (ipv6_rcv trims the packet to its
 * header), any extension header (ing_ip6_ext), and sources that
 * ip6_forward or the route lookup refuse or treat apart (unspecified,
 * link-local, IPv4-mapped: RFC 4291 2.5.2, 2.5.5.2, 2.5.6).
 */
static __always_inline int ing_ip6_ok(const struct pkt *p, __u32 have, __u32 *l3len, int *kernel)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	const struct in6_addr *sa, *da;
	__u32 len;

	if (!ip6 || ip6->version != 6)
		return 0;
	sa = &ip6->saddr;
	da = &ip6->daddr;
	if (ip6->payload_len == 0 || ing_ip6_ext(ip6->nexthdr)) {
		*kernel = 1;
		return 0;
	}
	len = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
	if (len > have)
		return 0;
	if (sa->in6_u.u6_addr8[0] == 0xff || da->in6_u.u6_addr8[0] == 0xff)
		return 0;
	if (da->in6_u.u6_addr8[0] == 0xfe && (da->in6_u.u6_addr8[1] & 0xc0) == 0x80)
		return 0;
	if ((da->in6_u.u6_addr32[0] | da->in6_u.u6_addr32[1] | da->in6_u.u6_addr32[2]) == 0 &&
	    da->in6_u.u6_addr32[3] == bpf_htonl(1))
		return 0;
	if ((sa->in6_u.u6_addr32[0] | sa->in6_u.u6_addr32[1] | sa->in6_u.u6_addr32[2]) == 0 &&
	    sa->in6_u.u6_addr32[3] == bpf_htonl(1))
		return 0;
	if ((sa->in6_u.u6_addr8[0] == 0xfe && (sa->in6_u.u6_addr8[1] & 0xc0) == 0x80) ||
	    ((sa->in6_u.u6_addr32[0] | sa->in6_u.u6_addr32[1]) == 0 &&
	     (sa->in6_u.u6_addr32[2] == 0 || sa->in6_u.u6_addr32[2] == bpf_htonl(0xffff))) ||
	    ((da->in6_u.u6_addr32[0] | da->in6_u.u6_addr32[1]) == 0 &&
	     (da->in6_u.u6_addr32[2] == 0 || da->in6_u.u6_addr32[2] == bpf_htonl(0xffff)))) {
		*kernel = 1; /* ::/96 (unspecified, IPv4-compatible), ::ffff:0:0/96, fe80::/10 */
		return 0;
	}
	*l3len = len;
	return 1;
}

/* ing_kernel_steers asks the kernel's FIB, its rules included, what the
 * input route lookup (ip_route_input_noref / ip6_route_input) would do
 * with the packet, with the same keys (addresses, TOS or flow info,
 * protocol, ports, input interface, mark). The fast path encapsulates
 * only when the answer is an lwtunnel route (a chain's seg6 route:
 * BPF_FIB_LKUP_RET_UNSUPP_LWT) and, for IPv4, the source passes
 * fib_validate_source: its reverse route (ports swapped, as
 * __fib_validate_source looks it up) is unicast back through the
 * interface the packet came in on. Everything else (a TCP SYN, whose MSS
 * the kernel path clamps; a local, broadcast
 * or martian source or destination, a more specific plain route, no
 * route, forwarding disabled, an asymmetric source) is left to the
 * kernel, which decides exactly as without the program. The answer is
 * cached per flow (ing_routes, lib/ingress.h): a FIB lookup walks every
 * ip rule before the one that matches, one per 5-tuple chain. A
 * subprogram: inlined, its branches multiply the verifier's states of
 * the caller.
 */
static __attribute__((noinline)) int ing_kernel_steers(void *ctx, const struct ing_dec *d, const struct fw_view *v,
							struct bpf_fib_lookup *f)
{
	__u32 flags = BPF_FIB_LOOKUP_SKIP_NEIGH, proto, sp, dp, zero = 0, steers;
	struct ing_route_key *k;
	struct ing_route *rt, nr = {};
	__u64 now;
	long rc;

	proto = v->val[FW_F_PROTO - FW_NADDR];
	sp = v->val[FW_F_SPORT - FW_NADDR];
	dp = v->val[FW_F_DPORT - FW_NADDR];
	if (proto > 255)
		proto = 0;
	if (sp > 65535 || dp > 65535)
		sp = dp = 0; /* no ports: the flow dissector leaves them 0 */
	k = bpf_map_lookup_elem(&ing_route_scratch, &zero);
	if (!k)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	ipv6_addr_copy(&k->src, &v->addr[FW_F_SRC]);
	ipv6_addr_copy(&k->dst, &v->addr[FW_F_DST]);
	k->ifindex = d->ifindex;
	k->mark = d->mark;
	k->sport = sp;
	k->dport = dp;
	k->proto = proto;
	k->v6 = d->v6;
	k->tos = d->tos;
	k->flowinfo = d->v6 ? d->first & bpf_htonl(0x0fffffff) : 0;
	now = bpf_ktime_get_ns();
	rt = bpf_map_lookup_elem(&ing_routes, k);
	if (rt && rt->tag == d->tag && now < rt->expires)
		return rt->steers;

	__builtin_memset(f, 0, sizeof(*f));
	if (d->mark) {
		*(__u32 *)f->smac = d->mark; /* union member "mark" (6.10+) */
		flags |= BPF_FIB_LOOKUP_MARK;
	}
	f->ifindex = d->ifindex;
	f->l4_protocol = proto;
	f->sport = bpf_htons(sp);
	f->dport = bpf_htons(dp);
	if (d->v6) {
		f->family = AF_INET6;
		f->flowinfo = k->flowinfo;
		ipv6_addr_copy((struct in6_addr *)f->ipv6_src, &k->src);
		ipv6_addr_copy((struct in6_addr *)f->ipv6_dst, &k->dst);
		rc = bpf_fib_lookup(ctx, f, sizeof(*f), flags);
		steers = rc == BPF_FIB_LKUP_RET_UNSUPP_LWT;
		goto out;
	}
	/* IPv4 addresses are IPv4-mapped in the view (fw_addr_v4). */
	f->family = AF_INET;
	f->tos = d->tos;
	f->ipv4_src = k->src.in6_u.u6_addr32[3];
	f->ipv4_dst = k->dst.in6_u.u6_addr32[3];
	rc = bpf_fib_lookup(ctx, f, sizeof(*f), flags);
	steers = 0;
	if (rc != BPF_FIB_LKUP_RET_UNSUPP_LWT)
		goto out;
	__builtin_memset(f, 0, sizeof(*f));
	if (d->mark)
		*(__u32 *)f->smac = d->mark;
	f->family = AF_INET;
	f->tos = d->tos;
	f->ipv4_src = k->dst.in6_u.u6_addr32[3];
	f->ipv4_dst = k->src.in6_u.u6_addr32[3];
	f->ifindex = d->ifindex;
	f->l4_protocol = proto;
	f->sport = bpf_htons(dp);
	f->dport = bpf_htons(sp);
	rc = bpf_fib_lookup(ctx, f, sizeof(*f), flags);
	/* UNSUPP_LWT: unicast, through an encap route (no device to compare). */
	steers = rc == BPF_FIB_LKUP_RET_UNSUPP_LWT ||
		 ((rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) && f->ifindex == d->ifindex);
out:
	nr.steers = steers;
	nr.tag = d->tag;
	nr.expires = now + ING_ROUTE_TTL_NS;
	bpf_map_update_elem(&ing_routes, k, &nr, BPF_ANY);
	return steers;
}

/* ing_syn reports a TCP SYN (SYN-ACK too): it takes the kernel's path,
 * where srchain's nftables table srchain_mss clamps its MSS to what fits
 * the chain (internal/mss; docs/datapath.md "MTU and MSS"). The TCP
 * header follows the fixed IP header (no options or extension headers
 * reach here).
 */
static __always_inline int ing_syn(const struct pkt *p, const struct ing_dec *d, const struct fw_view *v)
{
	__u8 *fl;

	if (v->val[FW_F_PROTO - FW_NADDR] != IPPROTO_TCP)
		return 0;
	fl = pkt_ptr(p, p->l3off + (d->v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr)) + 13, 1);
	return !fl || (*fl & 0x02);
}

/* ing_classify fills d for a packet of a chain and returns ING_CHAIN;
 * ING_NOT_OURS leaves the packet alone; ING_FLOW_MISS is a packet of a
 * pool chain whose flow has no entry yet (its key in ing_key_scratch,
 * d->pol the chain's).
 * have: the bytes from the L3 header on.
 */
static __always_inline int ing_classify(void *ctx, struct pkt *p, __u16 proto, __u32 ifindex, __u32 mark,
					__u32 have, struct ing_dec *d, struct bpf_fib_lookup *fib)
{
	struct fw_pkt fp = {};
	struct fw_config *cfg;
	struct fw_view *vp;
	__u32 zero = 0, gen, slot, *genp;
	struct ing_flow_key *key;
	struct ing_flow *f;
	struct iphdr *ip4;
	__u32 reason;
	int idx;

	int kernel = 0;

	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;

		if (!ing_ip6_ok(p, have, &d->l3len, &kernel))
			goto not_ours;
		ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
		if (!ip6)
			goto not_ours;
		d->v6 = 1;
		d->first = *(__be32 *)ip6;
		__builtin_memcpy(&d->outer, ip6, sizeof(d->outer));
	} else {
		if (!ing_ip4_ok(p, have, &d->l3len, &kernel))
			goto not_ours;
		d->v6 = 0;
		d->first = 0;
		ip4 = pkt_ptr(p, p->l3off, sizeof(*ip4));
		if (!ip4)
			goto not_ours;
		d->tos = ip4->tos;
	}

	genp = bpf_map_lookup_elem(&fw_gen, &zero);
	gen = genp ? (*genp & 1) : 0;
	cfg = bpf_map_lookup_elem(&fw_cfg, &gen);
	vp = bpf_map_lookup_elem(&fw_scratch, &zero);
	d->cfg = bpf_map_lookup_elem(&ing_config_map, &zero);
	if (!cfg || !vp || !d->cfg)
		return 0;
	fw_view_reset(vp);
	/* Advanced mode: the packet's own fields, as the kernel's routing
	 * decision sees them (an SRv6 packet in transit is classified by
	 * its outer header, never by what it carries).
	 */
	if (d->v6)
		reason = fw_extract6(p, FW_MODE_ADVANCED, vp, &fp);
	else
		reason = fw_ip4(p, vp, p->l3off, FW_F_SRC, FW_F_DST, 1);
	if (reason) {
		kernel = 1; /* malformed: the stack decides */
		goto not_ours;
	}
	if (fp.sr && fp.si.sl > fp.si.last_entry)
		fw_srh_absent(vp);
	vp->addr[FW_F_IIF].in6_u.u6_addr32[0] = bpf_htonl(ifindex);
	vp->present[FW_F_IIF] = 1;

	idx = fw_classify(vp, cfg);
	if (idx < 0 || (__u32)idx >= cfg->nrules || idx >= FW_MAX_RULES) {
		ing_outcome(ING_OUT_NO_CHAIN);
		return 0;
	}
	slot = (cfg->gen & 1) * FW_RULE_SLOTS + idx;
	d->pol = bpf_map_lookup_elem(&ing_policies, &slot);
	/* A headend extension exists for encap mode only
	 * (ing_headend_ext): anything else is left alone before anything
	 * is rewritten.
	 */
	if (!d->pol || d->pol->mode == ING_MODE_NONE || (d->pol->ext && d->pol->mode != ING_MODE_ENCAP) ||
	    d->pol->nsegs < 1 || d->pol->nsegs > SRCHAIN_MAX_SEGS ||
	    (d->pol->mode == ING_MODE_INSERT && (!d->v6 || d->pol->nsegs + 1 > SRCHAIN_MAX_SEGS))) {
		ing_outcome(ING_OUT_NO_CHAIN);
		return ING_NOT_OURS;
	}
	d->ifindex = ifindex;
	d->mark = mark;
	d->tag = *(__u32 *)d->cfg->hash;
	if (ing_syn(p, d, vp) || !ing_kernel_steers(ctx, d, vp, fib)) {
		ing_outcome(ING_OUT_KERNEL);
		return ING_KERNEL;
	}
	if (!d->pol->pool)
		return ING_CHAIN;
	/* A pool chain: the flow's entry picks the variant. */
	key = bpf_map_lookup_elem(&ing_key_scratch, &zero);
	if (!key)
		return ING_NOT_OURS;
	ing_flow_fill(vp, d->pol->pool, key);
	f = bpf_map_lookup_elem(&ing_flows, key);
	if (!f || f->variant >= d->pol->nvariants || f->variant >= ING_MAX_VARIANTS ||
	    d->pol->vbase >= ING_VARIANT_SLOTS)
		return ING_FLOW_MISS;
	ing_flow_touch(f);
	slot = (cfg->gen & 1) * ING_VARIANT_SLOTS + ((d->pol->vbase + f->variant) & (ING_VARIANT_SLOTS - 1));
	d->pol = bpf_map_lookup_elem(&ing_variants, &slot);
	if (!d->pol || d->pol->mode != ING_MODE_ENCAP || d->pol->nsegs < 1 || d->pol->nsegs > SRCHAIN_MAX_SEGS) {
		ing_outcome(ING_OUT_NO_CHAIN);
		return ING_NOT_OURS;
	}
	return ING_CHAIN;
not_ours:
	if (kernel) {
		ing_outcome(ING_OUT_KERNEL);
		return ING_KERNEL;
	}
	ing_outcome(ING_OUT_NOT_OURS);
	return ING_NOT_OURS;
}

/* ing_report hands the first packet of a new flow of a pool chain to the
 * flow-setup loop (a copy from its IP header on) and consumes it: the
 * loop sends it on once the flow has its entry.
 */
static __always_inline int ing_report(struct __sk_buff *skb, struct ing_dec *d)
{
	struct ing_flow_report *r;
	struct ing_flow_key *key;
	__u32 cap = d->l3len, zero = 0;

	r = bpf_ringbuf_reserve(&ing_reports, sizeof(*r), 0);
	if (!r) {
		count_drop(DROP_FLOW_REPORT_FULL);
		return TC_ACT_SHOT;
	}
	if (cap > ING_REPORT_MAX)
		cap = ING_REPORT_MAX;
	/* 1..ING_REPORT_MAX (a power of two) in a form the verifier keeps
	 * on the register the helper gets; l3len is never 0.
	 */
	cap = ((cap - 1) & (ING_REPORT_MAX - 1)) + 1;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr), r->data, cap)) {
		bpf_ringbuf_discard(r, 0);
		count_drop(DROP_PKT_TRUNCATED);
		return TC_ACT_SHOT;
	}
	r->ktime = bpf_ktime_get_ns();
	key = bpf_map_lookup_elem(&ing_key_scratch, &zero);
	if (!key) {
		bpf_ringbuf_discard(r, 0);
		return TC_ACT_SHOT;
	}
	__builtin_memcpy(&r->key, key, sizeof(r->key));
	r->chain = d->pol->chain;
	r->ifindex = skb->ingress_ifindex;
	r->len = d->l3len;
	r->caplen = cap;
	bpf_ringbuf_submit(r, 0);
	ing_outcome(ING_OUT_FLOW_SETUP);
	return TC_ACT_SHOT;
}

/* ing_outer computes the outer IPv6 header the rewrite will write (the
 * packet is not touched): the FIB is asked about it before rewriting.
 */
static __always_inline void ing_outer(struct ing_dec *d, __u32 hash)
{
	struct ing_policy *pol = d->pol;
	struct ipv6hdr *oh = &d->outer;
	__u32 n = pol->nsegs & (2 * SRCHAIN_MAX_SEGS - 1);

	if (pol->mode == ING_MODE_INSERT) {
		/* Same header, SRH of n + 1 entries inserted, DA = first SID. */
		oh->payload_len = bpf_htons(d->l3len - sizeof(*oh) + 8 + 16 * (n + 1));
		oh->nexthdr = IPPROTO_ROUTING;
		ipv6_addr_copy(&oh->daddr, &pol->segs[0]);
		return;
	}
	*(__be32 *)oh = bpf_htonl(0x60000000) |
			ing_flowinfo(d->first, d->v6, d->cfg->flowlabel, hash);
	oh->payload_len = bpf_htons(d->l3len + 8 + 16 * n + ing_ext_room(pol));
	oh->nexthdr = IPPROTO_ROUTING;
	if (!d->v6)
		oh->hop_limit = pol->hop_limit4;
	ipv6_addr_copy(&oh->saddr, &d->cfg->tunsrc);
	ipv6_addr_copy(&oh->daddr, &pol->segs[0]);
}

/* ing_rewrite applies the chain's policy (H.Encaps or H.Insert) and the
 * headend extension hook.
 */
static __always_inline __u32 ing_rewrite(struct pctx *c, const int kind, struct ing_dec *d)
{
	struct ing_policy *pol = d->pol;
	__u32 r;

	if (pol->mode == ING_MODE_INSERT)
		r = srv6_insert(c, kind, pol->segs, pol->nsegs);
	else
		r = srv6_encaps_fl(c, kind, &d->cfg->tunsrc, pol->segs, pol->nsegs,
				   d->outer.hop_limit, *(__be32 *)&d->outer, ing_ext_room(pol));
	if (r)
		return r;
	return ing_headend_ext(c, kind, pol);
}

/* ICMP errors the ingress sends, per CPU per second (RFC 4443 2.4 (f)). */
#define ING_ICMP_RATE 1000

/* ing_too_big answers a packet whose encapsulation would not fit the
 * first hop's MTU (mtu, from the FIB) before anything is written. The
 * kernel's seg6 encap, reached from the input route lookup, sends its
 * Packet Too Big for the outer packet to the outer source, the router
 * itself (ip6_forward after seg6_input), so the sender never learns;
 * RFC 4443 3.2 and RFC 2473 7 ask the tunnel entry point to tell the
 * original source, with the MTU left for its packets: mtu minus the
 * chain's overhead. IPv6: Packet Too Big from the tunnel source;
 * IPv4 with DF: fragmentation needed (RFC 1191) from the router's
 * address toward the sender. Anything else (IPv4 without DF, which the
 * kernel drops, an MTU below the IPv6 minimum, no source address) takes
 * the kernel's path untouched. The packet itself is dropped, counted
 * (ing-too-big), answered at most ING_ICMP_RATE times a second per CPU.
 * A subprogram: the error builders' locals would not fit the main
 * program's stack frame.
 */
static __attribute__((noinline)) int ing_too_big(struct __sk_buff *skb, struct pctx *c, const struct ing_dec *d,
				       struct bpf_fib_lookup *fp)
{
	__u32 over = bpf_ntohs(d->outer.payload_len) + sizeof(struct ipv6hdr) - d->l3len;
	__u32 mtu = fp->tot_len; /* the MTU after FRAG_NEEDED (mtu_result) */
	struct iphdr *ip4;
	__u32 room, r;
	long rc;

	if (mtu <= over)
		goto kernel;
	room = mtu - over;
	if (d->v6) {
		if (room < 1280)
			goto kernel;
		count_drop(DROP_ING_TOO_BIG);
		if (!fw_icmp_allow(ING_ICMP_RATE))
			return TC_ACT_SHOT;
		r = icmp6_err_tc_from(skb, &c->p, 2 /* Packet Too Big */, 0, room, DROP_ING_TOO_BIG, &d->cfg->tunsrc);
	} else {
		ip4 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip4));
		if (!ip4 || !(ip4->frag_off & bpf_htons(0x4000)) || room < 68 || room > 0xffff)
			goto kernel;
		__builtin_memset(fp, 0, sizeof(*fp));
		fp->family = AF_INET;
		fp->ipv4_dst = ip4->saddr;
		fp->ifindex = skb->ingress_ifindex;
		rc = bpf_fib_lookup(skb, fp, sizeof(*fp),
				    BPF_FIB_LOOKUP_OUTPUT | BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH);
		if (rc != BPF_FIB_LKUP_RET_SUCCESS || !fp->ipv4_src)
			goto kernel;
		count_drop(DROP_ING_TOO_BIG);
		if (!fw_icmp_allow(ING_ICMP_RATE))
			return TC_ACT_SHOT;
		r = icmp4_frag_needed_tc(skb, &c->p, fp->ipv4_src, room, DROP_ING_TOO_BIG);
	}
	if (r) {
		if (r != DROP_ING_TOO_BIG)
			count_drop(r);
		return TC_ACT_SHOT;
	}
	ing_outcome(ING_OUT_TOO_BIG);
	return bpf_redirect(skb->ingress_ifindex, 0);
kernel:
	ing_outcome(ING_OUT_KERNEL);
	return TC_ACT_UNSPEC;
}

SEC("tc")
int srchain_ingress(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct bpf_fib_lookup params;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	struct ing_dec d = {};
	__u32 need, r, hash = 0;
	long rc;

	if (skb->protocol != bpf_htons(ETH_P_IPV6) && skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	if (skb->pkt_type != PACKET_HOST || skb->len <= sizeof(struct ethhdr))
		return TC_ACT_UNSPEC;
	need = skb->len < ING_PULL ? skb->len : ING_PULL;
	if (skb->data_end - skb->data < need && bpf_skb_pull_data(skb, need))
		return TC_ACT_UNSPEC;
	ctx_reload(&c, CTX_TC);
	switch (ing_classify(skb, &c.p, skb->protocol, skb->ingress_ifindex, skb->mark,
			     skb->len - sizeof(struct ethhdr), &d, &params)) {
	case ING_CHAIN:
		break;
	case ING_FLOW_MISS:
		return ing_report(skb, &d);
	default:
		return TC_ACT_UNSPEC;
	}

	/* Bytes past the IP length (Ethernet padding): ip_rcv / ipv6_rcv
	 * trim them before the kernel's encap sees the packet.
	 */
	if (skb->len > sizeof(struct ethhdr) + d.l3len) {
		if (bpf_skb_change_tail(skb, sizeof(struct ethhdr) + d.l3len, 0)) {
			count_drop(DROP_ADJUST_ROOM);
			return TC_ACT_SHOT;
		}
		ctx_reload(&c, CTX_TC);
	}
	if (d.cfg->flowlabel > 0 && d.pol->mode == ING_MODE_ENCAP)
		hash = bpf_get_hash_recalc(skb);
	ing_outer(&d, hash);
	rc = fib_lookup_ip6_dst_flags(skb, &params, &d.outer, &d.outer.daddr, skb->ingress_ifindex, skb->mark,
				      d.cfg->fib_direct ? BPF_FIB_LOOKUP_DIRECT : 0);
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED && !skb->gso_size)
		return ing_too_big(skb, &c, &d, &params);

	r = ing_rewrite(&c, CTX_TC, &d);
	if (r) {
		count_drop(r);
		return TC_ACT_SHOT;
	}
	ing_count(d.pol->chain, d.l3len);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || d.outer.hop_limit <= 1) {
		/* The stack forwards the outer packet as after its own encap. */
		ing_outcome(ING_OUT_STACK);
		return TC_ACT_OK;
	}
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&c.p, c.p.l3off, sizeof(*ip6));
	if (!eth || !ip6) {
		count_drop(DROP_PKT_TRUNCATED);
		return TC_ACT_SHOT;
	}
	ip6_dec_hop_limit(ip6);
	fib_set_macs(eth, &params);
	ing_outcome(ING_OUT_REDIRECT);
	return bpf_redirect(params.ifindex, 0);
}

SEC("xdp")
int srchain_ingress_xdp(struct xdp_md *ctx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct bpf_fib_lookup params;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	struct ing_dec d = {};
	__u32 have, r, ifindex = ctx->ingress_ifindex, slot;
	struct ing_mac *mac;
	long rc;

	ctx_reload(&c, CTX_XDP);
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	if (!eth || (eth->h_proto != bpf_htons(ETH_P_IPV6) && eth->h_proto != bpf_htons(ETH_P_IP)))
		return pipe_next(ctx, PIPE_INGRESS);
	if (eth->h_dest[0] & 1)
		return pipe_ret(PIPE_INGRESS, XDP_PASS); /* multicast / broadcast frame: tc decides */
	slot = ifindex & (ING_MAC_SLOTS - 1);
	mac = bpf_map_lookup_elem(&ing_macs, &slot);
	if (!mac || mac->ifindex != ifindex || *(__u32 *)mac->addr != *(__u32 *)eth->h_dest ||
	    *(__u16 *)&mac->addr[4] != *(__u16 *)&eth->h_dest[4]) {
		ing_outcome(ING_OUT_NOT_OURS); /* another host's frame (or MAC unknown): tc decides */
		return pipe_ret(PIPE_INGRESS, XDP_PASS);
	}
	have = c.p.data_end - c.p.data - c.p.l3off;
	switch (ing_classify(ctx, &c.p, eth->h_proto, ctx->ingress_ifindex, 0, have, &d, &params)) {
	case ING_CHAIN:
		break;
	case ING_FLOW_MISS:
		goto pass; /* tc reports it */
	default:
		return pipe_next(ctx, PIPE_INGRESS);
	}
	/* Trailing bytes (tc trims), hashed flow labels (XDP has no skb
	 * hash), SRHs the headroom cannot hold: tc does those.
	 */
	if (d.l3len != have || (d.cfg->flowlabel > 0 && d.pol->mode == ING_MODE_ENCAP) ||
	    d.pol->nsegs + (d.pol->mode == ING_MODE_INSERT) > ING_XDP_MAX_SEGS)
		goto pass;
	ing_outer(&d, 0);
	if (d.outer.hop_limit <= 1)
		goto pass;
	rc = fib_lookup_ip6_dst_flags(ctx, &params, &d.outer, &d.outer.daddr, ctx->ingress_ifindex, 0,
				      d.cfg->fib_direct ? BPF_FIB_LOOKUP_DIRECT : 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		goto pass;

	/* Redirecting: now, and only now, write the packet. */
	r = ing_rewrite(&c, CTX_XDP, &d);
	if (r == DROP_ADJUST_ROOM && c.p.data_end - c.p.data - c.p.l3off == have)
		goto pass; /* no headroom: nothing was written */
	if (r) {
		count_drop(r);
		return pipe_ret(PIPE_INGRESS, XDP_DROP);
	}
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&c.p, c.p.l3off, sizeof(*ip6));
	if (!eth || !ip6) {
		count_drop(DROP_PKT_TRUNCATED);
		return pipe_ret(PIPE_INGRESS, XDP_DROP);
	}
	ip6_dec_hop_limit(ip6);
	fib_set_macs(eth, &params);
	ing_count(d.pol->chain, d.l3len);
	ing_outcome(ING_OUT_REDIRECT);
	return pipe_ret(PIPE_INGRESS, bpf_redirect(params.ifindex, 0));
pass:
	ing_outcome(ING_OUT_XDP_PASS);
	return pipe_ret(PIPE_INGRESS, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
