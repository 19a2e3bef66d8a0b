/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The OPoT transit inside srchain's End programs (issue 11 "in the eBPF
 * End"; docs/opot.md "Transit in the End"). A node whose transit SIDs
 * the eBPF End serves needs no OPoT stage in front of the End: the End
 * updates the proof of a packet of such a chain (OPOT_CHAIN_IN_END)
 * right before its own rewrite, saving the stage's program run, its
 * parse and its pipeline check. The End takes the OPoT driver's maps
 * (datapath.EndOptions.OPoT); without them cfg_opot is 0 and the
 * verifier prunes all of this.
 */
#ifndef SRCHAIN_END_OPOT_H
#define SRCHAIN_END_OPOT_H

#include "common.h"
#include "ctx.h"
#include "csum.h"
#include "srh.h"
#include "opot.h"
#include "opot_dp.h"

/* cfg_opot: non-zero when the loader gave the End the OPoT maps. */
SRCHAIN_CONFIG(__u32, cfg_opot, 0);

/* end_opot_tc updates the proof of a tc packet and folds the change of
 * RND and CML into skb->csum (CHECKSUM_COMPLETE: the End may redirect
 * the packet without the stack's forward path, which would drop that
 * state), from the old and new values the transit held in registers
 * (opot_transit_rw; lib/csum.h csum_diff16). si is the SRH the End validated
 * when valid is set, else the packet is parsed here (opot_in_end).
 *
 * A global function, verified once on its own: inlined, the End's
 * verification took 1.8x the instructions (every later state of the End
 * explored twice). A global function may take the context and stack
 * memory but no packet pointer, so it re-derives the packet view.
 */
__attribute__((noinline)) int end_opot_tc(struct __sk_buff *skb, const struct srh_info *si, __u32 valid)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct opot_rewrite rw; /* opot_transit_rw fills it before it returns 0 */
	__u32 idx = 0, off;
	__u16 d;

	if (!skb || !si)
		return 0;
	ctx_reload(&c, CTX_TC);
	off = opot_in_end(&c, CTX_TC, valid ? si : NULL, &idx);
	if (!off || opot_transit_rw(&c.p, off, idx, &rw))
		return 0;
	d = csum_diff16(rw.old, rw.new, (off - c.p.l3off) & 1);
	bpf_csum_update(skb, d);
	return 0;
}

/* end_opot_xdp is end_opot_tc in XDP (no checksum state to keep). */
__attribute__((noinline)) int end_opot_xdp(struct xdp_md *ctx, const struct srh_info *si, __u32 valid)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	__u32 idx = 0, off;

	if (!ctx || !si)
		return 0;
	ctx_reload(&c, CTX_XDP);
	off = opot_in_end(&c, CTX_XDP, valid ? si : NULL, &idx);
	if (off)
		opot_transit(&c.p, off, idx);
	return 0;
}

#endif /* SRCHAIN_END_OPOT_H */
