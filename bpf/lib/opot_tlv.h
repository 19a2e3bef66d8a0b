/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The OPoT SRH TLV (seed 003 Fig. 6; docs/opot.md "Wire format"): its
 * constants and the walk that finds it in an SRH. No maps: the SR proxy
 * (lib/proxy.h), which carries a packet's TLV across its legacy NF,
 * includes this without the OPoT parameter maps of lib/opot.h.
 */
#ifndef SRCHAIN_OPOT_TLV_H
#define SRCHAIN_OPOT_TLV_H

#include "common.h"
#include "drop.h"
#include "srh.h"
#include "ctx.h"

/* Wire format (docs/opot.md "Wire format"; internal/opot tlv.go). */
#define OPOT_TLV_TYPE 252
#define OPOT_TLV_LEN 24   /* whole TLV */
#define OPOT_OFF_SLOT 2
#define OPOT_OFF_RND 8
#define OPOT_OFF_CML 16
#define OPOT_SLOTS 2
/* A kernel encap route's reservation (opot.Reservation): the OPoT TLV
 * with this slot byte, unfilled, then an 8-byte PadN; the headend stage
 * fills it in place.
 */
#define OPOT_SLOT_UNFILLED 255
#define OPOT_RESERVED_LEN 32
#define OPOT_PADN_VALUE (OPOT_RESERVED_LEN - OPOT_TLV_LEN - 2)

/* opot_head_ok reports whether the 8 bytes at tlv open a well-formed
 * OPoT TLV: type 252, length 22, slot 0 or 1, the 5 reserved bytes zero.
 * One 8-byte load (unaligned packet access, as opot_load64) instead of
 * eight byte loads; byte 0 is the low byte of the word on this target.
 */
#define OPOT_HEAD ((__u64)OPOT_TLV_TYPE | (__u64)(OPOT_TLV_LEN - 2) << 8)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "opot_head_ok reads the TLV head as a little-endian word");
_Static_assert(OPOT_SLOTS == 2 && OPOT_OFF_SLOT == 2, "opot_head_ok: the slot is bit 16, the only free bit");

static __always_inline int opot_head_ok(const __u8 *tlv)
{
	return (*(const __u64 *)tlv & ~(1ULL << 16)) == OPOT_HEAD;
}

/* opot_walk advances *cur over the TLVs of the area ending at end until
 * it reaches an OPoT TLV (returns 1, *cur at it) or the end (returns 0);
 * -1 when the TLVs do not tile the area. The walk is srh_validate_tlvs'
 * (Pad1 is one byte), with no state but the offset, so the verifier
 * prunes the paths of each iteration into one.
 */
static __always_inline int opot_walk(const struct pkt *p, __u32 *cur, __u32 end)
{
	__u32 off = *cur;
	__u8 *tlv, type;
	int i;

	for (i = 0; i < SRCHAIN_MAX_TLVS; i++) {
		if (off >= end)
			return off == end ? 0 : -1;
		off &= 0x3fff; /* no-op at run time; see srh_validate_tlvs */
		tlv = pkt_ptr(p, off, 1);
		if (!tlv)
			return -1;
		type = tlv[0];
		if (type == SRH_TLV_PAD1) {
			off += 1;
			continue;
		}
		if ((void *)(tlv + 2) > p->data_end)
			return -1;
		if (type == OPOT_TLV_TYPE) {
			*cur = off;
			return 1;
		}
		off += 2 + (__u32)tlv[1];
	}
	return off == end ? 0 : -1;
}

/* opot_scan is opot_find's body on a bare packet view: the offset of
 * the one OPoT TLV in [tlvoff, end), or -1. It is shared by the two
 * global functions below, one per attach point.
 */
static __always_inline int opot_scan(const struct pkt *p, __u32 tlvoff, __u32 end)
{
	__u32 at = tlvoff, rest;
	__u8 *tlv;

	if (tlvoff > 0x3fff || end > 0x3fff)
		return -1;
	if (opot_walk(p, &at, end) != 1)
		return -1;
	at &= 0x3fff;
	tlv = pkt_ptr(p, at, OPOT_TLV_LEN);
	if (!tlv)
		return -1;
	if (!opot_head_ok(tlv))
		return -1;
	/* The rest of the area must tile and hold no second OPoT TLV. */
	rest = at + OPOT_TLV_LEN;
	if (opot_walk(p, &rest, end) != 0)
		return -1;
	return (int)at;
}

/* opot_find_tc and opot_find_xdp are global BPF functions: the verifier
 * checks each once, with unknown arguments, instead of once per state
 * of every caller that reaches it (the TLV walk leaves many offset
 * ranges; inlined, the walk cost 305,979 instructions of verification
 * per program, docs/opot.md "Verifier cost"). A global function may
 * take the context but no packet pointer, so it re-derives the packet
 * view; the offsets it returns are relative to data, as the caller's.
 */
__attribute__((noinline)) int opot_find_tc(struct __sk_buff *skb, __u32 tlvoff, __u32 end)
{
	struct pkt p;

	if (!skb)
		return -1;
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	p.l3off = 0;
	return opot_scan(&p, tlvoff, end);
}

__attribute__((noinline)) int opot_find_xdp(struct xdp_md *x, __u32 tlvoff, __u32 end)
{
	struct pkt p;

	if (!x)
		return -1;
	p.data = (void *)(long)x->data;
	p.data_end = (void *)(long)x->data_end;
	p.l3off = 0;
	return opot_scan(&p, tlvoff, end);
}

/* opot_padn_at reports whether the route's PadN (OPOT_RESERVED_LEN)
 * sits at off.
 */
static __always_inline int opot_padn_at(const struct pkt *p, __u32 off)
{
	__u8 *pad = pkt_ptr(p, off & 0x3fff, 2);

	return pad && pad[0] == SRH_TLV_PADN && pad[1] == OPOT_PADN_VALUE;
}

/* opot_reserved returns the offset of the TLV a kernel encap route
 * reserved for the headend (the TLV area is exactly the unfilled OPoT
 * TLV and the PadN), or 0.
 */
static __always_inline __u32 opot_reserved(const struct pkt *p, const struct srh_info *si)
{
	__u32 at = si->tlvoff & 0x3fff;
	__u8 *tlv;

	if (si->srhoff + si->srhlen != si->tlvoff + OPOT_RESERVED_LEN)
		return 0;
	tlv = pkt_ptr(p, at, OPOT_TLV_LEN);
	if (!tlv || tlv[0] != OPOT_TLV_TYPE || tlv[1] != OPOT_TLV_LEN - 2 || tlv[OPOT_OFF_SLOT] != OPOT_SLOT_UNFILLED)
		return 0;
	return opot_padn_at(p, at + OPOT_TLV_LEN) ? at : 0;
}

/* opot_find returns in *off the offset (from data) of the one OPoT TLV
 * of a validated SRH, checked: length 22, slot 0 or 1, reserved bytes
 * zero. DROP_OPOT_NO_TLV when there is none, two (an attacker would choose
 * which one a node updates), a malformed one, or when the TLVs do not
 * tile the area (callers need not have run srh_validate_tlvs). kind is
 * CTX_TC or CTX_XDP, a constant at every call site.
 */
static __always_inline __u32 opot_find(const struct pctx *c, const int kind,
				       const struct srh_info *si, __u32 *off)
{
	__u32 at0 = si->tlvoff & 0x3fff, end = si->srhoff + si->srhlen;
	__u8 *tlv;
	int at;

	/* What srchain's headends write: the TLV area is the OPoT TLV and
	 * nothing else (eBPF ingress), or it and the route's PadN (behind
	 * the kernel's encap). Checked here as opot_scan checks it, without
	 * the call and the walk; anything else takes the walk.
	 */
	if (end == si->tlvoff + OPOT_TLV_LEN || end == si->tlvoff + OPOT_RESERVED_LEN) {
		tlv = pkt_ptr(&c->p, at0, OPOT_TLV_LEN);
		if (tlv && opot_head_ok(tlv) &&
		    (end == si->tlvoff + OPOT_TLV_LEN || opot_padn_at(&c->p, at0 + OPOT_TLV_LEN))) {
			*off = at0;
			return DROP_NONE;
		}
	}
	if (kind == CTX_XDP)
		at = opot_find_xdp(c->ctx, si->tlvoff, end);
	else
		at = opot_find_tc(c->ctx, si->tlvoff, end);
	if (at < 0)
		return DROP_OPOT_NO_TLV;
	*off = (__u32)at;
	return DROP_NONE;
}

/* opot_tlv returns the TLV found by opot_find (re-checked for the
 * verifier after any change of packet pointers).
 */
static __always_inline __u8 *opot_tlv(const struct pkt *p, __u32 off)
{
	return pkt_ptr(p, off & 0x3fff, OPOT_TLV_LEN);
}

#endif /* SRCHAIN_OPOT_TLV_H */
