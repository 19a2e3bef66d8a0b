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

/* end_apply performs RFC 8986 4.1 S01-S15 on a packet whose SRH si
 * srh_parse validated (so S05-S08, SL > last entry + 1, is already
 * excluded; SL = last entry + 1 is legal and moves to segment[last entry]):
 *   SL == 0        -> DROP_SRH_SL_ZERO. The kernel would process the
 *                     upper-layer header (S01-S03); a SID that srchain
 *                     runs as End is never the final SID of a list, so
 *                     this is a misdirected or forged packet.
 *   hop limit <= 1 -> DROP_HOP_LIMIT (S03 would also send ICMPv6 Time
 *                     Exceeded; the kernel path does, we only count).
 *   otherwise      -> SL--, DA = segment[SL] (S12-S14).
 * The hop limit is NOT decremented here: whoever forwards the packet does
 * it (the program before a redirect, the kernel's ip6_forward when the
 * packet is handed to the stack), so it happens exactly once.
 */
static __always_inline __u32 end_apply(const struct pkt *p, const struct srh_info *si)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, si->ip6off, sizeof(*ip6));
	struct srh_fixed *srh = srh_fixed_hdr(p, si);
	struct in6_addr *seg;
	__u8 sl = si->sl;

	if (!ip6 || !srh)
		return DROP_PKT_TRUNCATED;
	if (sl == 0)
		return DROP_SRH_SL_ZERO;
	if (ip6->hop_limit <= 1)
		return DROP_HOP_LIMIT;
	sl -= 1;
	seg = srh_segment(p, si, sl);
	if (!seg)
		return DROP_SRH_TRUNCATED;
	srh->segments_left = sl;
	ipv6_addr_copy(&ip6->daddr, seg);
	return DROP_NONE;
}

#endif /* SRCHAIN_END_H */
