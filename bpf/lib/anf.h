/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* End.AN.NF on a stock kernel (seed 002 section 3; docs/netfilter.md).
 *
 * The seed's kernel patch hides the outer IPv6 header + SRH, runs the
 * inner packet through netfilter PREROUTING, does End, runs FORWARD and
 * POSTROUTING, then restores the outer header (Algorithm 1, listing 3.3).
 * Here the same happens in two tc programs around the kernel's own
 * forwarding path:
 *
 *   anf_in  (tcx ingress, every interface of the NF node): for a packet
 *           to an End.AN.NF SID, do End on the outer header (SL - 1,
 *           DA = next SID, hop limit - 1) and keep the result in a stash
 *           slot; strip it; write ARG and the slot into the mark; hand
 *           the inner packet to the stack. The kernel forwards it as
 *           any packet: PREROUTING, conntrack, NAT, routing (a fwmark
 *           rule sends it to srchain's restore device), FORWARD,
 *           POSTROUTING.
 *   anf_out (tcx egress of the restore device): take the slot from the
 *           mark, push the stashed outer header back in front of the
 *           (possibly NAT-rewritten, resized) inner packet, fix the
 *           payload length, restore the original mark and redirect to
 *           the next SID's neighbour.
 *
 * Mark layout (ANF_MARK_*): bit 31 says "inner packet of End.AN.NF",
 * bits 16..28 carry the slot, bits 29..30 are reserved for srchain; the
 * low args_bits (at most 16) carry the SID's ARG (seed 002 listing 3.2).
 * Rules may change bits 0..15; bits 16..31 must stay as srchain set
 * them (a rule that clears bit 31 sends the inner packet out
 * unencapsulated: docs/netfilter.md).
 *
 * Insert mode (H.Insert: the original IPv6 packet with an SRH inserted
 * behind its fixed header, segment 0 = the final destination): there is
 * no inner packet, so netfilter gets the original one back: anf_in
 * stashes the header as above, then removes the SRH, sets DA = segment 0,
 * the IPv6 next header = the SRH's and the payload length; anf_out puts
 * the stashed SRH (End applied) back behind the IPv6 header as netfilter
 * left it (source, hop limit, traffic class as NAT / forwarding left
 * them), writes segment 0 = that packet's (possibly DNAT'd) destination
 * and DA = the next SID (or segment 0 itself when SL is now 0). The L4
 * checksum is not touched: with H.Insert it covers the final destination
 * (RFC 8200 8.1), which is the DA netfilter sees and segment 0 after.
 *
 * The stash is an array: bounded; each CPU owns a partition and reuses
 * its slots round robin, so a slot whose packet netfilter dropped is
 * simply overwritten (counted as unclaimed); anf_out refuses entries
 * already consumed or older than cfg_max_age_ns (DROP_ANF_STALE).
 *
 * Fragments: conntrack reassembles an inner datagram in PREROUTING (the
 * result carries one fragment's mark, so one slot) and the forwarding
 * fragments it again before srcanf0, every piece with that mark. A
 * restore therefore consumes the slot only with the last piece of a
 * datagram (IPv4 MF clear, IPv6 Fragment header M clear, or no
 * fragment at all); an earlier piece leaves it live for the next one
 * (docs/netfilter.md "Fragments").
 */
#ifndef SRCHAIN_ANF_H
#define SRCHAIN_ANF_H

#include "common.h"

#define ANF_MARK_FLAG 0x80000000u
#define ANF_MARK_SLOT_SHIFT 16
#define ANF_SLOT_BITS 13
#define ANF_SLOTS (1u << ANF_SLOT_BITS)
#define ANF_ARG_BITS_MAX 16

/* Largest outer header kept: IPv6 (40) + SRH with SRCHAIN_MAX_SEGS
 * segments (8 + 256) + 80 bytes of TLVs. Larger ones are DROP_UNSUPPORTED.
 */
#define ANF_MAX_HDR 384
/* Room of anf_entry.hdr: a power of two above ANF_MAX_HDR, so a length
 * masked with ANF_HDR_ROOM - 1 is provably inside it (the verifier does
 * not follow clang's rewrite of a range check).
 */
#define ANF_HDR_ROOM 512

/* anf_sid: value of anf_sids (LPM trie keyed by SID prefix without ARG). */
struct anf_sid {
	__u32 args_bits; /* low bits of the DA copied into the mark (0..16) */
	__u32 counter;   /* index into sid_counters */
};

struct anf_sid_key {
	__u32 prefixlen;
	struct in6_addr addr;
};

struct anf_entry {
	__u64 ts;       /* bpf_ktime_get_coarse_ns() when stashed */
	__u32 live;     /* 1 from stash until restore */
	__u32 ifindex;  /* where the SR packet arrived (FIB lookup input) */
	__u32 mark;     /* the SR packet's mark before anf_in */
	__u32 hlen;     /* bytes in hdr */
	__u32 insert;   /* 1: insert mode, only the SRH was stripped (below) */
	__u8 hdr[ANF_HDR_ROOM]; /* outer IPv6 + SRH, End already applied */
	/* Restores from this slot (several: the pieces of one datagram).
	 * Last, in what was padding: the value keeps its size (544) and hdr
	 * its offset, so a stash pinned by an older build stays compatible.
	 */
	__u32 uses;
};

/* Slots of anf_stats (per CPU). */
#define ANF_STAT_STASHED 0   /* outer headers stashed by anf_in */
#define ANF_STAT_RESTORED 1  /* outer headers restored by anf_out */
#define ANF_STAT_UNCLAIMED 2 /* slots reused while still live: netfilter dropped (or holds) the packet */
#define ANF_STAT_TO_KERNEL 3 /* hop limit <= 1: handed to the kernel's End */
#define ANF_STAT_NEXT 4      /* per-CPU round-robin position (not a counter) */
#define ANF_STAT_FRAG_KEPT 5 /* restores of a non-last fragment: the slot stays live for the next piece */
#define ANF_STAT_MAX 8

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct anf_sid_key);
	__type(value, struct anf_sid);
} anf_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ANF_SLOTS);
	__type(key, __u32);
	__type(value, struct anf_entry);
} anf_stash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ANF_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} anf_stats SEC(".maps");

/* cfg_cpu_bits: log2 of the CPU partitions (loader: ceil(log2(possible
 * CPUs)), at most 7); each CPU owns ANF_SLOTS >> cfg_cpu_bits slots.
 */
SRCHAIN_CONFIG(__u32, cfg_cpu_bits, 0);
/* cfg_peer_ifindex: the restore device's peer (srchain_anf_fwd), 0: none. */
SRCHAIN_CONFIG(__u32, cfg_peer_ifindex, 0);
/* cfg_max_age_ns: an entry older than this is not restored. */
SRCHAIN_CONFIG(__u64, cfg_max_age_ns, 1000000000ull);

static __always_inline __u64 *anf_stat(__u32 slot)
{
	return bpf_map_lookup_elem(&anf_stats, &slot);
}

static __always_inline void anf_count(__u32 slot)
{
	__u64 *v = anf_stat(slot);

	if (v)
		*v += 1;
}

/* anf_slot_alloc picks this CPU's next slot. */
static __always_inline __u32 anf_slot_alloc(void)
{
	__u32 bits = cfg_cpu_bits & 7;
	__u32 per = ANF_SLOTS >> bits;
	__u32 cpu = bpf_get_smp_processor_id() & ((1u << bits) - 1);
	__u64 *next = anf_stat(ANF_STAT_NEXT);
	__u32 n = 0;

	if (next) {
		n = (__u32)*next;
		*next += 1;
	}
	return (cpu * per + (n & (per - 1))) & (ANF_SLOTS - 1);
}

/* anf_mark builds the mark the inner packet carries through netfilter. */
static __always_inline __u32 anf_mark(__u32 slot, const struct in6_addr *da, __u32 args_bits)
{
	__u32 arg = 0;

	if (args_bits > ANF_ARG_BITS_MAX)
		args_bits = ANF_ARG_BITS_MAX;
	if (args_bits)
		arg = bpf_ntohl(da->in6_u.u6_addr32[3]) & ((1u << args_bits) - 1);
	return ANF_MARK_FLAG | (slot << ANF_MARK_SLOT_SHIFT) | arg;
}

#endif /* SRCHAIN_ANF_H */
