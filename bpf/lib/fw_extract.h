/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SERA firewall: field extraction. Fills struct fw_view (the packet as
 * the rules see it; Go model: internal/firewall Extract) and struct
 * fw_pkt (what the SR actions need) from an IPv4 or IPv6 packet.
 * Extension headers are skipped by the common walker (lib/ipv6.h).
 */
#ifndef SRCHAIN_FW_EXTRACT_H
#define SRCHAIN_FW_EXTRACT_H

#include "common.h"
#include "ipv6.h"
#include "srh.h"
#include "fw_maps.h"

/* What the actions need to know about the packet. */
struct fw_pkt {
	struct srh_info si;
	int sr;    /* a valid SRH (routing type 4) was found */
	int encap; /* the SRH is followed by an IPv4/IPv6 packet */
	int icmp_err; /* the packet is an ICMPv6 error message */
};

#define FW_MAX_EXT 6     /* extension headers walked before the transport */
#define FW_MAX_OFF 2048  /* headers must start within this many bytes */

static __always_inline void fw_addr_v4(struct in6_addr *dst, __be32 a)
{
	/* IPv4-mapped IPv6 (::ffff:a.b.c.d): v4 and v6 rules share one space. */
	dst->in6_u.u6_addr32[0] = 0;
	dst->in6_u.u6_addr32[1] = 0;
	dst->in6_u.u6_addr32[2] = bpf_htonl(0xffff);
	dst->in6_u.u6_addr32[3] = a;
}

static __always_inline void fw_set_addr(struct fw_view *v, int f, const struct in6_addr *a)
{
	ipv6_addr_copy(&v->addr[f], a);
	v->present[f] = 1;
}

/* fw_ports reads the transport ports at off when proto is TCP or UDP. */
static __always_inline void fw_ports(const struct pkt *p, struct fw_view *v, __u32 proto, __u32 off)
{
	__be16 *ports;

	v->val[FW_F_PROTO - FW_NADDR] = proto;
	v->val[FW_F_SPORT - FW_NADDR] = 65536;
	v->val[FW_F_DPORT - FW_NADDR] = 65536;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return;
	if (off > FW_MAX_OFF)
		return;
	ports = pkt_ptr(p, off, 4);
	if (!ports)
		return;
	v->val[FW_F_SPORT - FW_NADDR] = bpf_ntohs(ports[0]);
	v->val[FW_F_DPORT - FW_NADDR] = bpf_ntohs(ports[1]);
}

/* fw_ip4 fills src/dst/proto/ports from an IPv4 header at off into the
 * given address fields. Non-first fragments carry no ports.
 */
static __always_inline __u32 fw_ip4(const struct pkt *p, struct fw_view *v, __u32 off,
				    int fsrc, int fdst, int transport)
{
	struct iphdr *ip4;

	if (off > FW_MAX_OFF)
		return DROP_PKT_TRUNCATED;
	ip4 = pkt_ptr(p, off, sizeof(*ip4));
	if (!ip4)
		return DROP_PKT_TRUNCATED;
	fw_addr_v4(&v->addr[fsrc], ip4->saddr);
	v->present[fsrc] = 1;
	/* IPv4 addresses are kept IPv4-mapped; the family field keeps IPv4
	 * and IPv6 rules apart (an IPv6 prefix never matches IPv4).
	 */
	v->val[(fsrc == FW_F_SRC ? FW_F_FAM : FW_F_IFAM) - FW_NADDR] = 4;
	fw_addr_v4(&v->addr[fdst], ip4->daddr);
	v->present[fdst] = 1;
	if (transport) {
		__u32 l4off = off + ((__u32)ip4->ihl & 0xf) * 4;

		/* Non-first fragments have no transport header: no ports. */
		if (ip4->frag_off & bpf_htons(0x1fff))
			l4off = FW_MAX_OFF + 1;
		fw_ports(p, v, ip4->protocol, l4off);
	}
	return DROP_NONE;
}


/* fw_extract6 fills v (and fp) for the IPv6 packet at p->l3off.
 * Returns a drop reason for malformed packets (a routing header of type 4
 * that fails srh_validate / srh_validate_tlvs, truncated headers).
 */
static __always_inline __u32 fw_extract6(const struct pkt *p, __u32 mode, struct fw_view *v,
					 struct fw_pkt *fp)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	struct srh_fixed *srh;
	struct in6_addr *seg;
	struct ipv6_walk w = {};
	__u32 off, rtoff, reason;
	int nonfirst;
	__u8 nh;

	if (!ip6)
		return DROP_PKT_TRUNCATED;
	w.nh = ip6->nexthdr;
	w.off = p->l3off + sizeof(*ip6);
	reason = ipv6_walk(p, &w, IPV6_WALK_ALL, FW_MAX_EXT, FW_MAX_OFF, &v->tmp);
	if (reason)
		return reason;
	nh = w.nh;
	off = w.off;
	rtoff = w.rtoff;
	nonfirst = w.nonfirst;

	/* An ICMPv6 error (type < 128) is never answered with one (RFC
	 * 4443 2.4 (e)).
	 */
	if (nh == IPPROTO_ICMPV6 && !nonfirst && off <= FW_MAX_OFF) {
		__u8 *it = pkt_ptr(p, off, 1);

		fp->icmp_err = !it || it[0] < 128;
	}
	fw_set_addr(v, FW_F_SRC, &ip6->saddr);
	fw_set_addr(v, FW_F_DST, &ip6->daddr);
	v->val[FW_F_FAM - FW_NADDR] = 6;
	v->val[FW_F_SRH - FW_NADDR] = 0;

	if (rtoff && rtoff <= FW_MAX_OFF) {
		fp->si.ip6off = p->l3off;
		fp->si.srhoff = rtoff;
		srh = pkt_ptr(p, rtoff, sizeof(*srh));
		if (!srh)
			return DROP_SRH_TRUNCATED;
		/* Other routing types (2, 3, deprecated 0) are not SR traffic. */
		if (srh->type == SRCHAIN_SRH_TYPE) {
			reason = srh_validate(p, &fp->si);
			if (!reason)
				reason = srh_validate_tlvs(p, &fp->si);
			if (reason)
				return reason;
			fp->sr = 1;
			fw_set_addr(v, FW_F_ASID, &ip6->daddr);
			v->val[FW_F_SRH - FW_NADDR] = 1;
			v->val[FW_F_NEXTHDR - FW_NADDR] = srh->nexthdr;
			v->val[FW_F_HDRLEN - FW_NADDR] = srh->hdrlen;
			v->val[FW_F_SEGS - FW_NADDR] = srh->segments_left;
			v->val[FW_F_LAST - FW_NADDR] = srh->last_entry;
			v->val[FW_F_TAG - FW_NADDR] = bpf_ntohs(srh->tag);
			seg = srh_segment(p, &fp->si, 0);
			if (seg)
				fw_set_addr(v, FW_F_LSID, seg);
			if (fp->si.sl < fp->si.last_entry) {
				seg = srh_segment(p, &fp->si, (__u32)fp->si.sl + 1);
				if (seg)
					fw_set_addr(v, FW_F_PSID, seg);
			}
			if (fp->si.sl > 0) {
				seg = srh_segment(p, &fp->si, (__u32)fp->si.sl - 1);
				if (seg)
					fw_set_addr(v, FW_F_NSID, seg);
			}
		}
	}

	fp->encap = fp->sr && !nonfirst && (nh == IPPROTO_IPV6 || nh == IPPROTO_IPIP);
	if (fp->encap) {
		int basic = mode == FW_MODE_BASIC;

		if (nh == IPPROTO_IPIP) {
			reason = fw_ip4(p, v, off, FW_F_INNER_SRC, FW_F_INNER_DST, basic);
			if (reason)
				return reason;
		} else {
			struct ipv6hdr *in6;
			struct ipv6_walk iw = {};

			if (off > FW_MAX_OFF)
				return DROP_PKT_TRUNCATED;
			in6 = pkt_ptr(p, off, sizeof(*in6));
			if (!in6)
				return DROP_PKT_TRUNCATED;
			fw_set_addr(v, FW_F_INNER_SRC, &in6->saddr);
			fw_set_addr(v, FW_F_INNER_DST, &in6->daddr);
			v->val[FW_F_IFAM - FW_NADDR] = 6;
			if (basic) {
				iw.nh = in6->nexthdr;
				iw.off = off + sizeof(*in6);
				reason = ipv6_walk(p, &iw, IPV6_WALK_ALL, FW_MAX_EXT, FW_MAX_OFF, &v->tmp);
				if (reason)
					return reason;
				fw_ports(p, v, iw.nh, iw.nonfirst ? FW_MAX_OFF + 1 : iw.off);
			}
		}
		if (basic) {
			/* Legacy rules see the original packet (seed 000 IV.A). */
			ipv6_addr_copy(&v->addr[FW_F_SRC], &v->addr[FW_F_INNER_SRC]);
			ipv6_addr_copy(&v->addr[FW_F_DST], &v->addr[FW_F_INNER_DST]);
			v->val[FW_F_FAM - FW_NADDR] = v->val[FW_F_IFAM - FW_NADDR];
			return DROP_NONE;
		}
	} else if (fp->sr) {
		/* Insert mode: the original packet goes from the outer source
		 * to segment[0] (seed 000 IV.B, V.A): those are its inner
		 * addresses in both modes, and -d in basic mode.
		 */
		fw_set_addr(v, FW_F_INNER_SRC, &ip6->saddr);
		v->val[FW_F_IFAM - FW_NADDR] = 6;
		if (v->present[FW_F_LSID]) {
			ipv6_addr_copy(&v->addr[FW_F_INNER_DST], &v->addr[FW_F_LSID]);
			v->present[FW_F_INNER_DST] = 1;
			if (mode == FW_MODE_BASIC)
				ipv6_addr_copy(&v->addr[FW_F_DST], &v->addr[FW_F_LSID]);
		}
	}
	fw_ports(p, v, nh, nonfirst ? FW_MAX_OFF + 1 : off);
	return DROP_NONE;
}

/* fw_srh_absent: SL = last entry + 1 is a valid SRH (RFC 8986 4.1 S09,
 * srh_validate) whose active SID is only in the destination, but the
 * kernel's ip6t_srh does not match it at all (segments_left >
 * first_segment -> false): -m srh is false and every SRH field absent.
 * The SR actions still see the SRH (fp).
 */
static __always_inline void fw_srh_absent(struct fw_view *v)
{
	v->present[FW_F_PSID] = 0;
	v->present[FW_F_NSID] = 0;
	v->present[FW_F_LSID] = 0;
	v->present[FW_F_ASID] = 0;
	v->present[FW_F_INNER_SRC] = 0;
	v->present[FW_F_INNER_DST] = 0;
	v->val[FW_F_IFAM - FW_NADDR] = 256;
	v->val[FW_F_SRH - FW_NADDR] = 0;
	v->val[FW_F_NEXTHDR - FW_NADDR] = 256;
	v->val[FW_F_HDRLEN - FW_NADDR] = 256;
	v->val[FW_F_SEGS - FW_NADDR] = 256;
	v->val[FW_F_LAST - FW_NADDR] = 256;
	v->val[FW_F_TAG - FW_NADDR] = 65536;
}

/* fw_view_reset marks every field absent (before an extract). */
static __always_inline void fw_view_reset(struct fw_view *v)
{
	int f;

#pragma unroll
	for (f = 0; f < FW_NADDR; f++)
		v->present[f] = 0;
#pragma unroll
	for (f = 0; f < FW_NINT; f++)
		v->val[f] = 256;
	v->val[FW_F_SPORT - FW_NADDR] = 65536;
	v->val[FW_F_DPORT - FW_NADDR] = 65536;
	v->val[FW_F_TAG - FW_NADDR] = 65536;
	v->val[FW_F_SRH - FW_NADDR] = 0;
}

#endif /* SRCHAIN_FW_EXTRACT_H */
