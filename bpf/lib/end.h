/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SRv6 End and End.X (RFC 8986 4.1, 4.2) on a parsed packet.
 *
 * Attach-point neutral: works on a struct pkt, so a tc program
 * (bpf/end.c) and an XDP program can share it. The entry program does
 * the SID lookup, srh_parse, end_apply, then forwards (lib/fib.h).
 */
#ifndef SRCHAIN_END_H
#define SRCHAIN_END_H

#include "common.h"
#include "counters.h"
#include "srh.h"

/* Behaviors a SID map entry can name. Values are ABI with
 * internal/datapath (Behavior constants).
 */
#define SRCHAIN_BEH_END 1
#define SRCHAIN_BEH_END_X 2

/* Value of the SID map (key: the 16-byte SID). Layout mirrored by
 * internal/datapath.sidEntry.
 */
struct sid_entry {
	__u32 behavior; /* SRCHAIN_BEH_* */
	__u32 oif;      /* End.X: outgoing ifindex */
	__u32 counter;  /* slot in sid_counters */
	__u32 flags;    /* reserved, 0 */
	struct in6_addr nh6; /* End.X: next hop (zero: the new DA is on-link) */
};

/* SIDs served by the End programs. Key: the SID (full 128 bits). Defined
 * here so the tc and XDP objects declare identical maps and the loader can
 * share one instance between them (MapReplacements).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SRCHAIN_MAX_SID_COUNTERS);
	__type(key, struct in6_addr);
	__type(value, struct sid_entry);
} sids SEC(".maps");

/* Load-time options of the End programs (set from Go before load, see
 * datapath.EndOptions):
 *   cfg_stack_forward  non-zero: never forward from the program; after the
 *                      End rewrite hand every packet to the stack
 *                      (TC_ACT_OK; XDP passes everything untouched to tc),
 *                      so netfilter FORWARD/POSTROUTING rules, policy
 *                      routing and the kernel's MTU handling apply on an
 *                      End node. End.X then follows the routing table
 *                      for the new DA (docs/datapath.md).
 */
SRCHAIN_CONFIG(__u32, cfg_stack_forward, 0);

/* end_next_da performs the checks of RFC 8986 4.1 that precede the rewrite
 * on a packet whose SRH si srh_parse validated (S09, SL > last entry + 1,
 * is already excluded; SL = last entry + 1 is legal and moves to
 * segment[last entry]) and copies the next SID, segment[SL - 1], to *nda
 * without touching the packet:
 *   SL == 0 -> DROP_SRH_SL_ZERO. The kernel would stop processing the
 *              SRH and process the next header (S02-S03); a SID that
 *              srchain runs as End is never the final SID of a list, so
 *              this is a misdirected or forged packet.
 * The hop limit is not checked here (S05-S07 of 4.1 are not applied
 * before the rewrite): like the kernel's seg6local End, which rewrites and
 * calls dst_input, srchain rewrites whatever the hop limit and leaves
 * hop-limit exhaustion to whoever forwards: the program takes its fast
 * path only when the hop limit is > 1 and otherwise hands the rewritten
 * packet to the stack, whose ip6_forward sends ICMPv6 Time Exceeded (or
 * delivers it when the next SID is local, e.g. a kernel End.DT6).
 */
static __always_inline __u32 end_next_da(const struct pkt *p, const struct srh_info *si,
					 struct in6_addr *nda)
{
	struct in6_addr *seg;
	__u8 sl = si->sl;

	if (sl == 0)
		return DROP_SRH_SL_ZERO;
	seg = srh_segment(p, si, sl - 1);
	if (!seg)
		return DROP_SRH_TRUNCATED;
	ipv6_addr_copy(nda, seg);
	return DROP_NONE;
}

/* end_apply performs the End rewrite of RFC 8986 4.1 on the packet:
 * end_next_da's checks, then SL-- and DA = segment[SL] (S12-S14; S12 also
 * decrements the hop limit, which is NOT done here: whoever forwards the
 * packet does it, the program before a redirect or the kernel's
 * ip6_forward when the packet is handed to the stack, so it happens
 * exactly once).
 */
static __always_inline __u32 end_apply(const struct pkt *p, const struct srh_info *si)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off, sizeof(*ip6));
	struct srh_fixed *srh = srh_fixed_hdr(p, si);
	struct in6_addr nda;
	__u32 reason;

	if (!ip6 || !srh)
		return DROP_PKT_TRUNCATED;
	reason = end_next_da(p, si, &nda);
	if (reason)
		return reason;
	srh->segments_left = si->sl - 1;
	ipv6_addr_copy(&ip6->daddr, &nda);
	return DROP_NONE;
}

#endif /* SRCHAIN_END_H */
