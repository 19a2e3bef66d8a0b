/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Ordered proof of transit (seed 003; docs/opot.md): the OPoT SRH TLV,
 * the node parameter maps, and the three roles, headend (opot_headend),
 * transit (opot_transit) and verifier (opot_verify). The C twin of the
 * Go model in internal/opot (Init, Transit, Verifier.Check, Window);
 * bpf/test/opot.c runs it against that model.
 *
 * Nothing in the packet is trusted: the TLV is found by walking the SRH
 * TLV area (bounded by SRCHAIN_MAX_TLVS), its type, length, slot and
 * reserved bytes are checked, and RND/CML are read wherever they sit
 * (docs/opot.md: readers must not rely on placement; opot_load64).
 *
 * Every function returns 0 (DROP_NONE) or a drop reason.
 */
#ifndef SRCHAIN_OPOT_H
#define SRCHAIN_OPOT_H

#include "common.h"
#include "drop.h"
#include "srh.h"
#include "ctx.h"
#include "opot_math.h"
#include "opot_tlv.h"

/* RND layout: bits 60..17 sequence number, 16..0 random. */
#define OPOT_RAND_BITS 17
#define OPOT_MAX_SEQ ((1ULL << 44) - 2)

/* Anti-replay window: the Go model's DefaultWindow (1024 sequence
 * numbers; internal/opot window.go). The Go ring has size/64 + 1 = 17
 * blocks; here it has 32, the next power of two, so that a ring index is
 * a mask the verifier can bound (a modulo 17 it cannot). Both hold the
 * numbers (top - 1024, top] without two sharing a block, so verdicts are
 * the same (TestBPFWindowModel compares them).
 */
#define OPOT_WINDOW 1024
#define OPOT_WINDOW_BLOCKS 32
_Static_assert((OPOT_WINDOW_BLOCKS & (OPOT_WINDOW_BLOCKS - 1)) == 0 &&
	       OPOT_WINDOW_BLOCKS >= OPOT_WINDOW / 64 + 1, "window ring: power of two, > size/64");

/* Roles, as internal/opot Role. */
#define OPOT_ROLE_HEADEND 1
#define OPOT_ROLE_TRANSIT 2
#define OPOT_ROLE_VERIFIER 3

/* A chain's profile slot on this node is named by the node-local index
 * the loader gives the chain (opot_chain.idx, below OPOT_MAX_PROFILES,
 * stable across applies; the functions below call it profile), not by
 * the chain's global profile number: the per-slot state lives in arrays
 * at profile * OPOT_SLOTS + slot (opot_slot_index), found without
 * hashing.
 */

/* opot_params is node j's part of a profile: internal/opot NodeParams
 * (the Go side converts with bpfprog.Params). Share = y_j + B_j (POLY-2
 * pre-evaluated), lpc = LPC_j, dec_* = d_j (zero at the headend), enc_* =
 * c_j (zero at the verifier), secret = s (verifier only).
 */
struct opot_params {
	__u32 role; /* OPOT_ROLE_* */
	__u32 pad;
	__u64 share;
	__u64 lpc;
	__u64 dec_r;
	__u64 dec_cml;
	__u64 enc_r;
	__u64 enc_cml;
	__u64 secret;
};

/* opot_window is the verifier's anti-replay state of one slot. Packets
 * of one chain arrive on every CPU, so it is shared and locked.
 */
struct opot_window {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 top; /* highest accepted sequence number, 0: none */
	__u64 blocks[OPOT_WINDOW_BLOCKS];
};

#ifndef OPOT_MAX_PROFILES
#define OPOT_MAX_PROFILES 1024
#endif

/* Parameters, headend sequence counters and verifier windows, each an
 * array at opot_slot_index. An all-zero parameter entry (role 0) is no
 * profile. Sequence counters are shared by every CPU: atomic add, so two
 * CPUs never send the same number.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OPOT_MAX_PROFILES * OPOT_SLOTS);
	__type(key, __u32);
	__type(value, struct opot_params);
} opot_node_params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OPOT_MAX_PROFILES * OPOT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} opot_seqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OPOT_MAX_PROFILES * OPOT_SLOTS);
	__type(key, __u32);
	__type(value, struct opot_window);
} opot_windows SEC(".maps");

/* opot_slot_index is the array index of (profile, slot); out of range
 * gives an index no array has.
 */
static __always_inline __u32 opot_slot_index(__u32 profile, __u32 slot)
{
	if (profile >= OPOT_MAX_PROFILES || slot >= OPOT_SLOTS)
		return OPOT_MAX_PROFILES * OPOT_SLOTS;
	return profile * OPOT_SLOTS + slot;
}

/* opot_load64 reads a big-endian u64 from the packet in one load: the
 * TLV's values sit at any 8-byte alignment the SRH gives them (the
 * Ethernet header alone makes it 2 mod 8), and the verifier accepts
 * misaligned packet access where the CPU does it efficiently (x86, arm64;
 * elsewhere the program fails to load instead of misreading).
 */
static __always_inline __u64 opot_load64(const __u8 *b)
{
	return bpf_be64_to_cpu(*(const __u64 *)b);
}

static __always_inline void opot_store64(__u8 *b, __u64 v)
{
	*(__u64 *)b = bpf_cpu_to_be64(v);
}

/* opot_hop adds node n's term (seed 003 Eq. 4):
 * CML + (Share + RND) LPC mod p, for canonical r and cml.
 */
static __always_inline __u64 opot_hop(const struct opot_params *n, __u64 r, __u64 cml)
{
	return addmod61(cml, mulmod61(addmod61(n->share, r), n->lpc));
}

/* opot_lookup returns the parameters of (profile, slot) if this node has
 * them in role.
 */
static __always_inline struct opot_params *opot_lookup(__u32 profile, __u32 slot, __u32 role)
{
	__u32 k = opot_slot_index(profile, slot);
	struct opot_params *n = bpf_map_lookup_elem(&opot_node_params, &k);

	if (!n || n->role != role)
		return NULL;
	return n;
}

/* opot_headend writes the TLV at off (found by opot_find; the ingress
 * reserved it) for slot of profile (seed 003 Algorithm 1 lines 1-8; Go
 * Headend.Next): seq = ++counter, RND = seq << 17 | 17 random bits,
 * CML = (Share_0 + RND) LPC_0, both ciphered with c_0.
 * bpf_get_prandom_u32 is not cryptographic and need not be: uniqueness
 * comes from the sequence number (docs/opot.md "Threat model").
 */
static __always_inline __u32 opot_headend(const struct pkt *p, __u32 off, __u32 profile, __u32 slot)
{
	__u32 k = opot_slot_index(profile, slot);
	struct opot_params *n;
	__u64 *ctr, seq, r, cml;
	__u8 *tlv;

	if (slot >= OPOT_SLOTS)
		return DROP_OPOT_NO_PROFILE;
	n = opot_lookup(profile, slot, OPOT_ROLE_HEADEND);
	ctr = bpf_map_lookup_elem(&opot_seqs, &k);
	if (!n || !ctr)
		return DROP_OPOT_NO_PROFILE;
	seq = __sync_fetch_and_add(ctr, 1) + 1;
	if (seq == 0 || seq > OPOT_MAX_SEQ)
		return DROP_OPOT_SEQ_EXHAUSTED;
	r = seq << OPOT_RAND_BITS | (bpf_get_prandom_u32() & ((1U << OPOT_RAND_BITS) - 1));
	cml = opot_hop(n, r, 0);

	tlv = opot_tlv(p, off);
	if (!tlv)
		return DROP_OPOT_NO_TLV;
	tlv[0] = OPOT_TLV_TYPE;
	tlv[1] = OPOT_TLV_LEN - 2;
	tlv[OPOT_OFF_SLOT] = (__u8)slot;
	tlv[3] = tlv[4] = tlv[5] = tlv[6] = tlv[7] = 0;
	opot_store64(tlv + OPOT_OFF_RND, r ^ n->enc_r);
	opot_store64(tlv + OPOT_OFF_CML, cml ^ n->enc_cml);
	return DROP_NONE;
}

/* opot_transit updates the TLV at off in place (seed 003 Algorithm 1
 * lines 19-21; Go Transit): decipher with d_j, reduce mod p (a wrong
 * predecessor gives garbage, which travels on to the verifier: a transit
 * never drops on values), add the node's term, cipher with c_j. A node
 * without a transit profile for the slot leaves the TLV alone; the
 * verifier drops such packets (docs/opot.md "Two slots").
 */
/* opot_rewrite is what a transit stored: RND and CML before and after,
 * as the CPU loads the wire bytes (for a checksum fix-up from registers:
 * reading the bytes back right after the unaligned stores would stall
 * on store forwarding).
 */
struct opot_rewrite {
	__u64 old[2];
	__u64 new[2];
};

/* opot_transit_tlv is the transit on a TLV wherever it is: the packet
 * (opot_transit_rw) or the copy an SR proxy keeps while the packet is at
 * its NF (lib/proxy.h proxy_opot_hop). tlv is 24 writable bytes whose
 * RND and CML are 8-byte aligned when they are on the stack (the
 * verifier refuses misaligned stack access).
 */
static __always_inline void opot_transit_tlv(__u8 *tlv, __u32 profile, struct opot_rewrite *rw)
{
	struct opot_params *n;
	__u64 r, cml;

	rw->old[0] = rw->new[0] = *(const __u64 *)(tlv + OPOT_OFF_RND);
	rw->old[1] = rw->new[1] = *(const __u64 *)(tlv + OPOT_OFF_CML);
	n = opot_lookup(profile, tlv[OPOT_OFF_SLOT], OPOT_ROLE_TRANSIT);
	if (!n)
		return;
	r = reduce61(bpf_be64_to_cpu(rw->old[0]) ^ n->dec_r);
	cml = reduce61(bpf_be64_to_cpu(rw->old[1]) ^ n->dec_cml);
	cml = opot_hop(n, r, cml);
	rw->new[0] = bpf_cpu_to_be64(r ^ n->enc_r);
	rw->new[1] = bpf_cpu_to_be64(cml ^ n->enc_cml);
	*(__u64 *)(tlv + OPOT_OFF_RND) = rw->new[0];
	*(__u64 *)(tlv + OPOT_OFF_CML) = rw->new[1];
}

static __always_inline __u32 opot_transit_rw(const struct pkt *p, __u32 off, __u32 profile, struct opot_rewrite *rw)
{
	__u8 *tlv = opot_tlv(p, off);

	if (!tlv)
		return DROP_OPOT_NO_TLV;
	opot_transit_tlv(tlv, profile, rw);
	return DROP_NONE;
}

static __always_inline __u32 opot_transit(const struct pkt *p, __u32 off, __u32 profile)
{
	struct opot_rewrite rw;

	return opot_transit_rw(p, off, profile, &rw);
}

/* opot_window_check_update is the Go Window's Check then Update, in one
 * critical section so two copies of a packet on two CPUs end as one
 * accept and one replay. Called with w locked.
 */
static __always_inline __u32 opot_window_check_update(struct opot_window *w, __u64 seq)
{
	__u64 bit = 1ULL << (seq & 63);
	__u32 slot = (seq >> 6) & (OPOT_WINDOW_BLOCKS - 1);
	__u64 cur, steps, i;

	if (seq == 0)
		return DROP_OPOT_STALE;
	if (seq <= w->top) {
		if (w->top - seq >= OPOT_WINDOW)
			return DROP_OPOT_STALE;
		if (w->blocks[slot] & bit)
			return DROP_OPOT_REPLAY;
		w->blocks[slot] |= bit;
		return DROP_NONE;
	}
	/* Slide: clear the blocks between the old top's and seq's, at most
	 * the whole ring (RFC 6479).
	 */
	cur = w->top >> 6;
	steps = (seq >> 6) - cur;
	for (i = 1; i <= OPOT_WINDOW_BLOCKS; i++) {
		if (i > steps)
			break;
		w->blocks[(cur + i) & (OPOT_WINDOW_BLOCKS - 1)] = 0;
	}
	w->top = seq;
	w->blocks[slot] |= bit;
	return DROP_NONE;
}

/* opot_verify checks the TLV at off (seed 003 III-A3, Algorithm 1 lines
 * 23-29; Go Verifier.Check): slot profile (DROP_OPOT_NO_PROFILE), decipher,
 * both values canonical and CML + (Share + RND) LPC == RND + s
 * (DROP_OPOT_VERIFY), then the window (DROP_OPOT_REPLAY / _STALE). The
 * proof comes first and without the lock: a path deviation is always
 * opot-verify, and forgeries never move the window (docs/opot.md).
 * *seq gets the sequence number of a verified packet.
 */
static __always_inline __u32 opot_verify(const struct pkt *p, __u32 off, __u32 profile, __u64 *seq)
{
	struct opot_window *w;
	struct opot_params *n;
	__u64 r, cml;
	__u32 ret, k;
	__u8 *tlv = opot_tlv(p, off);

	if (!tlv)
		return DROP_OPOT_NO_TLV;
	k = opot_slot_index(profile, tlv[OPOT_OFF_SLOT]);
	n = opot_lookup(profile, tlv[OPOT_OFF_SLOT], OPOT_ROLE_VERIFIER);
	w = bpf_map_lookup_elem(&opot_windows, &k);
	if (!n || !w)
		return DROP_OPOT_NO_PROFILE;
	r = opot_load64(tlv + OPOT_OFF_RND) ^ n->dec_r;
	cml = opot_load64(tlv + OPOT_OFF_CML) ^ n->dec_cml;
	/* Canonical only: RND + p must not pass as RND (docs/opot.md). */
	if (r >= OPOT_P61 || cml >= OPOT_P61)
		return DROP_OPOT_VERIFY;
	if (opot_hop(n, r, cml) != addmod61(r, n->secret))
		return DROP_OPOT_VERIFY;
	*seq = r >> OPOT_RAND_BITS;
	bpf_spin_lock(&w->lock);
	ret = opot_window_check_update(w, *seq);
	bpf_spin_unlock(&w->lock);
	return ret;
}

#endif /* SRCHAIN_OPOT_H */
