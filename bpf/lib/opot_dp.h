/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* OPoT data-plane glue (docs/opot.md "Data plane"): which chain a packet
 * belongs to, growing a kernel-built SRH by the OPoT TLV (headend after
 * the kernel's seg6 encap), per-chain verdict counters and the event
 * ring. The roles themselves are lib/opot.h.
 *
 * A chain is named by its last SID (segment[0]): the chain's egress SID,
 * which the compiler allocates per chain, so an NF SID shared by two
 * chains still finds the right profile. A node has one role in a chain
 * (one share per node), so the last SID alone finds the node's entry,
 * and the entry's sid must be the packet's active SID: the first SID
 * after the headend's encap, the node's own SID at a transit, the last
 * SID at the verifier. A 16-byte key hashes in half the time of the
 * pair.
 */
#ifndef SRCHAIN_OPOT_DP_H
#define SRCHAIN_OPOT_DP_H

#include "common.h"
#include "drop.h"
#include "srh.h"
#include "opot.h"

struct opot_chain_key {
	__u8 last[16] __attribute__((aligned(8))); /* segment[0], the chain's egress SID */
};

struct opot_chain {
	__u32 profile; /* the chain's profile number (events, counters) */
	__u32 slot;    /* headend: the slot it starts packets with */
	/* OPOT_ROLE_* of this node on the chain: a stage acts only on its
	 * own role's entries, so a node that is the transit of one chain
	 * and the verifier of another runs both stages without one taking
	 * the other's packets. 0: any (test tables that load one role).
	 */
	__u32 role;
	/* The chain's node-local index (< OPOT_MAX_PROFILES): its slots'
	 * parameters, counters and windows are at opot_slot_index(idx,
	 * slot), its verdict counters at opot_stat_index(idx, reason).
	 */
	__u32 idx;
	__u8 sid[16]; /* the active SID (the DA) the entry applies to */
	__u32 flags;  /* OPOT_CHAIN_* */
	__u32 pad;
};

/* OPOT_CHAIN_IN_END: a transit entry whose SID an srchain End.* program
 * serves on this node, which updates the proof itself: the eBPF End
 * (opot_in_end) or an End.AD / End.AD.flow SR proxy (lib/proxy.h
 * proxy_opot_hop, on the TLV it keeps while the packet is at the NF). The
 * transit stages leave such packets alone and the node needs no stage in
 * front of that program for them.
 */
#define OPOT_CHAIN_IN_END 0x1

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OPOT_MAX_PROFILES * 8);
	__type(key, struct opot_chain_key);
	__type(value, struct opot_chain);
} opot_chains SEC(".maps");

/* opot_chain_gen counts the changes of opot_chains: the OPoT driver
 * adds one after it writes or deletes entries (opotdp.TouchChains), and
 * a stage's cached lookups (opot_chain_cache) hold only for the
 * generation they were made in. 0: no generation yet, nothing cached.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} opot_chain_gen SEC(".maps");

/* opot_chain_cache: per CPU, the last lookup of opot_chains for each of
 * OPOT_CHAIN_CACHE slots (by a hash of the key), found or not. A hash
 * map lookup hashes the 16-byte key in a helper call on every packet; a
 * per-CPU array is read without one. Per CPU, only the CPU itself writes a slot, and networking BPF
 * programs do not nest on a CPU, so a slot is never read half written.
 */
#define OPOT_CHAIN_CACHE 256

struct opot_chain_slot {
	__u64 last[2]; /* the key */
	__u64 gen;     /* opot_chain_gen when filled; 0: empty */
	__u32 found;   /* the key had an entry (ch), else none */
	__u32 pad;
	struct opot_chain ch;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPOT_CHAIN_CACHE);
	__type(key, __u32);
	__type(value, struct opot_chain_slot);
} opot_chain_cache SEC(".maps");

/* opot_chain_lookup is bpf_map_lookup_elem(&opot_chains, k), answered
 * from this CPU's cache when it holds k from the current generation.
 * The pointer is valid for the rest of the program run.
 */
static __always_inline struct opot_chain *opot_chain_lookup(const struct opot_chain_key *k)
{
	const __u64 *w = (const __u64 *)k->last;
	struct opot_chain_slot *c;
	struct opot_chain *ch;
	__u32 zero = 0, i;
	__u64 *gen, g;

	gen = bpf_map_lookup_elem(&opot_chain_gen, &zero);
	g = gen ? *gen : 0;
	if (!g)
		return bpf_map_lookup_elem(&opot_chains, k);
	i = ((w[0] ^ w[1]) * 0x9e3779b97f4a7c15ULL) >> 56; /* Fibonacci hashing, 256 slots */
	c = bpf_map_lookup_elem(&opot_chain_cache, &i);
	if (!c)
		return bpf_map_lookup_elem(&opot_chains, k);
	if (c->gen == g && c->last[0] == w[0] && c->last[1] == w[1])
		return c->found ? &c->ch : NULL;
	ch = bpf_map_lookup_elem(&opot_chains, k);
	c->last[0] = w[0];
	c->last[1] = w[1];
	c->gen = g;
	c->found = ch != NULL;
	if (ch)
		c->ch = *ch;
	return ch;
}

/* Verdicts per chain (its index) and reason (DROP_NONE: accepted), per
 * CPU, at opot_stat_index.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPOT_MAX_PROFILES * DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} opot_stats SEC(".maps");

static __always_inline __u32 opot_stat_index(__u32 idx, __u32 reason)
{
	if (idx >= OPOT_MAX_PROFILES || reason >= DROP_MAX)
		return OPOT_MAX_PROFILES * DROP_MAX;
	return idx * DROP_MAX + reason;
}

/* opot_event is one verifier drop, read by the agent/lab. */
struct opot_event {
	__u32 profile;
	__u32 slot;
	__u32 reason;
	__u32 pad;
	__u64 seq; /* the sequence number when the proof held, else 0 */
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} opot_events SEC(".maps");

static __always_inline void opot_count(__u32 idx, __u32 reason)
{
	__u32 k = opot_stat_index(idx, reason);
	__u64 *v = bpf_map_lookup_elem(&opot_stats, &k);

	if (v)
		*v += 1;
}

/* opot_report sends a drop event; a full ring loses the event, never the
 * count (opot_stats).
 */
static __always_inline void opot_report(__u32 profile, __u32 slot, __u32 reason, __u64 seq)
{
	struct opot_event *e = bpf_ringbuf_reserve(&opot_events, sizeof(*e), 0);

	if (!e)
		return;
	e->profile = profile;
	e->slot = slot;
	e->reason = reason;
	e->pad = 0;
	e->seq = seq;
	bpf_ringbuf_submit(e, 0);
}

/* opot_chain_of returns the chain of a packet whose SRH si describes, if
 * (DA, segment[0]) names one on this node in role (an entry of role 0
 * takes any; role 0 asks for an entry of any role).
 */
static __always_inline struct opot_chain *opot_chain_of(const struct pkt *p, const struct srh_info *si, __u32 role)
{
	struct opot_chain_key k;
	struct opot_chain *ch;
	__u64 *da = pkt_ptr(p, (si->ip6off + 24) & 0x3fff, 16);
	__u64 *last = pkt_ptr(p, (si->srhoff + 8) & 0x3fff, 16);
	__u64 *sid, *kw = (__u64 *)k.last;

	if (!da || !last)
		return NULL;
	/* Two 8-byte loads (unaligned packet access, as opot_load64): a
	 * memcpy from the packet compiles to sixteen byte loads.
	 */
	kw[0] = last[0];
	kw[1] = last[1];
	ch = opot_chain_lookup(&k);
	if (!ch || (role && ch->role && ch->role != role))
		return NULL;
	sid = (__u64 *)ch->sid;
	if (da[0] != sid[0] || da[1] != sid[1])
		return NULL;
	return ch;
}

/* opot_in_end finds the proof srchain's End program updates itself
 * (OPOT_CHAIN_IN_END) on a packet to one of its SIDs, before the End's
 * rewrite: si is the SRH the End validated, or NULL when the End did not
 * describe one (a packet it hands to the kernel's End, a NEXT-C-SID
 * shift), then it is parsed here. Returns the TLV's offset and in *idx
 * the chain's index, or 0: nothing to update (not such a chain, or no
 * valid TLV, which the verifier counts: a transit never drops).
 */
static __always_inline __u32 opot_in_end(struct pctx *c, const int kind, const struct srh_info *si, __u32 *idx)
{
	struct srh_info own;
	struct opot_chain *ch;
	__u32 off = 0;

	if (!si) {
		/* Zeroed here, not on every call: the End's SRH is the usual si. */
		__builtin_memset(&own, 0, sizeof(own));
		if (srh_locate(&c->p, &own) || srh_validate(&c->p, &own))
			return 0;
		si = &own;
	}
	ch = opot_chain_of(&c->p, si, OPOT_ROLE_TRANSIT);
	if (!ch || !(ch->flags & OPOT_CHAIN_IN_END))
		return 0;
	if (opot_find(c, kind, si, &off))
		return 0;
	*idx = ch->idx;
	return off;
}

#endif /* SRCHAIN_OPOT_DP_H */
