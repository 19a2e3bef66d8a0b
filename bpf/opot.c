/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Ordered proof of transit on the SR-aware path (seed 003; docs/opot.md
 * "Data plane"): three tc programs, each a stage in front of (or behind)
 * the kernel's own SRv6 behaviour, which they never replace.
 *
 * - srchain_opot_headend, tc egress on the chain's ingress router: the
 *   kernel's seg6 encap has built outer IPv6 + SRH; if (first SID, last
 *   SID) names an OPoT chain, fill the TLV the chain's route reserved in
 *   the SRH (opot.Reservation; growing the SRH here cost more than the
 *   encap itself). A packet whose SRH holds a valid OPoT TLV passes
 *   untouched: srchain's eBPF ingress wrote it as it encapsulated
 *   (lib/ingress.h ING_EXT_OPOT). Any other packet of the chain has no
 *   proof to carry and is dropped here, counted, and so is a GSO packet
 *   (one proof cannot cover its segments).
 * - srchain_opot_transit, tc ingress on each NF node: if (DA, last SID)
 *   names a chain this node is a transit of, update the TLV in place and
 *   hand the packet on to the End that serves the DA: TC_ACT_UNSPEC runs
 *   the next tcx program (srchain's eBPF End, attached after this stage)
 *   or, with none, the stack (the kernel's seg6local End). TC_ACT_OK
 *   would end the tcx chain and skip an eBPF End.
 * - srchain_opot_verify, tc ingress on the chain's egress router: if the
 *   DA falls in the chain's egress SID prefix (LOC+FUNCT, any ARGS), check
 *   the packet's shape and verify; accept -> OPOT_MARK_VERIFIED and
 *   TC_ACT_UNSPEC, the kernel's End.DT6/DX4 decapsulates; anything else
 *   -> drop, counted per chain and reason, and an event on the ring
 *   (lib/opot_egress.h: nothing unproven reaches the decap route).
 *
 * - srchain_opot_xdp, the transit and verify stages as the OPoT stage of
 *   a `datapath: xdp` node's XDP pipeline (lib/pipeline.h), in front of
 *   the XDP End; the tc stages leave what it did alone (PIPE_DONE_OPOT).
 *
 * Packets that name no OPoT chain pass untouched (TC_ACT_UNSPEC), so a
 * stage costs one parse and one hash lookup on other traffic.
 */
#include "common.h"
#include "counters.h"
#include "ctx.h"
#include "srh.h"
#include "opot.h"
#include "opot_dp.h"
#include "opot_egress.h"
#include "pipeline.h"

/* opot_parse locates and validates the SRH of an Ethernet + IPv6 packet;
 * non-zero: not an SRv6 packet this stage handles.
 */
static __always_inline __u32 opot_parse(struct pctx *c, struct srh_info *si)
{
	__u32 r = srh_locate(&c->p, si);

	if (r)
		return r;
	return srh_validate(&c->p, si);
}

SEC("tc")
int srchain_opot_headend(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct srh_info si = {};
	struct opot_chain *ch;
	__u32 r, off = 0, idx, slot;

	ctx_reload(&c, CTX_TC);
	if (opot_parse(&c, &si))
		return TC_ACT_UNSPEC;
	ch = opot_chain_of(&c.p, &si, OPOT_ROLE_HEADEND);
	if (!ch)
		return TC_ACT_UNSPEC;
	idx = ch->idx;
	slot = ch->slot;
	off = opot_reserved(&c.p, &si);
	if (skb->gso_segs > 1)
		/* Sent as gso_segs packets that copy one header: one proof
		 * would reach the verifier gso_segs times, every copy after
		 * the first a replay (docs/opot.md "GSO").
		 */
		r = DROP_OPOT_GSO;
	else if (off)
		r = opot_headend(&c.p, off, idx, slot);
	else if (!opot_find(&c, CTX_TC, &si, &off))
		return TC_ACT_UNSPEC; /* srchain's eBPF ingress wrote it */
	else
		r = DROP_OPOT_NO_TLV;
	if (r) {
		/* A packet of an OPoT chain without its proof would only be
		 * dropped at the verifier: drop it here, counted.
		 */
		opot_count(idx, r);
		count_drop(r);
		return TC_ACT_SHOT;
	}
	return TC_ACT_UNSPEC;
}

/* opot_transit_stage updates the TLV of a packet of chain ch in place
 * (transit role). A missing or malformed TLV is left for the verifier to
 * drop and count: a transit never drops (seed 003 III-A4). Returns
 * whether it updated the proof.
 */
static __always_inline int opot_transit_stage(struct pctx *c, const int kind, const struct srh_info *si,
					      const struct opot_chain *ch)
{
	__u32 off = 0, idx = ch->idx;

	if (opot_find(c, kind, si, &off))
		return 0;
	opot_transit(&c->p, off, idx);
	return 1;
}

/* opot_verify_stage checks a packet whose DA is chain ch's egress SID
 * (verifier role; opot_egress_of), whose SRH opot_parse described in si
 * (parsed: its verdict): its shape (opot_egress_shape), then its proof. It counts the verdict per chain and reports a drop on the
 * ring; DROP_NONE accepts.
 */
static __always_inline __u32 opot_verify_stage(struct pctx *c, const int kind, const struct srh_info *si, __u32 parsed,
					       const struct opot_chain *ch, const struct opot_chain_key *last)
{
	__u32 r, off = 0, profile = ch->profile, idx = ch->idx, slot = 0;
	__u64 seq = 0;
	__u8 *tlv;

	r = opot_egress_shape(&c->p, si, parsed, ch, last);
	if (!r)
		r = opot_find(c, kind, si, &off);
	if (!r) {
		tlv = opot_tlv(&c->p, off);
		if (tlv)
			slot = tlv[OPOT_OFF_SLOT];
		r = opot_verify(&c->p, off, idx, &seq);
	}
	opot_count(idx, r);
	if (r) {
		opot_report(profile, slot, r, seq);
		count_drop(r);
	}
	return r;
}

SEC("tc")
int srchain_opot_transit(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct srh_info si = {};
	struct opot_chain *ch;

	ctx_reload(&c, CTX_TC);
	if (opot_parse(&c, &si))
		return TC_ACT_UNSPEC;
	ch = opot_chain_of(&c.p, &si, OPOT_ROLE_TRANSIT);
	if (!ch || (ch->flags & OPOT_CHAIN_IN_END) || pipe_tc_done(skb, PIPE_DONE_OPOT))
		return TC_ACT_UNSPEC;
	opot_transit_stage(&c, CTX_TC, &si, ch);
	return TC_ACT_UNSPEC;
}

/* srchain_opot_verify: every packet whose DA falls in an egress SID
 * prefix of a chain this node verifies is verified or dropped; an
 * accepted one carries OPOT_MARK_VERIFIED, without which the driver's
 * ip rule blackholes it before the decap route (lib/opot_egress.h).
 */
SEC("tc")
int srchain_opot_verify(struct __sk_buff *skb)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct srh_info si = {};
	struct opot_chain_key last;
	struct opot_chain *ch;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_UNSPEC;
	ctx_reload(&c, CTX_TC);
	ch = opot_egress_of(&c.p, &last);
	if (!ch)
		return TC_ACT_UNSPEC;
	/* The XDP stage verified it (and drops what fails): a second check
	 * would call it a replay. It still needs the mark for the route.
	 */
	if (!pipe_tc_done(skb, PIPE_DONE_OPOT) && opot_verify_stage(&c, CTX_TC, &si, opot_parse(&c, &si), ch, &last))
		return TC_ACT_SHOT;
	skb->mark |= OPOT_MARK_VERIFIED;
	return TC_ACT_UNSPEC;
}

/* srchain_opot_xdp is the XDP pipeline's OPoT stage (PIPE_OPOT) of a
 * `datapath: xdp` node: the transit and verify stages above, in front of
 * the XDP End, for the chain entries of those roles (a headend's entry
 * is the tc egress stage's). A packet whose proof it updated or accepted
 * carries PIPE_DONE_OPOT, so the tc stages leave it alone if a later
 * stage hands it to the stack; any other goes on untouched.
 */
SEC("xdp")
int srchain_opot_xdp(struct xdp_md *ctx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct srh_info si = {};
	struct opot_chain_key last;
	struct opot_chain *ch;
	struct ethhdr *eth;
	__u32 parsed;

	ctx_reload(&c, CTX_XDP);
	eth = pkt_ptr(&c.p, 0, sizeof(*eth));
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return pipe_next(ctx, PIPE_OPOT);
	/* One parse for both roles: inlined twice, the walk doubled what the
	 * verifier explores.
	 */
	parsed = opot_parse(&c, &si);
	ch = opot_egress_of(&c.p, &last);
	if (ch) {
		if (opot_verify_stage(&c, CTX_XDP, &si, parsed, ch, &last))
			return pipe_ret(PIPE_OPOT, XDP_DROP);
		pipe_mark(ctx, PIPE_DONE_OPOT);
		return pipe_next(ctx, PIPE_OPOT);
	}
	if (parsed)
		return pipe_next(ctx, PIPE_OPOT);
	/* Transit entries only: a verifier's packets are the DA's
	 * (opot_egress_of above), whatever segment[0] says.
	 */
	ch = opot_chain_of(&c.p, &si, OPOT_ROLE_TRANSIT);
	if (!ch || (ch->flags & OPOT_CHAIN_IN_END))
		return pipe_next(ctx, PIPE_OPOT);
	if (opot_transit_stage(&c, CTX_XDP, &si, ch))
		pipe_mark(ctx, PIPE_DONE_OPOT);
	return pipe_next(ctx, PIPE_OPOT);
}

char _license[] SEC("license") = "Dual BSD/GPL";
