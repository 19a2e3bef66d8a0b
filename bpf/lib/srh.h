/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Segment Routing Header (RFC 8754) location, validation and access.
 *
 * Nothing in the packet is trusted: every field read is bounds-checked
 * against data_end, every length is validated before it is used, and every
 * loop and segment index is bounded by a compile-time constant so the
 * verifier can prove termination and in-bounds access.
 *
 * Typical use (see bpf/end.c):
 *
 *     struct srh_info si;
 *     __u32 reason = srh_parse(&p, &si);        // locate + validate
 *     if (reason) return drop(reason);
 *     struct in6_addr *seg = srh_segment(&p, &si, si.sl - 1);
 *
 * All functions return 0 (DROP_NONE) on success or an enum
 * srchain_drop_reason naming what is wrong.
 */
#ifndef SRCHAIN_SRH_H
#define SRCHAIN_SRH_H

#include "common.h"
#include "ipv6.h"

/* Wire layout of the fixed SRH part (RFC 8754 2), as in linux/seg6.h
 * struct ipv6_sr_hdr but without the bitfields' endian games.
 */
struct srh_fixed {
	__u8 nexthdr;
	__u8 hdrlen;     /* length in 8-octet units, not counting the first 8 */
	__u8 type;       /* routing type, 4 for SRH */
	__u8 segments_left;
	__u8 last_entry; /* index of the last element of the segment list */
	__u8 flags;
	__u16 tag;
};

/* srh_info describes a located and validated SRH. Offsets are from
 * pkt.data, so they stay valid when data/data_end are re-derived.
 */
struct srh_info {
	__u32 ip6off;     /* IPv6 header */
	__u32 srhoff;     /* SRH fixed part */
	__u32 srhlen;     /* whole SRH in bytes: (hdrlen + 1) * 8 */
	__u32 tlvoff;     /* first TLV byte (end of the segment list) */
	__u8 sl;          /* segments left */
	__u8 last_entry;
	__u8 flags;
	__u8 nexthdr;     /* header after the SRH */
};

/* srh_locate finds the routing header after the IPv6 header at p->l3off,
 * skipping up to SRCHAIN_MAX_EXTHDRS Hop-by-Hop / Destination Options
 * headers (RFC 8200 4.1 order; lib/ipv6.h), and fills si->ip6off/srhoff.
 * Returns DROP_PKT_TRUNCATED when a header is cut short, DROP_NO_SRH when
 * the chain reaches anything but a routing header.
 */
static __always_inline __u32 srh_locate(const struct pkt *p, struct srh_info *si)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	struct ipv6_walk w = {};
	__u32 r;

	if (!ip6)
		return DROP_PKT_TRUNCATED;
	si->ip6off = p->l3off;
	w.nh = ip6->nexthdr;
	w.off = p->l3off + sizeof(*ip6);
	r = ipv6_walk(p, &w, IPV6_WALK_OPTS, SRCHAIN_MAX_EXTHDRS, 0, NULL);
	if (r)
		return r;
	if (w.nh != IPPROTO_ROUTING)
		return DROP_NO_SRH;
	si->srhoff = w.off;
	return DROP_NONE;
}

/* srh_validate checks the routing header at si->srhoff and fills the rest
 * of si. Checks, in order (the first failure is the reason returned):
 *   fixed part present                      else DROP_SRH_TRUNCATED
 *   routing type 4 (RFC 8754 2)             else DROP_SRH_BAD_TYPE
 *   whole SRH inside the packet             else DROP_SRH_TRUNCATED
 *   last entry < SRCHAIN_MAX_SEGS           else DROP_SRH_TOO_MANY_SEGS
 *   (hdrlen*8) >= (last entry + 1) * 16     else DROP_SRH_BAD_LEN
 *   segments left <= last entry + 1         else DROP_SRH_SL_OVER_LAST
 * The last check is RFC 8986 4.1 S09 ("Segments Left > Last Entry+1"),
 * which the kernel's seg6_validate_srh also applies: SL = last entry + 1
 * is legal (the active SID is only in the DA, as with a reduced SRH) and
 * End then moves to segment[last entry]. Programs that need SL <= last
 * entry (they read segment[SL]) must check it themselves.
 * TLVs are checked separately by srh_validate_tlvs.
 */
static __always_inline __u32 srh_validate(const struct pkt *p, struct srh_info *si)
{
	struct srh_fixed *srh = pkt_ptr(p, si->srhoff, sizeof(*srh));
	__u32 len, seglen;

	if (!srh)
		return DROP_SRH_TRUNCATED;
	if (srh->type != SRCHAIN_SRH_TYPE)
		return DROP_SRH_BAD_TYPE;
	len = ((__u32)srh->hdrlen + 1) * 8;
	if (p->data + si->srhoff + len > p->data_end)
		return DROP_SRH_TRUNCATED;
	if (srh->last_entry >= SRCHAIN_MAX_SEGS)
		return DROP_SRH_TOO_MANY_SEGS;
	seglen = ((__u32)srh->last_entry + 1) * 16;
	if ((__u32)srh->hdrlen * 8 < seglen)
		return DROP_SRH_BAD_LEN;
	if (srh->segments_left > (__u32)srh->last_entry + 1)
		return DROP_SRH_SL_OVER_LAST;

	si->srhlen = len;
	si->tlvoff = si->srhoff + sizeof(*srh) + seglen;
	si->sl = srh->segments_left;
	si->last_entry = srh->last_entry;
	si->flags = srh->flags;
	si->nexthdr = srh->nexthdr;
	return DROP_NONE;
}

/* SRH TLV types (RFC 8754 2.1). */
#define SRH_TLV_PAD1 0
#define SRH_TLV_PADN 4

/* srh_validate_tlvs walks the TLVs between the segment list and the end
 * of the SRH: they must tile that area exactly (RFC 8754 2.1). Pad1 is one
 * byte (RFC 8754 2.1.1.1); every other TLV is type, length, value. At most
 * SRCHAIN_MAX_TLVS TLVs. Returns DROP_TLV_BAD when they do not fit.
 *
 * This is NOT what the kernel does: seg6_validate_srh also requires the
 * TLVs to tile the area, but reads every TLV, Pad1 included, as type +
 * length (no 1-byte Pad1). So the two disagree on some byte patterns
 * (docs/datapath.md, "Known differences"), e.g. after the segments:
 *   00 | 05 04 00000000 | 00   Pad1, a type-5 TLV of length 4, Pad1:
 *                              accepted here; the kernel reads "00 05" as
 *                              a 7-byte TLV, 1 byte is left -> dropped;
 *   00 06 <6 bytes>            the kernel reads one 8-byte TLV of type 0
 *                              and accepts; here 00 is Pad1 and the rest
 *                              must tile on its own (with ff ff ff ff ff
 *                              ff, "06 ff" runs past the SRH) ->
 *                              DROP_TLV_BAD.
 */
static __always_inline __u32 srh_validate_tlvs(const struct pkt *p, const struct srh_info *si)
{
	__u32 end = si->srhoff + si->srhlen;
	__u32 off = si->tlvoff;
	int i;

	for (i = 0; i < SRCHAIN_MAX_TLVS; i++) {
		__u8 *tlv;

		if (off >= end)
			return DROP_NONE;
		/* off < end <= 14 + 40 + 4 * 2048 + 2048 < 0x4000, so the mask
		 * changes nothing at run time; for the verifier it turns every
		 * path's offset into the same range [0, 0x3fff], so the states
		 * of the Pad1 and TLV branches become equivalent and are pruned
		 * (without it verification cost doubles with each iteration).
		 */
		off &= 0x3fff;
		tlv = pkt_ptr(p, off, 1);
		if (!tlv)
			return DROP_TLV_BAD;
		if (tlv[0] == SRH_TLV_PAD1) {
			off += 1;
			continue;
		}
		tlv = pkt_ptr(p, off, 2);
		if (!tlv)
			return DROP_TLV_BAD;
		off += 2 + (__u32)tlv[1];
		if (off > end)
			return DROP_TLV_BAD;
	}
	return off >= end ? DROP_NONE : DROP_TLV_BAD;
}

/* srh_parse = srh_locate + srh_validate + srh_validate_tlvs. */
static __always_inline __u32 srh_parse(const struct pkt *p, struct srh_info *si)
{
	__u32 r = srh_locate(p, si);

	if (r)
		return r;
	r = srh_validate(p, si);
	if (r)
		return r;
	return srh_validate_tlvs(p, si);
}

/* SRH flag H: an HMAC TLV is present (RFC 5095-era SRH drafts; the
 * kernel still honours it, SR6_FLAG1_HMAC in linux/seg6.h).
 */
#define SRH_FLAG_HMAC 0x08
#define SRH_TLV_HMAC 5
#define SRH_HMAC_TLV_LEN 40 /* type, len = 38, reserved, key id, 32-byte HMAC */

/* srh_hmac_present reports whether the kernel would treat the SRH as
 * carrying an HMAC TLV: flag H set, room for a TLV after the segments,
 * and the last 40 bytes of the SRH are a type-5 TLV of length 38
 * (seg6_get_tlv_hmac). With net.ipv6.conf.*.seg6_require_hmac = 0 (the
 * default) the kernel then verifies the HMAC and drops the packet when it
 * has no key for the key id; srchain holds no HMAC keys.
 */
static __always_inline int srh_hmac_present(const struct pkt *p, const struct srh_info *si)
{
	__u8 *tlv;

	if (!(si->flags & SRH_FLAG_HMAC))
		return 0;
	if (si->srhlen < sizeof(struct srh_fixed) + ((__u32)si->last_entry + 1) * 16 + SRH_HMAC_TLV_LEN)
		return 0;
	tlv = pkt_ptr(p, (si->srhoff + si->srhlen - SRH_HMAC_TLV_LEN) & 0x3fff, 2);
	if (!tlv)
		return 0;
	return tlv[0] == SRH_TLV_HMAC && tlv[1] == SRH_HMAC_TLV_LEN - 2;
}

/* srh_fixed_hdr returns the fixed SRH part (already validated). */
static __always_inline struct srh_fixed *srh_fixed_hdr(const struct pkt *p, const struct srh_info *si)
{
	/* The mask changes nothing (offsets < 0x4000, see
	 * srh_validate_tlvs) but keeps the offset bounded for the verifier
	 * when si lives in a stack slot it does not track.
	 */
	return pkt_ptr(p, si->srhoff & 0x3fff, sizeof(struct srh_fixed));
}

/* srh_segment returns a pointer to segment[idx] in the packet, or NULL
 * when idx > last entry or the segment is not inside the packet. The index
 * is masked to SRCHAIN_MAX_SEGS - 1 (a power of two) so the verifier sees
 * a bounded offset whatever it knows about idx.
 */
static __always_inline struct in6_addr *srh_segment(const struct pkt *p, const struct srh_info *si, __u32 idx)
{
	__u32 off;

	if (idx > si->last_entry)
		return NULL;
	idx &= SRCHAIN_MAX_SEGS - 1;
	off = (si->srhoff & 0x3fff) + sizeof(struct srh_fixed) + idx * sizeof(struct in6_addr);
	return pkt_ptr(p, off, sizeof(struct in6_addr));
}

_Static_assert((SRCHAIN_MAX_SEGS & (SRCHAIN_MAX_SEGS - 1)) == 0,
	       "SRCHAIN_MAX_SEGS must be a power of two (srh_segment masks with it)");

#endif /* SRCHAIN_SRH_H */
