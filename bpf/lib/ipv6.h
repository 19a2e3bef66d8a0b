/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The one IPv6 extension-header walker (RFC 8200 4) of srchain's C.
 *
 * Used by the SRH locator (lib/srh.h, End) and by the firewall's field
 * extraction (lib/fw_extract.h). The callers differ only in which headers
 * they step over and how far they may go, so those are arguments that are
 * compile-time constants at every call site (the walker is inlined and
 * clang folds them away):
 *   IPV6_WALK_OPTS  Hop-by-Hop and Destination Options only: stops at the
 *                   first routing header (the SRH locator, RFC 8200 4.1
 *                   order);
 *   IPV6_WALK_ALL   also Routing, Fragment and AH, as ip6tables'
 *                   ipv6_find_hdr does to find the transport (firewall).
 * Every walk is bounded: at most max_hdrs headers, and (max_off != 0)
 * headers must start within max_off bytes of pkt.data.
 */
#ifndef SRCHAIN_IPV6_H
#define SRCHAIN_IPV6_H

#include "common.h"

#ifndef IPPROTO_FRAGMENT
#define IPPROTO_FRAGMENT 44
#endif
#ifndef IPPROTO_AH
#define IPPROTO_AH 51
#endif

#define IPV6_WALK_OPTS 0
#define IPV6_WALK_ALL 1

/* ipv6_walk state: in, the next-header value and offset of the first
 * header to look at; out, the first header not skipped.
 */
struct ipv6_walk {
	__u32 off;
	__u32 rtoff;    /* first routing header seen (0: none) */
	__u8 nh;
	__u8 nonfirst;  /* stopped at a non-first fragment's header */
};

/* ipv6_forget returns x through *slot (map memory), so the verifier knows
 * nothing of it: the states of the walk's paths (different offsets)
 * become equal after the caller's bound check and are pruned instead of
 * multiplying with every later loop. slot NULL: x unchanged.
 */
static __always_inline __u32 ipv6_forget(__u32 *slot, __u32 x)
{
	if (!slot)
		return x;
	*(volatile __u32 *)slot = x;
	return *(volatile __u32 *)slot;
}

/* ipv6_walk skips extension headers from w->off (next header w->nh).
 * which: IPV6_WALK_OPTS or IPV6_WALK_ALL. A Fragment header is 8 bytes;
 * a first fragment (offset 0) goes on to what it carries, a non-first
 * fragment stops after its header with w->nonfirst set (the protocol is
 * known, the transport header is not there). AH lengths are in 4-octet
 * units minus 2 (RFC 4302 2.2), the others in 8-octet units minus 1.
 * Returns DROP_PKT_TRUNCATED when a header's first 2 bytes (8 for a
 * fragment header) are cut or lie beyond max_off, else DROP_NONE.
 * scratch (may be NULL) is a map word for ipv6_forget.
 */
static __always_inline __u32 ipv6_walk(const struct pkt *p, struct ipv6_walk *w, const int which,
				       const int max_hdrs, const __u32 max_off, __u32 *scratch)
{
	__u32 off = w->off;
	__u8 nh = w->nh;
	int i;

	for (i = 0; i < max_hdrs; i++) {
		__u8 *h;

		if (nh != IPPROTO_HOPOPTS && nh != IPPROTO_DSTOPTS &&
		    (which == IPV6_WALK_OPTS ||
		     (nh != IPPROTO_ROUTING && nh != IPPROTO_FRAGMENT && nh != IPPROTO_AH)))
			break;
		off = ipv6_forget(scratch, off);
		if (max_off && off > max_off)
			return DROP_PKT_TRUNCATED;
		h = pkt_ptr(p, off, 2);
		if (!h)
			return DROP_PKT_TRUNCATED;
		/* which is a constant: for IPV6_WALK_OPTS the branches below
		 * fold away (nh is Hop-by-Hop or Destination Options here).
		 */
		if (which == IPV6_WALK_ALL && nh == IPPROTO_ROUTING && !w->rtoff)
			w->rtoff = off;
		if (which == IPV6_WALK_ALL && nh == IPPROTO_FRAGMENT) {
			h = pkt_ptr(p, off, 8);
			if (!h)
				return DROP_PKT_TRUNCATED;
			nh = h[0];
			off += 8;
			/* Fragment offset (13 bits) != 0: no transport here. */
			if ((((__u32)h[2] << 8) | h[3]) & 0xfff8) {
				w->nonfirst = 1;
				break;
			}
			continue;
		}
		if (which == IPV6_WALK_ALL && nh == IPPROTO_AH)
			off += ((__u32)h[1] + 2) * 4;
		else
			off += ((__u32)h[1] + 1) * 8;
		nh = h[0];
	}
	w->nh = nh;
	w->off = ipv6_forget(scratch, off);
	return DROP_NONE;
}

#endif /* SRCHAIN_IPV6_H */
