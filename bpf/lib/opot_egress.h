/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The OPoT egress that cannot be bypassed (issue 34 item 2; docs/opot.md
 * "Egress: nothing decapsulates unproven").
 *
 * The kernel's End.DT6 / End.DX4 / End.DX6 route of a chain's egress SID
 * matches LOC+FUNCT (the route is the SID prefix: ARGS are wildcarded,
 * RFC 8986 3.1) and decapsulates whatever reaches it: with no SRH, or with
 * SL 0 whatever segment[0] says (seg6local's decap_and_validate only
 * refuses SL > 0). A verifier that finds its chain by segment[0] passes
 * every packet whose segment[0] is not the SID, so the kernel delivered
 * them unproven. Here the verifier finds its chain by the DA instead, by
 * longest prefix on the egress SID's LOC+FUNCT (opot_egress): every packet
 * the route would take is the chain's, and is either its last segment
 * with a proof that verifies or dropped (DROP_OPOT_BYPASS, counted per
 * chain, an event on the ring).
 *
 * Defence in depth: an accepted packet leaves the tc stage with
 * OPOT_MARK_VERIFIED in skb->mark, and the OPoT driver installs, for each
 * egress SID prefix, `ip -6 rule pref 800 to SID fwmark 0/OPOT_MARK
 * blackhole` ahead of the main table: a packet the verifier did not mark
 * (an interface without the stage, a stage detached) never reaches the
 * decap route. ip6_route_input looks the route up with flowi6_mark =
 * skb->mark, so the mark set at tc ingress is what the rule sees.
 */
#ifndef SRCHAIN_OPOT_EGRESS_H
#define SRCHAIN_OPOT_EGRESS_H

#include "common.h"
#include "drop.h"
#include "srh.h"
#include "opot.h"
#include "opot_dp.h"

/* OPOT_MARK_VERIFIED: the skb->mark bit of a packet whose proof the
 * verifier accepted. One of the bits srchain owns (0xffff0000,
 * internal/kinds/netfilter MarkSrchain) that End.AN.NF's mark leaves
 * free (it uses bit 31 and bits 16..28, lib/anf.h). Mirrored by
 * opotdp.MarkVerified.
 */
#define OPOT_MARK_VERIFIED 0x40000000u

struct opot_egress_key {
	__u32 prefixlen;                          /* LOC+FUNCT bits of the egress SID */
	__u8 addr[16] __attribute__((aligned(4))); /* the egress SID */
};

/* opot_egress: the egress SID prefixes of the chains this node verifies,
 * to the chain's key in opot_chains (its egress SID, segment[0] of its
 * packets). Written by the OPoT driver with the chain entries.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, OPOT_MAX_PROFILES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct opot_egress_key);
	__type(value, struct opot_chain_key);
} opot_egress SEC(".maps");

/* opot_egress_of returns the verifier entry of the chain whose egress SID
 * prefix holds the packet's DA, and in *last its egress SID; NULL when
 * the DA is no egress SID of this node (or the packet is no IPv6).
 */
static __always_inline struct opot_chain *opot_egress_of(const struct pkt *p, struct opot_chain_key *last)
{
	struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));
	struct opot_egress_key k = { .prefixlen = 128 };
	struct opot_chain_key *v;
	struct opot_chain *ch;

	if (!ip6 || ip6->version != 6)
		return NULL;
	__builtin_memcpy(k.addr, &ip6->daddr, 16);
	v = bpf_map_lookup_elem(&opot_egress, &k);
	if (!v)
		return NULL;
	*last = *v;
	ch = opot_chain_lookup(last);
	if (!ch || (ch->role && ch->role != OPOT_ROLE_VERIFIER))
		return NULL;
	return ch;
}

/* opot_egress_shape checks that a packet to chain ch's egress SID is the
 * chain's last segment as the headend built it: an SRH that validates
 * (parsed: what srh_locate + srh_validate returned for si),
 * SL 0 (RFC 8986 4.4 S01: the decapsulating SID is the last), DA equal to
 * the SID as configured (no other ARGS) and segment[0] the chain's
 * egress SID. Anything else is DROP_OPOT_BYPASS: the three shapes of
 * issue 34 (no SRH; SL 0 with segment[0] rewritten; the SID with ARGS
 * bits set) and an SRH with SL > 0, which the kernel would refuse anyway.
 */
static __always_inline __u32 opot_egress_shape(const struct pkt *p, const struct srh_info *si, __u32 parsed,
					       const struct opot_chain *ch, const struct opot_chain_key *last)
{
	__u64 *da, *seg0;
	const __u64 *sid = (const __u64 *)ch->sid, *l = (const __u64 *)last->last;

	if (parsed)
		return DROP_OPOT_BYPASS;
	if (si->sl != 0)
		return DROP_OPOT_BYPASS;
	da = pkt_ptr(p, (si->ip6off + 24) & 0x3fff, 16);
	seg0 = pkt_ptr(p, (si->srhoff + 8) & 0x3fff, 16);
	if (!da || !seg0)
		return DROP_OPOT_BYPASS;
	if (da[0] != sid[0] || da[1] != sid[1] || seg0[0] != l[0] || seg0[1] != l[1])
		return DROP_OPOT_BYPASS;
	return DROP_NONE;
}

#endif /* SRCHAIN_OPOT_EGRESS_H */
