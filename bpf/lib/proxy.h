/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* SR proxies for SR-unaware network functions (seed 001,
 * draft-ietf-spring-sr-service-programming section 6): End.AS (static),
 * End.AD (dynamic), End.AM (masquerading, plain and NAT) and End.AD.flow
 * (a per-flow dynamic proxy). Entry points: bpf/proxy.c. Go model and
 * loader: internal/proxydp.
 *
 * Configuration (written by the loader, internal/proxydp):
 *   proxy_cfg       array, SID entry index -> struct proxy_sid
 *   proxy_sids      hash, SID address (exact) -> SID entry index
 *   proxy_nf        hash, IFACE-IN ifindex -> SID entry index
 *   proxy_sr_ifs    hash, ifindex -> 1: the SR-side interfaces, where the
 *                   XDP pipeline stage (srchain_proxy_xdp) serves packets
 *                   to a proxy SID, as srchain_proxy_sr does at tc on
 *                   exactly those interfaces.
 * State:
 *   proxy_ad_cache  hash, IFACE-IN ifindex -> struct proxy_hdr: End.AD's
 *                   cached outer header stack (one per SID: a SID has one
 *                   IFACE-IN and proxy_nf is one to one). A hash, not an
 *                   array: an update replaces the element under RCU, so a
 *                   reader on another CPU sees the old or the new header,
 *                   never a torn mix.
 *   proxy_flows     hash, struct proxy_flow_key -> struct proxy_flow
 *                   (24 bytes): End.AD.flow's per-flow cache, sized by the
 *                   loader (Options.FlowCapacity): the flow's header slot
 *                   and its generation, the first word of its outer IPv6
 *                   header (version, traffic class, flow label: per flow
 *                   with seg6_flowlabel and the inner DSCP copied) and the
 *                   last use. Full: proxy_flow_room deletes idle flows (at
 *                   most once per jiffy per CPU), else the new flow is
 *                   dropped (DROP_PROXY_CACHE_FULL); live flows stay.
 *   proxy_flow_sweep_at  per-CPU array: the jiffy of the last sweep.
 *   proxy_hslots    hash, SID entry index * PROXY_HDR_SLOTS + slot ->
 *                   struct proxy_hdr: End.AD.flow's header table, one copy
 *                   per distinct outer header stack (first word zeroed),
 *                   shared by every flow with that stack. gen identifies
 *                   the content: a flow whose gen differs from its slot's
 *                   (the slot was given another header since) misses.
 *   proxy_hgen      array, same index -> __u64: the last generation given
 *                   out for the slot (atomic add: two CPUs writing one slot
 *                   at once get distinct generations, so a flow never gets
 *                   the other's header).
 *   proxy_opot_slots  array of PROXY_OPOT_SLOTS, hash of struct
 *                   proxy_opot_key -> struct proxy_opot_slot: the OPoT TLV
 *                   of a packet at the NF (PROXY_F_OPOT, proxy_opot_save),
 *                   when its slot is free or stale.
 *   proxy_opot      LRU hash, struct proxy_opot_key -> the OPoT TLV of a
 *                   packet at the NF whose slot was taken.
 *   proxy_opot_q    LRU hash, key with seq 0 -> struct proxy_opot_fifo:
 *                   identical packets' TLVs queued behind the first.
 *   proxy_fibc      per-CPU array: the XDP twins' FIB cache (one jiffy).
 *   proxy_stats     per-CPU array, index * PROXY_STAT_SLOTS + PS_*.
 *
 * Header cache bound: PROXY_HDR_MAX = 512 bytes of outer header stack
 * (IPv6 40 + SRH 8 + 16 * SRCHAIN_MAX_SEGS = 304, plus room for SRH TLVs,
 * Hop-by-Hop and Destination Options). A longer stack is dropped
 * (DROP_PROXY_HDR_TOO_BIG): it could not be restored.
 *
 * The header is cached with its payload length zeroed (so packets of a
 * flow do not rewrite it) and after End's SL - 1 / DA update; it is
 * written only when it differs from what is cached. The outer hop limit
 * is cached as it arrived; the packet restored from it is forwarded with
 * the hop limit decremented once (redirect) or handed to the stack, which
 * decrements it when forwarding: the proxy counts as one IPv6 hop, as End
 * would.
 *
 * Direction SR -> NF (srchain_proxy_sr on the SR-facing interface; also
 * run by srchain_proxy_nf for packets to a proxy SID, so IFACE-IN may be
 * the SR-facing interface; srchain_proxy_sr_xdp, its XDP twin, serves
 * what a FIB lookup of the NF's address resolves out of IFACE-OUT and
 * passes everything else, untouched and uncounted, to tc). First, for
 * every behaviour, an IPv6 payload length beyond the frame is
 * DROP_PKT_TRUNCATED (ipv6_rcv, which would drop it, runs after tc).
 *   End.AS   an SRH, if any, must be valid (never trusted); the header
 *            after the outer IPv6 and all its extension headers must be
 *            the SID's inner type (41, 4 or 143: Ethernet, below) else
 *            DROP_PROXY_WRONG_INNER;
 *            strip everything up to the inner packet, send it to the NF
 *            (bpf_redirect_neigh on IFACE-OUT, next hop NFNext6/NFNext4).
 *   End.AD   as End.AS but an SRH is required (DROP_NO_SRH) with SL > 0
 *            (DROP_SRH_SL_ZERO); SL - 1, DA = SRH[SL]; the header stack is
 *            cached for IFACE-IN.
 *   End.AD.flow  as End.AD, cached per inner flow (proxy_flow_key).
 *   End.AM   SRH required, SL > 0; DA = SRH[0]; the packet (with its SRH)
 *            goes to the NF over IPv6.
 * Direction NF -> SR (srchain_proxy_nf on IFACE-IN; srchain_proxy_nf_xdp,
 * its XDP twin, serves what it can finish with a FIB redirect, decided
 * before it writes, and passes everything else to tc untouched; both
 * twins cache FIB results per CPU for one jiffy, proxy_fibc): link-local, ND,
 * MLD, RS, multicast and broadcast traffic and non-IP frames (ARP) pass
 * untouched (PROXY_NEXT: the next tcx program, then the stack);
 * everything else:
 *   End.AS/AD/AD.flow  the inner family must be the SID's inner type
 *            (else DROP_PROXY_WRONG_INNER), its length fields consistent
 *            with the frame (IPv4: IHL >= 5, within the total length; else
 *            DROP_PKT_TRUNCATED); hop limit / TTL <= 1: IPv6
 *            gets an ICMPv6 Time Exceeded (from the SID address, back to
 *            the NF), IPv4 is dropped without an ICMPv4 error (counted
 *            DROP_PROXY_TTL; documented choice: the proxy has no IPv4
 *            address of its own to send it from); else decrement it and
 *            push the outer header: End.AS its configured one (built by
 *            the loader: source, segment list in travel order, SL = last
 *            entry; one segment: no SRH, DA = that segment; the bytes
 *            srv6_encaps would write, pushed by proxy_push like End.AD's
 *            so both share the -EALREADY fallback), End.AD the
 *            cached one (DROP_PROXY_NO_CACHE while empty), End.AD.flow the
 *            flow's (DROP_PROXY_FLOW_MISS when none or idle).
 *   End.AM   SRH required, SL > 0; hop limit <= 1: ICMPv6 Time Exceeded;
 *            NAT variant: SRH[0] = the DA the packet came back with;
 *            then SL - 1, DA = SRH[SL] (the hop limit as below).
 * Then FIB lookup on the outer DA: success and outer hop limit > 1 ->
 * hop limit - 1, MACs from the lookup, redirect; anything else -> the
 * stack forwards the rewritten packet (TC_ACT_OK; it resolves
 * neighbours, sends the ICMPv6 errors and decrements the hop limit
 * itself).
 *
 * GSO (docs/proxy.md "MTU and GSO"): a GSO packet keeps its segment size
 * both ways (BPF_F_ADJ_ROOM_FIXED_GSO): each segment shrinks or grows by
 * the outer header exactly as a non-GSO packet does, so the links carry
 * the same sizes with offloads on or off; the FIB step checks a GSO
 * packet's segments against the outgoing link (too big: the stack, which
 * sends Packet Too Big).
 *
 * End.AD.flow and NAT (the NF rewrites the 5-tuple): the returning
 * packet's flow key is not in the cache, so it is dropped and counted
 * (DROP_PROXY_FLOW_MISS, stat cache-miss). This is deliberate: a
 * rewritten flow cannot be told apart from a flow that never came from
 * the SR side, and guessing (e.g. "the last header seen on IFACE-IN")
 * would send one chain's traffic down another's segment list. A NATing
 * NF behind a per-flow proxy needs its own SID (End.AD, keyed by
 * interface) or End.AM with NAT.
 * End.AD.flow header table: per SID PROXY_HDR_SLOTS = 64 slots in 16
 * buckets of 4 ways. A header stack (first word zeroed) hashes
 * (proxy_hdr_hash) to a bucket; a way holding the same stack is shared,
 * else an empty way is taken, else the way (hash >> 32) % 4 is replaced
 * (counted hdr-replace): flows still pointing at it miss on the way back
 * (their next packet from the SR side takes a slot again). The per-flow
 * value is written only when the flow's slot, generation or first word
 * changes; otherwise only its last-use time is updated in place, and
 * only when it is older than 1/1024 of the idle timeout
 * (proxy_flow_touch).
 * Flow key: SID entry index, inner family, protocol (the next header of
 * the inner fixed header: extension headers are not walked), addresses,
 * and ports for TCP and UDP of unfragmented packets (0 for fragments and
 * other protocols, so every fragment of a datagram shares one entry).
 */
#ifndef SRCHAIN_PROXY_H
#define SRCHAIN_PROXY_H

#include "common.h"
#include "counters.h"
#include "ctx.h"
#include "csum.h"
#include "fib.h"
#include "icmp6.h"
#include "ipv6.h"
#include "srh.h"
#include "srv6_encap.h"
#include "opot_tlv.h"
#include "opot_dp.h"
#include "pipeline.h"

#ifndef ICMPV6_TIME_EXCEED
#define ICMPV6_TIME_EXCEED 3
#endif
#ifndef ICMPV6_EXC_HOPLIMIT
#define ICMPV6_EXC_HOPLIMIT 0
#endif

/* Verdict for a packet that is not the proxy's: TC_ACT_UNSPEC, the next
 * tcx program on the hook runs (bpf/proxy.c).
 */
#define PROXY_NEXT -1

#define PROXY_MAX_SIDS 256
#define PROXY_HDR_MAX 512
#define PROXY_FLOWS_DEFAULT 65536
#define PROXY_HDR_WAYS 4
#define PROXY_HDR_BUCKETS 16
#define PROXY_HDR_SLOTS (PROXY_HDR_WAYS * PROXY_HDR_BUCKETS)

_Static_assert((PROXY_HDR_MAX & (PROXY_HDR_MAX - 1)) == 0, "PROXY_HDR_MAX must be a power of two");

/* Behaviours (Go: proxydp.Behavior). */
#define PROXY_BEH_AS 1
#define PROXY_BEH_AD 2
#define PROXY_BEH_AM 3
#define PROXY_BEH_AM_NAT 4
#define PROXY_BEH_AD_FLOW 5

/* proxy_sid.flags */
#define PROXY_F_NF6 1 /* nf6 is set */
#define PROXY_F_NF4 2 /* nf4 is set */
#define PROXY_F_OPOT 4 /* AD / AD.flow: carry each packet's OPoT TLV across the NF */

/* Inner type 143: an Ethernet frame (RFC 8986 section 10.1, "Ethernet",
 * as H.Encaps.L2 / End.DX2 carry it). End.AS and End.AD only.
 */
#ifndef IPPROTO_ETHERNET
#define IPPROTO_ETHERNET 143
#endif

/* Per-SID statistics (Go: proxydp stat names). */
#define PS_TO_NF 0        /* sent to the NF */
#define PS_FROM_NF 1      /* came back from the NF and forwarded into SR */
#define PS_CACHE_HIT 2    /* AD / AD.flow: header found on the way back */
#define PS_CACHE_MISS 3   /* AD / AD.flow: none (or idle) on the way back */
#define PS_CACHE_FULL 4   /* AD.flow: insert refused */
#define PS_CACHE_WRITE 5  /* AD / AD.flow: header (re)written */
#define PS_WRONG_INNER 6  /* inner type / family not the SID's */
#define PS_SL 7           /* SRH missing, malformed or SL = 0 */
#define PS_TTL 8          /* hop limit / TTL exhausted (on the way back; End.AD/AD.flow/AM: also on the way in) */
#define PS_STACK 9        /* from the NF, rewritten, handed to the stack (FIB) */
#define PS_CONTROL 10     /* IFACE-IN control traffic passed to the stack */
#define PS_DROP 11        /* other drops */
#define PS_HDR_WRITE 12   /* AD.flow: a header slot written */
#define PS_HDR_REPLACE 13 /* AD.flow: a slot's other header replaced (its flows miss) */
#define PS_OPOT_SAVE 14   /* AD / AD.flow: a packet's OPoT TLV kept for its way back */
#define PS_OPOT_MISS 15   /* AD / AD.flow: a packet from the NF with no kept TLV */
#define PROXY_STAT_SLOTS 16

struct proxy_sid {
	struct in6_addr sid;
	struct in6_addr nf6;
	__u64 flow_timeout_ns; /* AD.flow: idle timeout, 0 = none */
	__be32 nf4;
	__u32 behavior;
	__u32 out_ifindex;
	__u32 in_ifindex;
	__u32 inner; /* 41 or 4 (AS, AD, AD.flow) */
	__u32 flags;
	__u32 hdr_len; /* End.AS: bytes of hdr */
	__u32 pad;
	__u8 hdr[PROXY_HDR_MAX]; /* End.AS: outer IPv6 (+ SRH), payload length 0 */
};

struct proxy_hdr {
	__u64 gen; /* AD.flow header slot: its generation; End.AD: 0 */
	__u32 len;
	/* OPoT (PROXY_F_OPOT): 1 + the offset in hdr of the OPoT TLV, whose
	 * slot, RND and CML are zeroed here (they are the packet's, kept in
	 * proxy_opot); 0: the stack has none.
	 */
	__u32 tlv;
	__u8 hdr[PROXY_HDR_MAX];
};

struct proxy_flow {
	__u64 last_ns; /* last use */
	__u32 slot;    /* proxy_hslots key */
	__u32 gen;     /* the slot's generation when the flow took it */
	__be32 word0;  /* outer IPv6 version, traffic class, flow label */
	__u32 pad;
};

struct proxy_flow_key {
	__u32 sid;    /* SID entry index */
	__u8 family;  /* 4 or 6 */
	__u8 proto;
	__u16 pad;
	__be16 sport;
	__be16 dport;
	__u32 pad2;
	struct in6_addr src; /* IPv4: first 4 bytes */
	struct in6_addr dst;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, struct proxy_sid);
} proxy_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, struct in6_addr);
	__type(value, __u32);
} proxy_sids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, __u32);
} proxy_nf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, __u32);
} proxy_sr_ifs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS);
	__type(key, __u32);
	__type(value, struct proxy_hdr);
} proxy_ad_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_FLOWS_DEFAULT); /* the loader sets Options.FlowCapacity */
	__type(key, struct proxy_flow_key);
	__type(value, struct proxy_flow);
} proxy_flows SEC(".maps");

/* proxy_flow_sweep_at: per CPU, the jiffy of the last sweep of a full
 * proxy_flows (proxy_flow_room).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} proxy_flow_sweep_at SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROXY_MAX_SIDS * PROXY_HDR_SLOTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct proxy_hdr);
} proxy_hslots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROXY_MAX_SIDS * PROXY_HDR_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} proxy_hgen SEC(".maps");

/* proxy_opot_key names one inner packet on both sides of the legacy NF
 * (proxy_opot_key_of): everything a forwarding NF leaves alone, nothing
 * it changes (hop limit / TTL, the IPv4 header checksum).
 */
struct proxy_opot_key {
	__u32 sid;     /* SID entry index */
	__u8 family;   /* 4 or 6 */
	__u8 proto;    /* IPv6 next header / IPv4 protocol */
	__be16 len;    /* IPv6 payload length / IPv4 total length */
	__be32 id;     /* IPv6: flow label; IPv4: identification + fragment word */
	__u16 l4len;   /* bytes of l4 taken: 16, 8 or 0 */
	__u16 seq;     /* 0: the first kept TLV of the key; 1, 2, ...: identical packets queued behind it */
	struct in6_addr src; /* IPv4: first 4 bytes */
	struct in6_addr dst;
	__u8 l4[16];   /* the first bytes after the IP header: ports, TCP seq/ack */
} __attribute__((aligned(8))); /* read as eight 64-bit words (proxy_opot_slot_of) */

_Static_assert(sizeof(struct proxy_opot_key) == 64, "proxy_opot_key is eight 64-bit words");

struct proxy_opot_tlv {
	__u8 b[OPOT_TLV_LEN];
} __attribute__((aligned(8))); /* RND and CML 8-byte aligned on the stack (opot_transit_tlv) */

#define PROXY_OPOT_PENDING 65536

/* Kept OPoT TLVs, first level: a table of slots indexed by a hash of
 * the key, claimed and given back with compare-and-swap on the slot's
 * state word, so a packet that finds its slot free costs no map insert
 * or delete on either way. state = generation << 2 | PROXY_SLOT_*; the
 * generation grows with every fill, so a slot taken and filled again
 * between a reader's look and its commit fails the commit. A full slot
 * older than cfg_opot_stale_ns (its packet presumably dropped by the
 * NF) may be given to another packet; a fresh one is not: the packet
 * goes to proxy_opot (below) instead. docs/proxy.md "OPoT through a
 * proxy".
 */
#define PROXY_OPOT_SLOT_BITS 14
#define PROXY_OPOT_SLOTS (1 << PROXY_OPOT_SLOT_BITS)
/* Age of a full slot that another packet may take (Go:
 * proxydp.Options.OPoTStale; default 1 s).
 */
SRCHAIN_CONFIG(__u64, cfg_opot_stale_ns, 1000000000ULL);
#define PROXY_SLOT_FREE 0
#define PROXY_SLOT_BUSY 1 /* being written; never left so (no exit in between) */
#define PROXY_SLOT_FULL 2
#define PROXY_SLOT_MASK 3ULL

struct proxy_opot_slot {
	__u64 state;
	__u64 born; /* bpf_ktime_get_coarse_ns() at the fill */
	struct proxy_opot_key k;
	struct proxy_opot_tlv v;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROXY_OPOT_SLOTS);
	__type(key, __u32);
	__type(value, struct proxy_opot_slot);
} proxy_opot_slots SEC(".maps");

/* OPoT TLVs of packets at the NF, second level: what found its slot
 * taken (a hash collision, or an identical packet's TLV in it). Written
 * on the way to the NF, taken (and deleted) on the way back. LRU: a
 * packet the NF dropped leaves an entry that the oldest-first eviction
 * reclaims.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PROXY_OPOT_PENDING);
	__type(key, struct proxy_opot_key);
	__type(value, struct proxy_opot_tlv);
} proxy_opot SEC(".maps");

/* Identical packets (every keyed byte the same) in flight at once: the
 * first keeps its TLV under seq 0, the others under seq tail, tail + 1,
 * ... of the key's queue (keyed with seq 0); the way back takes seq 0 if
 * it is there, else the queue's head. Identical packets are
 * interchangeable, so any one-to-one pairing of their TLVs is right.
 * 64-bit counters: the atomics that return a value need them at -mcpu=v1.
 */
struct proxy_opot_fifo {
	__u64 head; /* next seq to take */
	__u64 tail; /* next seq to give */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PROXY_OPOT_PENDING / 4);
	__type(key, struct proxy_opot_key);
	__type(value, struct proxy_opot_fifo);
} proxy_opot_q SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct proxy_hdr);
} proxy_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROXY_MAX_SIDS * PROXY_STAT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} proxy_stats SEC(".maps");

static __always_inline void proxy_count(__u32 idx, __u32 stat)
{
	__u32 key = (idx % PROXY_MAX_SIDS) * PROXY_STAT_SLOTS + stat;
	__u64 *v = bpf_map_lookup_elem(&proxy_stats, &key);

	if (v)
		*v += 1;
}

/* proxy_drop counts reason and the SID's stat and drops. */
static __always_inline int proxy_drop(__u32 idx, __u32 stat, __u32 reason)
{
	proxy_count(idx, stat);
	count_drop(reason);
	return TC_ACT_SHOT;
}

/* proxy_drop_xdp counts a drop of the XDP NF side, which happens only
 * after it committed to rewriting a frame it cannot finish.
 */
static __always_inline int proxy_drop_xdp(__u32 idx, __u32 reason)
{
	proxy_count(idx, PS_DROP);
	count_drop(reason);
	return XDP_DROP;
}

/* proxy_sl_stat is the stat of an SRH verdict. */
static __always_inline __u32 proxy_srh_stat(__u32 reason)
{
	return reason == DROP_PKT_TRUNCATED ? PS_DROP : PS_SL;
}

/* proxy_bound returns v as a 64-bit value the compiler knows nothing
 * about, so the range check that follows is done on the very register
 * the helper call then uses (else clang checks a copy and the verifier
 * sees an unbounded length).
 */
static __always_inline __u64 proxy_bound(__u32 v)
{
	__u64 n = v;

	asm volatile("" : "+r"(n));
	return n;
}

/* proxy_hdr_same compares two header stacks (lengths are multiples of 8:
 * IPv6 and every extension header are). A global function: verified
 * once, on its own, instead of at every call site with the caller's
 * states (its 64-step loop would multiply them).
 */
__attribute__((noinline)) int proxy_hdr_same(const struct proxy_hdr *a, const struct proxy_hdr *b)
{
	int i;

	if (!a || !b || a->len != b->len)
		return 0;
	for (i = 0; i < PROXY_HDR_MAX / 8; i++) {
		if ((__u32)i * 8 >= a->len)
			break;
		if (*(const __u64 *)&a->hdr[i * 8] != *(const __u64 *)&b->hdr[i * 8])
			return 0;
	}
	return 1;
}

/* proxy_hdr_hash hashes the header stack h (len bytes, a multiple of 8).
 * Go: proxydp hdrHash.
 */
static __always_inline __u64 proxy_hdr_hash(const struct proxy_hdr *h)
{
	__u64 x = (__u64)h->len * 0x9e3779b97f4a7c15ULL;
	int i;

	for (i = 0; i < PROXY_HDR_MAX / 8; i++) {
		if ((__u32)i * 8 >= h->len)
			break;
		x ^= *(const __u64 *)&h->hdr[i * 8];
		x *= 0x9e3779b97f4a7c15ULL;
		x ^= x >> 29;
	}
	return x ^ (x >> 32);
}

/* proxy_hslot_take finds or takes End.AD.flow's header slot of SID idx
 * for sc (first word zeroed) and fills f->slot and f->gen: a way of the
 * hash's bucket holding the same stack, else an empty way, else way
 * (hash >> 32) % PROXY_HDR_WAYS, replaced under a new generation.
 * Returns DROP_NONE or DROP_PROXY_CACHE_FULL. A global function
 * (verified once; its loops and calls stay out of the caller's states).
 */
__attribute__((noinline)) int proxy_hslot_take(struct proxy_hdr *sc, __u32 idx, struct proxy_flow *f)
{
	__u32 base, key, empty = PROXY_HDR_WAYS, w;
	__u64 *g;
	struct proxy_hdr *v;
	__u64 h;

	if (!sc || !f)
		return DROP_UNSUPPORTED;
	h = proxy_hdr_hash(sc);
	base = (idx % PROXY_MAX_SIDS) * PROXY_HDR_SLOTS + (__u32)(h % PROXY_HDR_BUCKETS) * PROXY_HDR_WAYS;
	for (w = 0; w < PROXY_HDR_WAYS; w++) {
		key = base + w;
		v = bpf_map_lookup_elem(&proxy_hslots, &key);
		if (!v) {
			if (empty == PROXY_HDR_WAYS)
				empty = w;
			continue;
		}
		if (proxy_hdr_same(v, sc)) {
			f->slot = key;
			f->gen = (__u32)v->gen;
			return DROP_NONE;
		}
	}
	if (empty == PROXY_HDR_WAYS) {
		empty = (__u32)(h >> 32) % PROXY_HDR_WAYS;
		proxy_count(idx, PS_HDR_REPLACE);
	}
	key = base + empty;
	g = bpf_map_lookup_elem(&proxy_hgen, &key);
	if (!g)
		return DROP_UNSUPPORTED;
	sc->gen = (__u32)(__sync_fetch_and_add(g, 1) + 1);
	if (bpf_map_update_elem(&proxy_hslots, &key, sc, BPF_ANY))
		return DROP_PROXY_CACHE_FULL;
	proxy_count(idx, PS_HDR_WRITE);
	f->slot = key;
	f->gen = (__u32)sc->gen;
	return DROP_NONE;
}

/* proxy_flow_touch refreshes a flow's last use when it is older than
 * 1/1024 of the SID's idle timeout (none: never read, never written):
 * a busy flow's entry is not dirtied by every packet, and a flow expires
 * at most 0.1% of the timeout early. Go: Model touch.
 */
static __always_inline void proxy_flow_touch(struct proxy_flow *fl, const struct proxy_sid *s, __u64 now)
{
	if (s->flow_timeout_ns && now - fl->last_ns > s->flow_timeout_ns >> 10)
		fl->last_ns = now;
}

/* proxy_flow_idle_cb deletes a flow idle longer than its SID's timeout
 * (bpf_for_each_map_elem callback; a SID without timeout keeps its flows).
 */
static long proxy_flow_idle_cb(void *map, struct proxy_flow_key *k, struct proxy_flow *f, __u64 *now)
{
	__u32 idx = k->sid;
	struct proxy_sid *s = bpf_map_lookup_elem(&proxy_cfg, &idx);

	if (!s || !s->behavior || (s->flow_timeout_ns && *now - f->last_ns > s->flow_timeout_ns))
		bpf_map_delete_elem(map, k);
	return 0;
}

/* proxy_flow_room makes room in a full proxy_flows (issue 9: "a full
 * cache evicts idle entries, else drops with a counter"): it deletes the
 * flows idle beyond their SID's timeout (and those of removed SIDs), at
 * most once per jiffy per CPU, so a cache full of live flows costs one
 * walk every 4 ms, not one per packet. Returns whether it swept. A global
 * function: the walk's callback is verified once.
 */
__attribute__((noinline)) int proxy_flow_room(__u64 now)
{
	__u32 zero = 0;
	__u64 *at = bpf_map_lookup_elem(&proxy_flow_sweep_at, &zero);
	__u64 j = bpf_jiffies64();

	if (!at || *at == j)
		return 0;
	*at = j;
	bpf_for_each_map_elem(&proxy_flows, proxy_flow_idle_cb, &now, 0);
	return 1;
}

/* proxy_flow_key_of fills k from the inner IPv4/IPv6 packet at off. */
static __always_inline __u32 proxy_flow_key_of(const struct pkt *p, __u32 off, __u32 inner,
					       struct proxy_flow_key *k)
{
	__u32 l4off;
	int ports = 0;

	off &= CTX_MAX_ROOM - 1;
	if (inner == IPPROTO_IPV6) {
		struct ipv6hdr *ip6 = pkt_ptr(p, off, sizeof(*ip6));

		if (!ip6)
			return DROP_PKT_TRUNCATED;
		k->family = 6;
		k->proto = ip6->nexthdr;
		ipv6_addr_copy(&k->src, &ip6->saddr);
		ipv6_addr_copy(&k->dst, &ip6->daddr);
		l4off = off + sizeof(*ip6);
		ports = 1;
	} else {
		struct iphdr *ip4 = pkt_ptr(p, off, sizeof(*ip4));

		if (!ip4)
			return DROP_PKT_TRUNCATED;
		k->family = 4;
		k->proto = ip4->protocol;
		k->src.in6_u.u6_addr32[0] = ip4->saddr;
		k->dst.in6_u.u6_addr32[0] = ip4->daddr;
		l4off = off + (ip4->ihl & 0xf) * 4;
		/* MF or fragment offset: a fragment, no ports. */
		ports = !(ip4->frag_off & bpf_htons(0x3fff));
	}
	if (ports && (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP)) {
		__be16 *pp = pkt_ptr(p, l4off & (2 * CTX_MAX_ROOM - 1), 4);

		if (!pp)
			return DROP_PKT_TRUNCATED;
		k->sport = pp[0];
		k->dport = pp[1];
	}
	return DROP_NONE;
}

/* proxy_opot_key_of fills k (k->sid set by the caller) from the inner
 * IPv4/IPv6 packet at off: addresses, protocol, IP length, the IPv6 flow
 * label or the IPv4 identification and fragment word, and the first 16
 * bytes after the fixed IP header (8, or none, when the IP length says
 * the packet is shorter: read with the load helper, so the key does not
 * depend on how much of the packet is linear). For TCP that is ports,
 * sequence and acknowledgment numbers, flags and window: a segment in
 * flight is told apart from every other. Extension headers are not
 * walked (their bytes are the "l4" bytes then).
 */
static __always_inline __u32 proxy_opot_key_of(struct pctx *c, const int kind, __u32 off, __u32 inner,
					       struct proxy_opot_key *k)
{
	__u32 l4off, end;
	long lr = 0;

	if (inner == IPPROTO_ETHERNET)
		return DROP_UNSUPPORTED; /* no OPoT over L2 services (docs/proxy.md) */
	off &= CTX_MAX_ROOM - 1;
	if (inner == IPPROTO_IPV6) {
		struct ipv6hdr *ip6 = pkt_ptr(&c->p, off, sizeof(*ip6));

		if (!ip6)
			return DROP_PKT_TRUNCATED;
		k->family = 6;
		k->proto = ip6->nexthdr;
		k->len = ip6->payload_len;
		k->id = *(__be32 *)ip6 & bpf_htonl(0x000fffff);
		ipv6_addr_copy(&k->src, &ip6->saddr);
		ipv6_addr_copy(&k->dst, &ip6->daddr);
		l4off = off + sizeof(*ip6);
		end = l4off + bpf_ntohs(ip6->payload_len);
	} else {
		struct iphdr *ip4 = pkt_ptr(&c->p, off, sizeof(*ip4));

		if (!ip4)
			return DROP_PKT_TRUNCATED;
		k->family = 4;
		k->proto = ip4->protocol;
		k->len = ip4->tot_len;
		k->id = ((__be32)ip4->frag_off << 16) | ip4->id;
		k->src.in6_u.u6_addr32[0] = ip4->saddr;
		k->dst.in6_u.u6_addr32[0] = ip4->daddr;
		l4off = off + (ip4->ihl & 0xf) * 4;
		end = off + bpf_ntohs(ip4->tot_len);
	}
	if (end >= l4off + 16)
		k->l4len = 16;
	else if (end >= l4off + 8)
		k->l4len = 8;
	if (k->l4len == 16) {
		/* In the linear part (the usual case): read in place. */
		__u8 *l4 = pkt_ptr(&c->p, l4off & (2 * CTX_MAX_ROOM - 1), 16);

		if (l4)
			__builtin_memcpy(k->l4, l4, 16);
		else
			lr = kind == CTX_XDP ? bpf_xdp_load_bytes(c->ctx, l4off, k->l4, 16) :
					       bpf_skb_load_bytes(c->ctx, l4off, k->l4, 16);
	} else if (k->l4len == 8)
		lr = kind == CTX_XDP ? bpf_xdp_load_bytes(c->ctx, l4off, k->l4, 8) :
				       bpf_skb_load_bytes(c->ctx, l4off, k->l4, 8);
	return lr ? DROP_PKT_TRUNCATED : DROP_NONE;
}

/* proxy_opot_slot_of is k's slot in proxy_opot_slots: a multiplicative
 * hash of its eight words, top bits.
 */
static __always_inline __u32 proxy_opot_slot_of(const struct proxy_opot_key *k)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = 0;

#pragma unroll
	for (int i = 0; i < 8; i++)
		h = (h ^ w[i]) * 0x9e3779b97f4a7c15ULL;
	return h >> (64 - PROXY_OPOT_SLOT_BITS);
}

static __always_inline int proxy_opot_key_eq(const struct proxy_opot_key *a, const struct proxy_opot_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 d = 0;

#pragma unroll
	for (int i = 0; i < 8; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

/* proxy_opot_slot_put keeps v under k in k's slot if the slot is free
 * or stale. Returns 0, or -1: the slot holds a live TLV (or is being
 * written) and the caller keeps v in proxy_opot. A global function (as
 * proxy_opot_slot_find): verified once, not on every path of its callers.
 */
__attribute__((noinline)) int proxy_opot_slot_put(const struct proxy_opot_key *k, const struct proxy_opot_tlv *v)
{
	__u32 i;
	struct proxy_opot_slot *e;
	__u64 now = bpf_ktime_get_coarse_ns(), s, busy;

	if (!k || !v)
		return -1;
	i = proxy_opot_slot_of(k);
	e = bpf_map_lookup_elem(&proxy_opot_slots, &i);
	if (!e)
		return -1;
	/* An atomic read (a full barrier): born, read after it, is the
	 * fill's that this state is from, on weakly ordered CPUs too.
	 */
	s = __sync_fetch_and_add(&e->state, 0);
	if ((s & PROXY_SLOT_MASK) == PROXY_SLOT_BUSY)
		return -1;
	if ((s & PROXY_SLOT_MASK) == PROXY_SLOT_FULL && now - e->born < cfg_opot_stale_ns)
		return -1;
	busy = (s & ~PROXY_SLOT_MASK) | PROXY_SLOT_BUSY;
	if (__sync_val_compare_and_swap(&e->state, s, busy) != s)
		return -1;
	__builtin_memcpy(&e->k, k, sizeof(*k));
	__builtin_memcpy(&e->v, v, sizeof(*v));
	e->born = now;
	/* A full barrier: a reader that sees FULL sees the key and TLV. */
	__sync_val_compare_and_swap(&e->state, busy, (s & ~PROXY_SLOT_MASK) + (1ULL << 2) + PROXY_SLOT_FULL);
	return 0;
}

/* proxy_opot_slot_find looks for k in its slot: copies the TLV to out,
 * the state it saw to *state, and returns 1 + the slot's index for
 * proxy_opot_take; 0: not there. The state is read with an atomic (a
 * full barrier), so the key and TLV read after it are at least as new;
 * the take's compare-and-swap on the same state then proves nobody took
 * or refilled the slot in between.
 */
__attribute__((noinline)) int proxy_opot_slot_find(const struct proxy_opot_key *k, struct proxy_opot_tlv *out,
						   __u64 *state)
{
	__u32 i;
	struct proxy_opot_slot *e;
	__u64 s;

	if (!k || !out || !state)
		return 0;
	i = proxy_opot_slot_of(k);
	e = bpf_map_lookup_elem(&proxy_opot_slots, &i);
	if (!e)
		return 0;
	s = __sync_fetch_and_add(&e->state, 0);
	if ((s & PROXY_SLOT_MASK) != PROXY_SLOT_FULL || !proxy_opot_key_eq(&e->k, k))
		return 0;
	__builtin_memcpy(out->b, e->v.b, OPOT_TLV_LEN);
	*state = s;
	return i + 1;
}

/* cfg_opot: non-zero when the loader gave the proxy the node's OPoT maps
 * (proxydp.Options.OPoT): the proxy then does the node's OPoT transit
 * itself for the chains whose entry says so (proxy_opot_hop).
 */
SRCHAIN_CONFIG(__u32, cfg_opot, 0);

/* proxy_opot_hop does this node's OPoT transit (seed 003 Algorithm 1
 * lines 19-21; issue 11 "in the SR proxy on behalf of an SR-unaware NF")
 * for chain idx on v, the TLV the proxy keeps while its packet is at the
 * NF. A global function on a stack copy: the arithmetic is verified once,
 * for tc and XDP alike, not on every path of proxy_sr.
 */
__attribute__((noinline)) int proxy_opot_hop(__u32 idx, struct proxy_opot_tlv *v)
{
	struct opot_rewrite rw;

	if (!v)
		return 0;
	opot_transit_tlv(v->b, idx, &rw);
	return 0;
}

/* proxy_opot_save keeps the OPoT TLV of an SR packet for its way back
 * from the NF (End.AD / AD.flow with PROXY_F_OPOT; docs/proxy.md "OPoT
 * through a proxy"): the TLV, as the node's OPoT transit stage left it
 * or as proxy_opot_hop updates it, goes under the inner packet's key to
 * its slot, or when that is taken to proxy_opot (or the queue of an
 * identical packet's), and the cached copy sc gets the TLV's place and
 * its per-packet bytes (slot, RND, CML) zeroed, so packets of one flow
 * share one cached header. A packet without an OPoT TLV is not carried
 * (sc->tlv stays 0).
 */
static __always_inline __u32 proxy_opot_save(struct pctx *c, const int kind, __u32 idx, const struct srh_info *si,
					     __u32 inner_off, __u32 inner, struct proxy_hdr *sc)
{
	struct proxy_opot_key k = { .sid = idx };
	struct proxy_opot_tlv v;
	__u32 at = 0, rel, r;
	__u8 *tlv;
	__u64 n;

	if (opot_find(c, kind, si, &at))
		return DROP_NONE;
	tlv = opot_tlv(&c->p, at);
	if (!tlv || at < c->p.l3off)
		return DROP_PKT_TRUNCATED;
	__builtin_memcpy(v.b, tlv, OPOT_TLV_LEN);
	/* The transit is the proxy's when the node's OPoT driver marked the
	 * chain's entry for the program serving the SID (OPOT_CHAIN_IN_END:
	 * End.AD and End.AD.flow are End behaviours; docs/opot.md "Transit
	 * in the proxy"). The DA is still the proxy SID. Any other chain's
	 * TLV is kept as it came: a stage in front updated it, or the
	 * verifier will drop it. So is one the XDP OPoT stage in front
	 * updated while the entry was being marked (pipe_done).
	 */
	if (cfg_opot && !(kind == CTX_XDP && pipe_done(c->ctx, PIPE_DONE_OPOT))) {
		struct opot_chain *ch = opot_chain_of(&c->p, si, OPOT_ROLE_TRANSIT);

		if (ch && (ch->flags & OPOT_CHAIN_IN_END))
			proxy_opot_hop(ch->idx, &v);
	}
	rel = at - c->p.l3off;
	if (rel > PROXY_HDR_MAX - OPOT_TLV_LEN || rel + OPOT_TLV_LEN > sc->len)
		return DROP_UNSUPPORTED;
	r = proxy_opot_key_of(c, kind, inner_off, inner, &k);
	if (r)
		return r;
	if (proxy_opot_slot_put(&k, &v) && bpf_map_update_elem(&proxy_opot, &k, &v, BPF_NOEXIST)) {
		/* An identical packet's TLV is kept already: queue behind it. */
		struct proxy_opot_fifo z = { .head = 1, .tail = 1 }, *q;

		q = bpf_map_lookup_elem(&proxy_opot_q, &k);
		if (!q) {
			bpf_map_update_elem(&proxy_opot_q, &k, &z, BPF_NOEXIST);
			q = bpf_map_lookup_elem(&proxy_opot_q, &k);
			if (!q)
				return DROP_PROXY_CACHE_FULL;
		}
		k.seq = (__u16)__sync_fetch_and_add(&q->tail, 1);
		if (!k.seq || bpf_map_update_elem(&proxy_opot, &k, &v, BPF_ANY))
			return DROP_PROXY_CACHE_FULL;
	}
	n = proxy_bound(rel);
	if (n > PROXY_HDR_MAX - OPOT_TLV_LEN)
		return DROP_UNSUPPORTED;
	sc->hdr[n + OPOT_OFF_SLOT] = 0;
	__builtin_memset(&sc->hdr[n + OPOT_OFF_RND], 0, OPOT_TLV_LEN - OPOT_OFF_RND);
	sc->tlv = n + 1;
	proxy_count(idx, PS_OPOT_SAVE);
	return DROP_NONE;
}

/* proxy_decap_l2 strips the outer Ethernet header and hlen bytes of
 * outer header stack in front of an inner Ethernet frame (tc): the room
 * after the MAC header goes (the outer stack and the inner frame's
 * header), then the inner frame's header is written over the outer one.
 * skb->protocol stays IPv6 (no helper changes it to another type): the
 * frame only leaves by bpf_redirect to IFACE-OUT, whose receiver reads
 * the type from the frame. A GSO packet is not split here (an L2 GSO
 * stack has no segmenter behind a stripped SRv6 header): dropped,
 * DROP_UNSUPPORTED.
 */
static __always_inline __u32 proxy_decap_l2(struct pctx *c, __u32 hlen)
{
	struct __sk_buff *skb = c->ctx;
	struct ethhdr in;

	if (skb->gso_segs > 1 || hlen < sizeof(struct ipv6hdr) || hlen >= CTX_MAX_ROOM)
		return DROP_UNSUPPORTED;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr) + hlen, &in, sizeof(in)))
		return DROP_PKT_TRUNCATED;
	if (bpf_skb_adjust_room(skb, -(__s32)(hlen + sizeof(struct ethhdr)), BPF_ADJ_ROOM_MAC, 0))
		return DROP_ADJUST_ROOM;
	if (bpf_skb_store_bytes(skb, 0, &in, sizeof(in), 0))
		return DROP_ADJUST_ROOM;
	ctx_reload(c, CTX_TC);
	return DROP_NONE;
}

/* proxy_opot_put writes a kept OPoT TLV at rel bytes into the outer
 * header just pushed. A global function: on its own the store and its
 * checksum update cannot tangle with the caller's packet pointers.
 */
__attribute__((noinline)) int proxy_opot_put(struct __sk_buff *skb, __u32 rel, const struct proxy_opot_tlv *v)
{
	if (!skb || !v || rel > PROXY_HDR_MAX - OPOT_TLV_LEN)
		return -1;
	return bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + rel, v->b, OPOT_TLV_LEN, BPF_F_RECOMPUTE_CSUM) ? -1 : 0;
}

/* proxy_decap strips hlen bytes of outer header in front of an inner
 * packet of type nh (tc), and sets the Ethernet type. It first asks the
 * kernel to clear the skb's encapsulation marks (BPF_F_ADJ_ROOM_DECAP_IPXIP6,
 * newer kernels) so the packet can be encapsulated again when the NF
 * sends it back; kernels without it decapsulate without.
 * BPF_F_ADJ_ROOM_FIXED_GSO: a GSO packet keeps its segment size. Without
 * it the kernel raises the segment size by hlen, so every segment the
 * NF's link carries is hlen bytes larger than the sender made it and
 * larger than the link (1500-byte segments became 1580: the NF's
 * forwarding dropped every GSO packet with "fragmentation needed" and
 * TCP crawled at ~0.2 Mbit/s).
 */
#ifndef BPF_F_ADJ_ROOM_DECAP_IPXIP6
#define BPF_F_ADJ_ROOM_DECAP_IPXIP6 (1ULL << 12)
#endif
static __always_inline __u32 proxy_decap(struct pctx *c, __u32 hlen, __u32 nh)
{
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO |
		      (nh == IPPROTO_IPV6 ? BPF_F_ADJ_ROOM_DECAP_L3_IPV6 : BPF_F_ADJ_ROOM_DECAP_L3_IPV4);
	struct ethhdr *eth;

	if (hlen < sizeof(struct ipv6hdr) || hlen >= CTX_MAX_ROOM)
		return DROP_UNSUPPORTED;
	if (bpf_skb_adjust_room(c->ctx, -(__s32)hlen, BPF_ADJ_ROOM_MAC, flags | BPF_F_ADJ_ROOM_DECAP_IPXIP6) &&
	    bpf_skb_adjust_room(c->ctx, -(__s32)hlen, BPF_ADJ_ROOM_MAC, flags))
		return DROP_ADJUST_ROOM;
	ctx_reload(c, CTX_TC);
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!eth)
		return DROP_PKT_TRUNCATED;
	eth->h_proto = nh == IPPROTO_IPV6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP);
	return DROP_NONE;
}

/* proxy_push puts the header stack hdr (len bytes, payload length 0 in
 * it) in front of the inner packet and fixes the payload length and the
 * Ethernet type.
 *
 * GSO packets (TSO/GSO on the hosts, GRO on the way): the room is made
 * with BPF_F_ADJ_ROOM_FIXED_GSO, so the segment size stays the one the
 * NF's link carried and every segment grows by exactly len, as a
 * non-GSO packet of the same size does (the SR links need that room:
 * docs/proxy.md "MTU and GSO"). proxy_forward checks the segments
 * against the outgoing link.
 *
 * An skb still marked encapsulated (-EALREADY from the ENCAP flag: the
 * sender's seg6 encapsulation set the mark and the SR -> NF
 * decapsulation cannot clear it on this kernel) gets the room without
 * the flag. Its inner header offsets and tunnel GSO type are those of
 * the original outer header, so they hold again once the outer header
 * is back; but skb->protocol stays the inner family. An IPv4 packet must
 * leave as IPv6 (the stack, software segmentation and neighbour output
 * go by skb->protocol): the room is made PROXY_PROTO_PAD bytes larger
 * and those bytes are taken away again with BPF_F_ADJ_ROOM_DECAP_L3_IPV6,
 * whose only other effect is skb->protocol = IPv6. (bpf_skb_change_proto
 * would retype a GSO packet's TCPv4 segments as TCPv6, which its inner
 * IPv4 segmentation then refuses.)
 */
#define PROXY_PROTO_PAD 8
static __always_inline __u32 proxy_push(struct pctx *c, const __u8 *hdr, __u32 len)
{
	struct __sk_buff *skb = c->ctx;
	__u32 inner = skb->len - sizeof(struct ethhdr);
	__be16 v;

	__u64 n = proxy_bound(len);

	if (n < sizeof(struct ipv6hdr) || n > PROXY_HDR_MAX)
		return DROP_UNSUPPORTED;
	if (inner + len - sizeof(struct ipv6hdr) > 0xffff)
		return DROP_UNSUPPORTED;
	if (bpf_skb_adjust_room(skb, len, BPF_ADJ_ROOM_MAC,
				BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV6)) {
		__u32 pad = skb->protocol == bpf_htons(ETH_P_IPV6) ? 0 : PROXY_PROTO_PAD;

		if (bpf_skb_adjust_room(skb, len + pad, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO))
			return DROP_ADJUST_ROOM;
		if (pad && bpf_skb_adjust_room(skb, -(__s32)pad, BPF_ADJ_ROOM_MAC,
					       BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_DECAP_L3_IPV6))
			return DROP_ADJUST_ROOM;
	}
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr), hdr, n, BPF_F_RECOMPUTE_CSUM))
		return DROP_ADJUST_ROOM;
	v = bpf_htons(inner + len - sizeof(struct ipv6hdr));
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + 4, &v, sizeof(v), BPF_F_RECOMPUTE_CSUM))
		return DROP_ADJUST_ROOM;
	v = bpf_htons(ETH_P_IPV6);
	if (bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_proto), &v, sizeof(v), 0))
		return DROP_ADJUST_ROOM;
	ctx_reload(c, CTX_TC);
	return DROP_NONE;
}

/* proxy_srh_parse is srh_parse on the skb, and proxy_outer_walk walks
 * every extension header of the outer IPv6 header (what srv6_decap
 * strips), as global functions: verified once, and their many exit
 * states (one per header layout) do not multiply the caller's. The
 * caller gets the results as unknown scalars and bounds them again.
 */
__attribute__((noinline)) int proxy_srh_parse(struct __sk_buff *skb, struct srh_info *si)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };

	if (!skb || !si)
		return DROP_UNSUPPORTED;
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	return srh_parse(&p, si);
}

__attribute__((noinline)) int proxy_outer_walk(struct __sk_buff *skb, struct ipv6_walk *w)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct ipv6hdr *ip6;

	if (!skb || !w)
		return DROP_UNSUPPORTED;
	p.data = (void *)(long)skb->data;
	p.data_end = (void *)(long)skb->data_end;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return DROP_PKT_TRUNCATED;
	w->nh = ip6->nexthdr;
	w->off = p.l3off + sizeof(*ip6);
	w->rtoff = 0;
	w->nonfirst = 0;
	return ipv6_walk(&p, w, IPV6_WALK_ALL, SRV6_DECAP_MAX_EXT, CTX_MAX_ROOM, NULL);
}

/* The XDP twins of the two: a global function's context argument has one
 * program type, and packet pointers cannot be passed to one instead.
 */
__attribute__((noinline)) int proxy_srh_parse_xdp(struct xdp_md *ctx, struct srh_info *si)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };

	if (!ctx || !si)
		return DROP_UNSUPPORTED;
	p.data = (void *)(long)ctx->data;
	p.data_end = (void *)(long)ctx->data_end;
	return srh_parse(&p, si);
}

__attribute__((noinline)) int proxy_outer_walk_xdp(struct xdp_md *ctx, struct ipv6_walk *w)
{
	struct pkt p = { .l3off = sizeof(struct ethhdr) };
	struct ipv6hdr *ip6;

	if (!ctx || !w)
		return DROP_UNSUPPORTED;
	p.data = (void *)(long)ctx->data;
	p.data_end = (void *)(long)ctx->data_end;
	ip6 = pkt_ptr(&p, p.l3off, sizeof(*ip6));
	if (!ip6)
		return DROP_PKT_TRUNCATED;
	w->nh = ip6->nexthdr;
	w->off = p.l3off + sizeof(*ip6);
	w->rtoff = 0;
	w->nonfirst = 0;
	return ipv6_walk(&p, w, IPV6_WALK_ALL, SRV6_DECAP_MAX_EXT, CTX_MAX_ROOM, NULL);
}

/* proxy_len_bad reports an IPv6 payload length beyond the frame (the
 * kernel's ipv6_rcv drops those; tc runs before it). Trailing bytes
 * (Ethernet padding) are allowed.
 */
static __always_inline int proxy_len_bad(const struct __sk_buff *skb, const struct ipv6hdr *ip6)
{
	return sizeof(struct ethhdr) + sizeof(*ip6) + bpf_ntohs(ip6->payload_len) > skb->len;
}

/* proxy_redirect_nf sends the packet out of IFACE-OUT to the NF's next
 * hop of family nh (41: IPv6, 4: IPv4); none configured: the packet's
 * own destination, resolved on that link.
 */
static __always_inline int proxy_redirect_nf(const struct proxy_sid *s, __u32 nh)
{
	struct bpf_redir_neigh rn = {};

	if (nh == IPPROTO_IPIP && (s->flags & PROXY_F_NF4)) {
		rn.nh_family = AF_INET;
		rn.ipv4_nh = s->nf4;
		return bpf_redirect_neigh(s->out_ifindex, &rn, sizeof(rn), 0);
	}
	if (nh == IPPROTO_IPV6 && (s->flags & PROXY_F_NF6)) {
		rn.nh_family = AF_INET6;
		ipv6_addr_copy((struct in6_addr *)rn.ipv6_nh, &s->nf6);
		return bpf_redirect_neigh(s->out_ifindex, &rn, sizeof(rn), 0);
	}
	return bpf_redirect_neigh(s->out_ifindex, NULL, 0, 0);
}

/* proxy_fail ends an SR -> NF packet the program does not forward: tc
 * drops it, counted; XDP hands it to tc untouched (the XDP twin never
 * drops: tc decides and counts, so each reason is counted once).
 */
static __always_inline int proxy_fail(const int kind, __u32 idx, __u32 stat, __u32 reason)
{
	if (kind == CTX_XDP)
		return XDP_PASS;
	return proxy_drop(idx, stat, reason);
}

/* The XDP twins' FIB cache (seed 001's "SR cache" in software): per CPU,
 * per SID and direction (index * 2: to the NF, + 1: back into SR), the
 * result of the last successful FIB lookup of one destination. It is
 * used only within the jiffy it was filled in (CONFIG_HZ 250: 4 ms), so
 * a route or neighbour change reaches the twins within a jiffy, and for
 * packets no longer than one the lookup passed (the MTU check). Its key
 * is everything the lookup reads from the packet (destination, source,
 * flow label, next header: a multipath route hashes them), so a hit is
 * the lookup's own answer; packets of many flows through one SID miss
 * and look up (one entry per slot: the last flow's).
 */
struct proxy_fibc_key {
	__u8 dst[16];
	__u8 src[16];
	__be32 flow; /* flow label (IPv6), 0 for the NF's address */
	__u32 proto;
};

struct proxy_fibc {
	__u64 jiffies;
	struct proxy_fibc_key k;
	__u32 ifindex;
	__u32 max_len;
	__u8 smac[ETH_ALEN];
	__u8 dmac[ETH_ALEN];
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROXY_MAX_SIDS * 2);
	__type(key, __u32);
	__type(value, struct proxy_fibc);
} proxy_fibc SEC(".maps");

/* proxy_fibc_same compares two cache keys (40 bytes, 8-byte words). */
static __always_inline int proxy_fibc_same(const struct proxy_fibc_key *a, const struct proxy_fibc_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

_Static_assert(sizeof(struct proxy_fibc_key) == 40, "proxy_fibc_same compares 5 words");

/* proxy_fibc_get fills params' egress from the cache slot when it holds
 * k from this jiffy for a packet of len bytes; 0 on a hit.
 */
static __always_inline int proxy_fibc_get(__u32 slot, const struct proxy_fibc_key *k, __u32 len,
					  struct bpf_fib_lookup *params)
{
	struct proxy_fibc *e = bpf_map_lookup_elem(&proxy_fibc, &slot);

	if (!e || e->jiffies != bpf_jiffies64() || len > e->max_len || !proxy_fibc_same(&e->k, k))
		return -1;
	params->ifindex = e->ifindex;
	__builtin_memcpy(params->smac, e->smac, ETH_ALEN);
	__builtin_memcpy(params->dmac, e->dmac, ETH_ALEN);
	return 0;
}

/* proxy_fibc_put stores a successful lookup of k for len bytes. */
static __always_inline void proxy_fibc_put(__u32 slot, const struct proxy_fibc_key *k, __u32 len,
					   const struct bpf_fib_lookup *params)
{
	struct proxy_fibc *e = bpf_map_lookup_elem(&proxy_fibc, &slot);
	__u64 now = bpf_jiffies64();

	if (!e)
		return;
	if (e->jiffies != now || !proxy_fibc_same(&e->k, k) || e->ifindex != params->ifindex)
		e->max_len = 0;
	e->jiffies = now;
	e->k = *k;
	e->ifindex = params->ifindex;
	if (len > e->max_len)
		e->max_len = len;
	__builtin_memcpy(e->smac, params->smac, ETH_ALEN);
	__builtin_memcpy(e->dmac, params->dmac, ETH_ALEN);
}

/* proxy_xdp_nf_fib (XDP) resolves the NF's next hop of family nh with a
 * FIB lookup for a packet of len bytes (no next hop configured: -1).
 * The route must leave through IFACE-OUT. Returns 0 and params filled,
 * or -1: the packet goes to tc (bpf_redirect_neigh does it there).
 */
static __always_inline int proxy_xdp_nf_fib(struct xdp_md *ctx, __u32 idx, const struct proxy_sid *s, __u32 nh,
					    __u32 len, struct bpf_fib_lookup *params)
{
	__u32 slot = (idx % PROXY_MAX_SIDS) * 2;
	struct proxy_fibc_key k = {};
	long rc;

	__builtin_memset(params, 0, sizeof(*params));
	if (nh == IPPROTO_IPIP && (s->flags & PROXY_F_NF4)) {
		params->family = AF_INET;
		params->ipv4_dst = s->nf4;
		__builtin_memcpy(k.dst, &s->nf4, 4);
		k.proto = AF_INET;
	} else if (nh == IPPROTO_IPV6 && (s->flags & PROXY_F_NF6)) {
		params->family = AF_INET6;
		ipv6_addr_copy((struct in6_addr *)params->ipv6_dst, &s->nf6);
		__builtin_memcpy(k.dst, &s->nf6, 16);
		k.proto = AF_INET6;
	} else {
		return -1;
	}
	if (!proxy_fibc_get(slot, &k, len, params))
		return 0;
	params->tot_len = len;
	params->ifindex = ctx->ingress_ifindex;
	rc = bpf_fib_lookup(ctx, params, sizeof(*params), 0);
	fib_count(rc >= 0 && rc < FIB_SLOT_RET_MAX ? (__u32)rc : FIB_SLOT_MAX - 1);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || params->ifindex != s->out_ifindex)
		return -1;
	proxy_fibc_put(slot, &k, len, params);
	return 0;
}

/* proxy_sr handles a packet whose DA is the proxy SID idx (config s):
 * the SR -> NF direction, for tc (verdict TC_ACT_*) or XDP (XDP_*: the
 * XDP twin forwards what it can resolve with a FIB lookup of the NF's
 * address before writing anything, and passes the rest to tc).
 */
__attribute__((noinline)) int proxy_time_exceeded(struct __sk_buff *skb, __u32 idx, __u32 reason);

static __always_inline int proxy_sr(struct pctx *c, const int kind, __u32 idx, const struct proxy_sid *s)
{
	struct bpf_fib_lookup params;
	struct srh_info si = {};
	struct ipv6_walk w = {};
	struct ipv6hdr *ip6;
	__u32 beh = s->behavior, inner = s->inner, r, hlen;
	int have_srh = 0;

	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!ip6)
		return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
	if (sizeof(*ip6) + bpf_ntohs(ip6->payload_len) > ctx_l3_len(c, kind))
		return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);

	r = kind == CTX_XDP ? proxy_srh_parse_xdp(c->ctx, &si) : proxy_srh_parse(c->ctx, &si);
	if (r == DROP_NONE)
		have_srh = 1;
	else if (!(r == DROP_NO_SRH && beh == PROXY_BEH_AS))
		return proxy_fail(kind, idx, proxy_srh_stat(r), r);
	if (beh != PROXY_BEH_AS && si.sl == 0)
		return proxy_fail(kind, idx, PS_SL, DROP_SRH_SL_ZERO);
	/* End reads SRH[SL - 1]; SL = last entry + 1 is legal (RFC 8986
	 * 4.1), so SL - 1 <= last entry always holds after srh_validate.
	 */
	/* End's hop limit check (RFC 8986 4.1 S05-S07): the dynamic and
	 * masquerading proxies do End on the outer header (SL - 1, DA =
	 * SRH[SL]) and the packet goes on with it, so an exhausted hop limit
	 * ends here with an ICMPv6 Time Exceeded to the source, before
	 * anything is cached (End.AD would otherwise cache hop limit 1 and
	 * every packet the NF hands back would die at the next hop). End.AS
	 * terminates the outer header (like End.DX*, no check) and pushes a
	 * configured one on the way back. The XDP twin leaves it to tc.
	 */
	if (beh != PROXY_BEH_AS) {
		ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
		if (!ip6)
			return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
		if (ip6->hop_limit <= 1) {
			if (kind == CTX_XDP)
				return XDP_PASS;
			return proxy_time_exceeded(c->ctx, idx, DROP_HOP_LIMIT);
		}
	}

	if (beh == PROXY_BEH_AM || beh == PROXY_BEH_AM_NAT) {
		struct in6_addr *seg0 = srh_segment(&c->p, &si, 0);
		struct in6_addr before;
		struct ethhdr *eth;

		if (!seg0)
			return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
		if (kind == CTX_XDP &&
		    proxy_xdp_nf_fib(c->ctx, idx, s, IPPROTO_IPV6, ctx_l3_len(c, kind), &params))
			return XDP_PASS;
		ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
		eth = pkt_ptr(&c->p, 0, sizeof(*eth));
		if (!ip6 || !eth)
			return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
		ipv6_addr_copy(&before, &ip6->daddr);
		ipv6_addr_copy(&ip6->daddr, seg0);
		proxy_count(idx, PS_TO_NF);
		if (kind == CTX_XDP) {
			fib_set_macs(eth, &params);
			return bpf_redirect(params.ifindex, 0);
		}
		skb_csum_replace(c->ctx, &before, &ip6->daddr, sizeof(before));
		return proxy_redirect_nf(s, IPPROTO_IPV6);
	}

	/* The header after the outer IPv6 and all its extension headers. */
	r = kind == CTX_XDP ? proxy_outer_walk_xdp(c->ctx, &w) : proxy_outer_walk(c->ctx, &w);
	if (r)
		return proxy_fail(kind, idx, PS_DROP, r);
	if (w.nonfirst || w.nh != inner)
		return proxy_fail(kind, idx, PS_WRONG_INNER, DROP_PROXY_WRONG_INNER);
	hlen = w.off - c->p.l3off;
	if (hlen >= CTX_MAX_ROOM)
		return proxy_fail(kind, idx, PS_DROP, DROP_UNSUPPORTED);
	if (!pkt_ptr(&c->p, w.off & (2 * CTX_MAX_ROOM - 1),
		     inner == IPPROTO_IPV6 ? 40 : inner == IPPROTO_ETHERNET ? sizeof(struct ethhdr) : 20))
		return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
	if (beh == PROXY_BEH_AD || beh == PROXY_BEH_AD_FLOW) {
		if (!have_srh)
			return proxy_fail(kind, idx, PS_SL, DROP_NO_SRH);
		if (hlen > PROXY_HDR_MAX)
			return proxy_fail(kind, idx, PS_DROP, DROP_PROXY_HDR_TOO_BIG);
	}
	/* An Ethernet frame goes out of IFACE-OUT as it is (its own MACs):
	 * no next hop to resolve.
	 */
	if (kind == CTX_XDP && inner != IPPROTO_ETHERNET &&
	    proxy_xdp_nf_fib(c->ctx, idx, s, inner, ctx_l3_len(c, kind) - hlen, &params))
		return XDP_PASS;

	if (beh == PROXY_BEH_AD || beh == PROXY_BEH_AD_FLOW) {
		struct in6_addr *next;
		struct proxy_hdr *sc, *old;
		__u32 zero = 0, sloff;
		__u64 n;
		long lr;

		next = srh_segment(&c->p, &si, si.sl - 1);
		if (!next)
			return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
		sc = bpf_map_lookup_elem(&proxy_scratch, &zero);
		if (!sc)
			return proxy_fail(kind, idx, PS_DROP, DROP_UNSUPPORTED);
		n = proxy_bound(hlen);
		if (n < sizeof(*ip6) || n > PROXY_HDR_MAX)
			return proxy_fail(kind, idx, PS_DROP, DROP_UNSUPPORTED);
		if (kind == CTX_XDP)
			lr = bpf_xdp_load_bytes(c->ctx, c->p.l3off, sc->hdr, n);
		else
			lr = bpf_skb_load_bytes(c->ctx, c->p.l3off, sc->hdr, n);
		if (lr)
			return proxy_fail(kind, idx, PS_DROP, DROP_PKT_TRUNCATED);
		sc->len = hlen;
		sc->tlv = 0;
		sc->gen = 0;
		sc->hdr[4] = 0;
		sc->hdr[5] = 0;
		/* End on the cached copy: SL - 1, DA = SRH[SL - 1]. */
		sloff = (si.srhoff - c->p.l3off + 3) & (PROXY_HDR_MAX - 1);
		sc->hdr[sloff] = si.sl - 1;
		__builtin_memcpy(&sc->hdr[24], next, sizeof(*next));
		if (s->flags & PROXY_F_OPOT) {
			r = proxy_opot_save(c, kind, idx, &si, w.off, inner, sc);
			if (r)
				return proxy_fail(kind, idx, PS_DROP, r);
		}

		if (beh == PROXY_BEH_AD) {
			__u32 key = s->in_ifindex;

			old = bpf_map_lookup_elem(&proxy_ad_cache, &key);
			if (!old || !proxy_hdr_same(old, sc)) {
				if (bpf_map_update_elem(&proxy_ad_cache, &key, sc, BPF_ANY))
					return proxy_fail(kind, idx, PS_CACHE_FULL, DROP_PROXY_CACHE_FULL);
				proxy_count(idx, PS_CACHE_WRITE);
			}
		} else {
			struct proxy_flow_key k = { .sid = idx };
			struct proxy_flow nf = {}, *fl;
			__u64 now = bpf_ktime_get_ns();

			r = proxy_flow_key_of(&c->p, w.off, inner, &k);
			if (r)
				return proxy_fail(kind, idx, PS_DROP, r);
			/* The first word (version, traffic class, flow label)
			 * is the flow's; the slot holds the rest.
			 */
			nf.word0 = *(__be32 *)&sc->hdr[0];
			*(__be32 *)&sc->hdr[0] = 0;
			fl = bpf_map_lookup_elem(&proxy_flows, &k);
			if (fl && fl->word0 == nf.word0) {
				__u32 key = fl->slot;

				old = bpf_map_lookup_elem(&proxy_hslots, &key);
				if (old && (__u32)old->gen == fl->gen && proxy_hdr_same(old, sc)) {
					proxy_flow_touch(fl, s, now);
					goto flow_done;
				}
			}
			r = proxy_hslot_take(sc, idx, &nf);
			if (r)
				return proxy_fail(kind, idx, PS_CACHE_FULL, r);
			nf.last_ns = now;
			if (bpf_map_update_elem(&proxy_flows, &k, &nf, BPF_ANY) &&
			    (!proxy_flow_room(now) || bpf_map_update_elem(&proxy_flows, &k, &nf, BPF_ANY)))
				return proxy_fail(kind, idx, PS_CACHE_FULL, DROP_PROXY_CACHE_FULL);
			proxy_count(idx, PS_CACHE_WRITE);
flow_done:;
		}
	}

	if (kind == CTX_XDP) {
		struct ethhdr *eth;

		/* The outer headers go with the head; the Ethernet header is
		 * written afresh in front of the inner packet (its MACs come
		 * from the lookup, so only the type is needed). Nothing was
		 * written if adjust_head fails: tc can still serve the packet.
		 */
		if (inner == IPPROTO_ETHERNET) {
			/* The inner frame becomes the frame. */
			if (bpf_xdp_adjust_head(c->ctx, (int)(sizeof(struct ethhdr) + hlen)))
				return XDP_PASS;
			proxy_count(idx, PS_TO_NF);
			return bpf_redirect(s->out_ifindex, 0);
		}
		if (bpf_xdp_adjust_head(c->ctx, (int)hlen))
			return XDP_PASS;
		ctx_reload(c, CTX_XDP);
		eth = pkt_ptr(&c->p, 0, sizeof(*eth));
		if (!eth)
			return XDP_DROP;
		eth->h_proto = inner == IPPROTO_IPV6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP);
		fib_set_macs(eth, &params);
		proxy_count(idx, PS_TO_NF);
		return bpf_redirect(params.ifindex, 0);
	}
	if (inner == IPPROTO_ETHERNET) {
		r = proxy_decap_l2(c, hlen);
		if (r)
			return proxy_drop(idx, PS_DROP, r);
		proxy_count(idx, PS_TO_NF);
		return bpf_redirect(s->out_ifindex, 0);
	}
	r = proxy_decap(c, hlen, inner);
	if (r)
		return proxy_drop(idx, PS_DROP, r);
	proxy_count(idx, PS_TO_NF);
	return proxy_redirect_nf(s, inner);
}

/* proxy_control reports whether a frame on IFACE-IN belongs to the
 * link, not to the chain: non-IP, IPv6 link-local or multicast
 * (ND, MLD, RS/RA are one of those or ICMPv6 types 130-137/143),
 * IPv4 link-local, multicast or broadcast.
 */
static __always_inline int proxy_control(const struct pkt *p, __be16 proto)
{
	if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = pkt_ptr(p, p->l3off, sizeof(*ip6));

		if (!ip6)
			return 1;
		if (ip6->daddr.in6_u.u6_addr8[0] == 0xff)
			return 1;
		if ((ip6->saddr.in6_u.u6_addr8[0] == 0xfe && (ip6->saddr.in6_u.u6_addr8[1] & 0xc0) == 0x80) ||
		    (ip6->daddr.in6_u.u6_addr8[0] == 0xfe && (ip6->daddr.in6_u.u6_addr8[1] & 0xc0) == 0x80))
			return 1;
		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			__u8 *t = pkt_ptr(p, p->l3off + sizeof(*ip6), 1);

			if (t && ((*t >= 130 && *t <= 137) || *t == 143))
				return 1;
		}
		return 0;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip4 = pkt_ptr(p, p->l3off, sizeof(*ip4));
		__u32 d, s;

		if (!ip4)
			return 1;
		d = bpf_ntohl(ip4->daddr);
		s = bpf_ntohl(ip4->saddr);
		if (d == 0xffffffff || (d >> 28) == 0xe || (d >> 16) == 0xa9fe || (s >> 16) == 0xa9fe)
			return 1;
		return 0;
	}
	return 1;
}

/* proxy_control_of is proxy_control for SID idx: with an Ethernet inner
 * type every frame on IFACE-IN is the chain's (an L2 NF bridges whole
 * frames, ARP and broadcasts included) except the IEEE 802.1D link-local
 * group 01:80:c2:00:00:0x (STP, LACP, LLDP), which bridges never forward.
 */
static __always_inline int proxy_control_of(const struct pkt *p, __be16 proto, __u32 idx)
{
	struct proxy_sid *s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	struct ethhdr *eth;

	if (!s || s->inner != IPPROTO_ETHERNET)
		return proxy_control(p, proto);
	eth = pkt_ptr(p, 0, sizeof(*eth));
	if (!eth)
		return 1;
	return eth->h_dest[0] == 0x01 && eth->h_dest[1] == 0x80 && eth->h_dest[2] == 0xc2 && eth->h_dest[3] == 0 &&
	       eth->h_dest[4] == 0 && (eth->h_dest[5] & 0xf0) == 0;
}

/* proxy_time_exceeded turns the IPv6 packet into an ICMPv6 Time
 * Exceeded (hop limit) from the SID address and sends it back out of the
 * interface it came in on: to the NF (IFACE-IN, reason DROP_PROXY_TTL)
 * or to the SR source (reason DROP_HOP_LIMIT, End's check on the way
 * in). A global function: icmp6_err_tc's checksum loop is verified
 * once, not at each caller.
 */
__attribute__((noinline)) int proxy_time_exceeded(struct __sk_buff *skb, __u32 idx, __u32 reason)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;
	struct ipv6hdr *ip6;
	__u16 *check;
	__u64 sum;
	__u32 r;
	int i;

	if (!skb)
		return TC_ACT_SHOT;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s)
		return TC_ACT_SHOT;
	ctx_reload(&c, CTX_TC);
	if (reason != DROP_HOP_LIMIT)
		reason = DROP_PROXY_TTL;
	proxy_count(idx, PS_TTL);
	count_drop(reason);
	r = icmp6_err_tc(skb, &c.p, ICMPV6_TIME_EXCEED, ICMPV6_EXC_HOPLIMIT, 0, reason);
	if (r) {
		if (r != reason)
			count_drop(r);
		return TC_ACT_SHOT;
	}
	ctx_reload(&c, CTX_TC);
	/* Source: the SID, an address of this node (RFC 4443 2.2), not the
	 * invoking packet's destination icmp6_err_tc puts there. Checksum
	 * fixed incrementally (RFC 1624): + new words, - old words.
	 */
	ip6 = pkt_ptr(&c.p, c.p.l3off, sizeof(*ip6));
	check = pkt_ptr(&c.p, c.p.l3off + sizeof(*ip6) + 2, 2);
	if (!ip6 || !check)
		return TC_ACT_SHOT;
	sum = (__u16)~*check;
	for (i = 0; i < 4; i++) {
		sum += (__u32)~ip6->saddr.in6_u.u6_addr32[i];
		sum += s->sid.in6_u.u6_addr32[i];
	}
	ipv6_addr_copy(&ip6->saddr, &s->sid);
	*check = ~csum_fold64(sum);
	return bpf_redirect(skb->ingress_ifindex, 0);
}

#ifndef BPF_MTU_CHK_SEGS
#define BPF_MTU_CHK_SEGS 1
#endif

/* proxy_fib looks the outer DA of ip6 up for the skb. tot_len 0: the
 * helper checks the skb itself against the MTU of the route's device
 * (a GSO packet's payload length counts all its segments, so the
 * header's would always exceed it); a GSO packet's segments are then
 * checked with bpf_check_mtu (BPF_FIB_LKUP_RET_FRAG_NEEDED when one is
 * too big: the stack sends the Packet Too Big).
 */
static __always_inline long proxy_fib(struct __sk_buff *skb, struct bpf_fib_lookup *params,
				      const struct ipv6hdr *ip6)
{
	__u32 mtu = 0;
	long rc;

	__builtin_memset(params, 0, sizeof(*params));
	params->family = AF_INET6;
	params->flowinfo = *(const __be32 *)ip6 & bpf_htonl(0x0fffffff);
	params->l4_protocol = ip6->nexthdr;
	params->ifindex = skb->ingress_ifindex;
	ipv6_addr_copy((struct in6_addr *)params->ipv6_src, &ip6->saddr);
	ipv6_addr_copy((struct in6_addr *)params->ipv6_dst, &ip6->daddr);
	rc = bpf_fib_lookup(skb, params, sizeof(*params), 0);
	if ((rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) && skb->gso_size &&
	    bpf_check_mtu(skb, params->ifindex, &mtu, 0, BPF_MTU_CHK_SEGS))
		rc = BPF_FIB_LKUP_RET_FRAG_NEEDED;
	fib_count(rc >= 0 && rc < FIB_SLOT_RET_MAX ? (__u32)rc : FIB_SLOT_MAX - 1);
	return rc;
}

/* proxy_forward looks the (rewritten) outer DA up: success and hop
 * limit > 1 -> hop limit - 1, MACs, redirect; else the stack.
 */
static __always_inline int proxy_forward(struct pctx *c, __u32 idx)
{
	struct __sk_buff *skb = c->ctx;
	struct bpf_fib_lookup params;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__be32 before;
	long rc;

	/* Fresh packet pointers: callers come here after pushes, stores and
	 * global calls, and clang may otherwise keep data in a register it
	 * spilled as 32 bits (the verifier then sees a scalar).
	 */
	ctx_reload(c, CTX_TC);
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!ip6)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	rc = proxy_fib(skb, &params, ip6);
	ctx_reload(c, CTX_TC);
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!ip6)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	if ((rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH) || ip6->hop_limit <= 1) {
		proxy_count(idx, PS_STACK);
		return TC_ACT_OK;
	}
	before = ((__be32 *)ip6)[1];
	ip6_dec_hop_limit(ip6);
	skb_csum_replace(skb, &before, &((__be32 *)ip6)[1], sizeof(before));
	proxy_count(idx, PS_FROM_NF);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		/* The neighbour is not resolved yet: bpf_redirect_neigh
		 * resolves it, and as an IPv6 next hop it also sets
		 * skb->protocol to IPv6, which the stack would not (a pushed
		 * IPv4 packet keeps its IPv4 protocol when the skb was still
		 * marked encapsulated, proxy_push), so the first packet of
		 * an IPv4 flow is not lost.
		 */
		struct bpf_redir_neigh nh = { .nh_family = AF_INET6 };

		__builtin_memcpy(nh.ipv6_nh, params.ipv6_dst, sizeof(nh.ipv6_nh));
		return bpf_redirect_neigh(params.ifindex, &nh, sizeof(nh), 0);
	}
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!eth)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	fib_set_macs(eth, &params);
	return bpf_redirect(params.ifindex, 0);
}

/* proxy_am_back is End.AM's NF -> SR direction (IPv6 packet with SRH). */
static __always_inline int proxy_am_back(struct pctx *c, __u32 idx, const struct proxy_sid *s)
{
	struct __sk_buff *skb = c->ctx;
	struct srh_info si = {};
	struct srh_fixed *srh;
	struct ipv6hdr *ip6;
	struct in6_addr *seg, *seg0;
	struct in6_addr before[2];
	__be32 wbefore[1];
	__u32 r;

	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!ip6 || proxy_len_bad(skb, ip6))
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	r = proxy_srh_parse(c->ctx, &si);
	if (r)
		return proxy_drop(idx, proxy_srh_stat(r), r);
	if (si.sl == 0)
		return proxy_drop(idx, PS_SL, DROP_SRH_SL_ZERO);
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!ip6)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	if (ip6->hop_limit <= 1)
		return proxy_time_exceeded(c->ctx, idx, DROP_PROXY_TTL);
	seg0 = srh_segment(&c->p, &si, 0);
	seg = srh_segment(&c->p, &si, si.sl - 1);
	srh = srh_fixed_hdr(&c->p, &si);
	if (!seg0 || !seg || !srh)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	if (s->behavior == PROXY_BEH_AM_NAT) {
		ipv6_addr_copy(&before[1], seg0);
		ipv6_addr_copy(seg0, &ip6->daddr);
		skb_csum_replace(skb, &before[1], seg0, sizeof(before[1]));
	}
	/* The hop limit is left to proxy_forward (redirect) or the stack:
	 * the proxy is one IPv6 hop.
	 */
	wbefore[0] = *(__be32 *)srh;
	ipv6_addr_copy(&before[0], &ip6->daddr);
	srh->segments_left = si.sl - 1;
	ipv6_addr_copy(&ip6->daddr, seg);
	skb_csum_replace(skb, &wbefore[0], srh, 4);
	skb_csum_replace(skb, &before[0], &ip6->daddr, sizeof(before[0]));
	return proxy_forward(c, idx);
}

/* proxy_opot_queued finds the head of k's queue of identical packets'
 * TLVs (proxy_opot_fifo) without taking it: k->seq gets its seq, *qp the
 * queue; NULL when nothing is queued. A head whose entry is gone (the
 * LRU reclaimed it) is skipped, so it cannot block the queue. Taking it
 * is proxy_opot_take's, once the caller commits.
 */
static __always_inline struct proxy_opot_tlv *proxy_opot_queued(struct proxy_opot_key *k,
								 struct proxy_opot_fifo **qp)
{
	struct proxy_opot_fifo *q = bpf_map_lookup_elem(&proxy_opot_q, k);
	struct proxy_opot_tlv *v;
	__u64 h;

	if (!q)
		return NULL;
	h = q->head;
	if (h == q->tail)
		return NULL;
	k->seq = (__u16)h;
	v = k->seq ? bpf_map_lookup_elem(&proxy_opot, k) : NULL;
	if (!v) {
		__sync_val_compare_and_swap(&q->head, h, h + 1);
		return NULL;
	}
	*qp = q;
	return v;
}

/* proxy_back is what the NF -> SR direction restores: the header stack,
 * End.AD.flow's first word and, with OPoT, the packet's kept TLV and the
 * key to take it by.
 */
struct proxy_back {
	const __u8 *hdr;
	__u32 hlen;
	__u32 tlv; /* proxy_hdr.tlv: 1 + the TLV's offset in hdr, 0: none */
	__u32 has_word0;
	__be32 word0;
	struct proxy_opot_key k;
	struct proxy_opot_tlv ot;
	__u32 slot; /* 1 + the index of the slot the TLV is in (in state slot_state); 0: none */
	__u64 slot_state;
	struct proxy_opot_fifo *q; /* the TLV is this queue's head */
};

/* proxy_opot_take takes the kept TLV proxy_back_find found (the commit):
 * a slot is freed and a queue's head moves by compare-and-swap, so two
 * CPUs never take one TLV; the loser gets -1 (tc looks again,
 * proxy_opot_commit; XDP hands the packet to tc).
 */
static __always_inline int proxy_opot_take(struct proxy_back *b)
{
	__u64 h;

	if (!b->tlv)
		return 0;
	if (b->slot) {
		__u32 i = b->slot - 1;
		struct proxy_opot_slot *e = bpf_map_lookup_elem(&proxy_opot_slots, &i);
		__u64 s = b->slot_state;

		if (!e || __sync_val_compare_and_swap(&e->state, s, (s & ~PROXY_SLOT_MASK) | PROXY_SLOT_FREE) != s)
			return -1;
		return 0;
	}
	if (b->q) {
		/* seq is the head modulo 2^16: it must still be the head. */
		h = b->q->head;
		if ((__u16)h != b->k.seq || __sync_val_compare_and_swap(&b->q->head, h, h + 1) != h)
			return -1;
	}
	bpf_map_delete_elem(&proxy_opot, &b->k);
	return 0;
}

/* proxy_opot_lookup finds a kept TLV for b->k (its seq 0): in the slot,
 * else the map, else the head of the queue of identical packets, and
 * copies it to b->ot with what proxy_opot_take needs. -1: none.
 */
static __always_inline int proxy_opot_lookup(struct proxy_back *b)
{
	struct proxy_opot_tlv *v;

	b->k.seq = 0;
	b->q = NULL;
	b->slot = proxy_opot_slot_find(&b->k, &b->ot, &b->slot_state);
	if (b->slot)
		return 0;
	v = bpf_map_lookup_elem(&proxy_opot, &b->k);
	if (!v)
		v = proxy_opot_queued(&b->k, &b->q);
	if (!v)
		return -1;
	__builtin_memcpy(b->ot.b, v->b, OPOT_TLV_LEN);
	return 0;
}

/* proxy_opot_commit takes the TLV proxy_back_find found (tc). An
 * identical packet on another CPU may take it first: then another kept
 * TLV of that packet is looked up and taken, up to twice more, before
 * the packet counts as a miss.
 */
static __always_inline int proxy_opot_commit(struct proxy_back *b)
{
	if (!proxy_opot_take(b))
		return 0;
	if (!proxy_opot_lookup(b) && !proxy_opot_take(b))
		return 0;
	if (!proxy_opot_lookup(b) && !proxy_opot_take(b))
		return 0;
	return -1;
}

/* proxy_back_find fills b for a packet from the NF of SID idx (inner
 * packet at l3off, hop limit / TTL not yet changed) that arrived on
 * in_ifindex. Returns DROP_NONE, or the reason and the SID's stat; it
 * counts and deletes nothing (the caller does once it commits: the XDP
 * twin may still hand the packet to tc).
 */
static __always_inline __u32 proxy_back_find(struct pctx *c, const int kind, __u32 idx, const struct proxy_sid *s,
					     __u32 in_ifindex, struct proxy_back *b, __u32 *stat)
{
	__u32 beh = s->behavior, r;

	if (beh == PROXY_BEH_AS) {
		b->hdr = s->hdr;
		b->hlen = s->hdr_len;
	} else if (beh == PROXY_BEH_AD) {
		__u32 key = in_ifindex;
		struct proxy_hdr *h = bpf_map_lookup_elem(&proxy_ad_cache, &key);

		if (!h) {
			*stat = PS_CACHE_MISS;
			return DROP_PROXY_NO_CACHE;
		}
		b->hdr = h->hdr;
		b->hlen = h->len;
		b->tlv = h->tlv;
	} else if (beh == PROXY_BEH_AD_FLOW) {
		struct proxy_flow_key k = { .sid = idx };
		struct proxy_flow *fl;
		struct proxy_hdr *h;
		__u32 key;
		__u64 now;

		r = proxy_flow_key_of(&c->p, c->p.l3off, s->inner, &k);
		if (r) {
			*stat = PS_DROP;
			return r;
		}
		fl = bpf_map_lookup_elem(&proxy_flows, &k);
		now = bpf_ktime_get_ns();
		if (!fl || (s->flow_timeout_ns && now - fl->last_ns > s->flow_timeout_ns)) {
			*stat = PS_CACHE_MISS;
			return DROP_PROXY_FLOW_MISS;
		}
		key = fl->slot;
		h = bpf_map_lookup_elem(&proxy_hslots, &key);
		/* The slot was given another header since: a miss. */
		if (!h || (__u32)h->gen != fl->gen) {
			*stat = PS_CACHE_MISS;
			return DROP_PROXY_FLOW_MISS;
		}
		proxy_flow_touch(fl, s, now);
		b->word0 = fl->word0;
		b->has_word0 = 1;
		b->hdr = h->hdr;
		b->hlen = h->len;
		b->tlv = h->tlv;
	} else {
		*stat = PS_DROP;
		return DROP_UNSUPPORTED;
	}
	/* OPoT: the header carries a TLV, so this packet must have come
	 * from the SR side with one (proxy_opot_save). A packet the proxy
	 * did not send to the NF, or one the NF rewrote, has none: it must
	 * not leave with a proof it never had.
	 */
	if (b->tlv) {
		b->k.sid = idx;
		r = proxy_opot_key_of(c, kind, c->p.l3off, s->inner, &b->k);
		if (r) {
			*stat = PS_DROP;
			return r;
		}
		if (proxy_opot_lookup(b)) {
			*stat = PS_OPOT_MISS;
			return DROP_PROXY_OPOT_MISS;
		}
	}
	return DROP_NONE;
}

/* proxy_from_nf_l2 is the NF -> SR direction of an Ethernet inner type
 * (tc): the whole frame from IFACE-IN goes behind the restored header
 * stack (outer next header 143), with no hop limit of its own to
 * decrement. The room comes from bpf_skb_change_head (bpf_skb_adjust_room
 * takes IPv4/IPv6 skbs only, and an L2 service carries ARP too), so the
 * skb's protocol and network header still describe the inner frame: the
 * packet may only leave by a FIB redirect (bpf_redirect writes the frame
 * as it is; the next receiver parses it afresh). No route, an unresolved
 * neighbour, hop limit <= 1 or too big: dropped, DROP_PROXY_L2_NO_ROUTE
 * (the stack would read the frame as the inner type). GSO: dropped,
 * DROP_UNSUPPORTED (no segmenter for it).
 */
static __always_inline int proxy_from_nf_l2(struct pctx *c, __u32 idx, const struct proxy_sid *s)
{
	struct __sk_buff *skb = c->ctx;
	struct bpf_fib_lookup params;
	struct proxy_back b = {};
	__u32 frame = skb->len, r, stat = PS_DROP;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__u64 hlen;
	__be16 plen;
	long rc;

	if (skb->gso_segs > 1)
		return proxy_drop(idx, PS_DROP, DROP_UNSUPPORTED);
	r = proxy_back_find(c, CTX_TC, idx, s, skb->ingress_ifindex, &b, &stat);
	if (r)
		return proxy_drop(idx, stat, r);
	if (s->behavior != PROXY_BEH_AS)
		proxy_count(idx, PS_CACHE_HIT);
	hlen = proxy_bound(b.hlen);
	if (hlen < sizeof(struct ipv6hdr) || hlen > PROXY_HDR_MAX || frame + hlen - sizeof(struct ipv6hdr) > 0xffff)
		return proxy_drop(idx, PS_DROP, DROP_UNSUPPORTED);
	if (bpf_skb_change_head(skb, sizeof(struct ethhdr) + hlen, 0))
		return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr), b.hdr, hlen, 0))
		return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
	plen = bpf_htons(hlen - sizeof(struct ipv6hdr) + frame);
	if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + 4, &plen, sizeof(plen), 0))
		return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
	if (b.has_word0 && bpf_skb_store_bytes(skb, sizeof(struct ethhdr), &b.word0, sizeof(b.word0), 0))
		return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
	ctx_reload(c, CTX_TC);
	ip6 = pkt_ptr(&c->p, sizeof(struct ethhdr), sizeof(*ip6));
	if (!ip6)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	__builtin_memset(&params, 0, sizeof(params));
	params.family = AF_INET6;
	params.flowinfo = *(const __be32 *)ip6 & bpf_htonl(0x0fffffff);
	params.l4_protocol = ip6->nexthdr;
	params.tot_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	params.ifindex = skb->ingress_ifindex;
	ipv6_addr_copy((struct in6_addr *)params.ipv6_src, &ip6->saddr);
	ipv6_addr_copy((struct in6_addr *)params.ipv6_dst, &ip6->daddr);
	rc = bpf_fib_lookup(skb, &params, sizeof(params), 0);
	fib_count(rc >= 0 && rc < FIB_SLOT_RET_MAX ? (__u32)rc : FIB_SLOT_MAX - 1);
	ctx_reload(c, CTX_TC);
	ip6 = pkt_ptr(&c->p, sizeof(struct ethhdr), sizeof(*ip6));
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!ip6 || !eth)
		return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || ip6->hop_limit <= 1)
		return proxy_drop(idx, PS_DROP, DROP_PROXY_L2_NO_ROUTE);
	ip6_dec_hop_limit(ip6);
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	fib_set_macs(eth, &params);
	proxy_count(idx, PS_FROM_NF);
	return bpf_redirect(params.ifindex, 0);
}

/* proxy_from_nf handles a packet from the NF on IFACE-IN of SID idx. */
static __always_inline int proxy_from_nf(struct pctx *c, __u32 idx, const struct proxy_sid *s, __be16 proto)
{
	struct __sk_buff *skb = c->ctx;
	__u32 beh = s->behavior, inner = s->inner, l3len, r, stat = PS_DROP;
	struct proxy_back b = {};
	const __u8 *hdr;
	__u32 hlen;

	if (beh == PROXY_BEH_AM || beh == PROXY_BEH_AM_NAT) {
		if (proto != bpf_htons(ETH_P_IPV6))
			return proxy_drop(idx, PS_WRONG_INNER, DROP_PROXY_WRONG_INNER);
		return proxy_am_back(c, idx, s);
	}
	if (inner == IPPROTO_ETHERNET)
		return proxy_drop(idx, PS_DROP, DROP_UNSUPPORTED); /* proxy_nf_l2_run's */
	if ((inner == IPPROTO_IPV6) != (proto == bpf_htons(ETH_P_IPV6)))
		return proxy_drop(idx, PS_WRONG_INNER, DROP_PROXY_WRONG_INNER);

	/* Hop limit / TTL (the proxy forwards the inner packet). */
	if (inner == IPPROTO_IPV6) {
		struct ipv6hdr *ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
		__be32 before;

		if (!ip6)
			return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
		l3len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
		if (sizeof(struct ethhdr) + l3len > skb->len)
			return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
		if (ip6->hop_limit <= 1)
			return proxy_time_exceeded(c->ctx, idx, DROP_PROXY_TTL);
		before = ((__be32 *)ip6)[1];
		ip6->hop_limit -= 1;
		skb_csum_replace(skb, &before, &((__be32 *)ip6)[1], sizeof(before));
	} else {
		struct iphdr *ip4 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip4));
		__be16 before, after;

		if (!ip4)
			return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
		l3len = bpf_ntohs(ip4->tot_len);
		if (ip4->ihl < 5 || ip4->ihl * 4 > l3len || sizeof(struct ethhdr) + l3len > skb->len)
			return proxy_drop(idx, PS_DROP, DROP_PKT_TRUNCATED);
		if (ip4->ttl <= 1)
			return proxy_drop(idx, PS_TTL, DROP_PROXY_TTL);
		before = *(__be16 *)&ip4->ttl;
		ip4->ttl -= 1;
		after = *(__be16 *)&ip4->ttl;
		bpf_l3_csum_replace(skb, c->p.l3off + offsetof(struct iphdr, check), before, after, 2);
		ctx_reload(c, CTX_TC);
	}

	r = proxy_back_find(c, CTX_TC, idx, s, skb->ingress_ifindex, &b, &stat);
	if (r)
		return proxy_drop(idx, stat, r);
	/* A GSO packet from the NF (it aggregated packets) would leave with
	 * one packet's proof copied into all its segments (docs/opot.md
	 * "GSO"); its TLV stays kept until it is stale.
	 */
	if (b.tlv && skb->gso_segs > 1)
		return proxy_drop(idx, PS_DROP, DROP_OPOT_GSO);
	if (proxy_opot_commit(&b))
		return proxy_drop(idx, PS_OPOT_MISS, DROP_PROXY_OPOT_MISS);
	if (beh != PROXY_BEH_AS)
		proxy_count(idx, PS_CACHE_HIT);
	hdr = b.hdr;
	hlen = b.hlen;

	/* Bytes past the IP length (Ethernet padding) are not the packet's. */
	if (skb->len > sizeof(struct ethhdr) + l3len) {
		if (bpf_skb_change_tail(skb, sizeof(struct ethhdr) + l3len, 0))
			return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
	}
	hlen &= 2 * PROXY_HDR_MAX - 1;
	if (hlen < sizeof(struct ipv6hdr) || hlen > PROXY_HDR_MAX)
		return proxy_drop(idx, PS_DROP, DROP_UNSUPPORTED);
	r = proxy_push(c, hdr, hlen);
	if (r)
		return proxy_drop(idx, PS_DROP, r);
	if (b.tlv && proxy_opot_put(skb, b.tlv - 1, &b.ot))
		return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
	if (b.has_word0) {
		if (bpf_skb_store_bytes(skb, sizeof(struct ethhdr), &b.word0, sizeof(b.word0), BPF_F_RECOMPUTE_CSUM))
			return proxy_drop(idx, PS_DROP, DROP_ADJUST_ROOM);
		ctx_reload(c, CTX_TC);
	}
	return proxy_forward(c, idx);
}

/* proxy_xdp_fib looks the outer destination dst (source src, flow word
 * word0) up for a packet of len bytes leaving after the XDP NF side
 * rewrote it, through the FIB cache slot. Returns 0 and
 * params' egress filled when it can be redirected (success, hop limit >
 * 1), else -1: the packet goes to tc untouched.
 */
static __always_inline int proxy_xdp_fib(struct xdp_md *ctx, __u32 slot, const __u8 *dst, const __u8 *src,
					 __be32 word0, __u8 proto, __u32 len, __u8 hop_limit,
					 struct bpf_fib_lookup *params)
{
	struct proxy_fibc_key k = { .flow = word0 & bpf_htonl(0x000fffff), .proto = proto };
	long rc;

	if (hop_limit <= 1)
		return -1;
	__builtin_memset(params, 0, sizeof(*params));
	__builtin_memcpy(k.dst, dst, 16);
	__builtin_memcpy(k.src, src, 16);
	if (!proxy_fibc_get(slot, &k, len, params))
		return 0;
	params->family = AF_INET6;
	params->flowinfo = word0 & bpf_htonl(0x0fffffff);
	params->l4_protocol = proto;
	params->tot_len = len;
	params->ifindex = ctx->ingress_ifindex;
	__builtin_memcpy(params->ipv6_src, src, 16);
	__builtin_memcpy(params->ipv6_dst, dst, 16);
	rc = bpf_fib_lookup(ctx, params, sizeof(*params), 0);
	fib_count(rc >= 0 && rc < FIB_SLOT_RET_MAX ? (__u32)rc : FIB_SLOT_MAX - 1);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	proxy_fibc_put(slot, &k, len, params);
	return 0;
}

/* proxy_am_back_xdp is End.AM's NF -> SR direction at XDP: SL - 1, DA =
 * SRH[SL] (NAT: SRH[0] = the returned DA first), hop limit - 1, FIB
 * redirect; anything it cannot finish goes to tc untouched (XDP_PASS).
 */
static __always_inline int proxy_am_back_xdp(struct pctx *c, __u32 idx, const struct proxy_sid *s)
{
	struct bpf_fib_lookup params;
	struct srh_info si = {};
	struct srh_fixed *srh;
	struct ipv6hdr *ip6;
	struct in6_addr *seg, *seg0, da;
	struct ethhdr *eth;

	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	if (!ip6 || sizeof(*ip6) + bpf_ntohs(ip6->payload_len) > ctx_l3_len(c, CTX_XDP))
		return XDP_PASS;
	if (proxy_srh_parse_xdp(c->ctx, &si) || si.sl == 0)
		return XDP_PASS;
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	seg0 = srh_segment(&c->p, &si, 0);
	seg = srh_segment(&c->p, &si, si.sl - 1);
	srh = srh_fixed_hdr(&c->p, &si);
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!ip6 || !seg0 || !seg || !srh || !eth)
		return XDP_PASS;
	/* The next DA: SRH[SL - 1], or with NAT and SL - 1 = 0 the DA the
	 * packet came back with (it becomes SRH[0]).
	 */
	ipv6_addr_copy(&da, seg);
	if (s->behavior == PROXY_BEH_AM_NAT && si.sl == 1)
		ipv6_addr_copy(&da, &ip6->daddr);
	if (proxy_xdp_fib(c->ctx, (idx % PROXY_MAX_SIDS) * 2 + 1, (const __u8 *)&da, (const __u8 *)&ip6->saddr, *(__be32 *)ip6, ip6->nexthdr,
			  ctx_l3_len(c, CTX_XDP), ip6->hop_limit, &params))
		return XDP_PASS;
	ip6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*ip6));
	seg0 = srh_segment(&c->p, &si, 0);
	srh = srh_fixed_hdr(&c->p, &si);
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	if (!ip6 || !seg0 || !srh || !eth)
		return XDP_DROP;
	if (s->behavior == PROXY_BEH_AM_NAT)
		ipv6_addr_copy(seg0, &ip6->daddr);
	srh->segments_left = si.sl - 1;
	ipv6_addr_copy(&ip6->daddr, &da);
	ip6_dec_hop_limit(ip6);
	fib_set_macs(eth, &params);
	proxy_count(idx, PS_FROM_NF);
	return bpf_redirect(params.ifindex, 0);
}

/* proxy_from_nf_l2_xdp is proxy_from_nf_l2's XDP twin: the whole frame
 * behind the restored header, decided before it writes (header, FIB of
 * the restored destination, headroom), else to tc untouched.
 */
static __always_inline int proxy_from_nf_l2_xdp(struct pctx *c, __u32 idx, const struct proxy_sid *s)
{
	struct xdp_md *ctx = c->ctx;
	struct bpf_fib_lookup params;
	struct proxy_back b = {};
	__u32 frame = c->p.data_end - c->p.data, stat = PS_DROP;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__be32 word0;
	__u64 hlen;

	if (proxy_back_find(c, CTX_XDP, idx, s, ctx->ingress_ifindex, &b, &stat))
		return XDP_PASS;
	hlen = proxy_bound(b.hlen);
	if (hlen < sizeof(struct ipv6hdr) || hlen > PROXY_HDR_MAX || frame + hlen - sizeof(struct ipv6hdr) > 0xffff)
		return XDP_PASS;
	word0 = b.has_word0 ? b.word0 : *(const __be32 *)b.hdr;
	if (proxy_xdp_fib(ctx, (idx % PROXY_MAX_SIDS) * 2 + 1, b.hdr + 24, b.hdr + 8, word0, b.hdr[6], hlen + frame,
			  b.hdr[7], &params))
		return XDP_PASS;
	if (bpf_xdp_adjust_head(ctx, -(int)(sizeof(struct ethhdr) + hlen)))
		return XDP_PASS;
	if (bpf_xdp_store_bytes(ctx, sizeof(struct ethhdr), (void *)b.hdr, hlen))
		return proxy_drop_xdp(idx, DROP_ADJUST_ROOM);
	ctx_reload(c, CTX_XDP);
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&c->p, sizeof(*eth), sizeof(*ip6));
	if (!eth || !ip6)
		return proxy_drop_xdp(idx, DROP_ADJUST_ROOM);
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	fib_set_macs(eth, &params);
	*(__be32 *)ip6 = word0;
	ip6->payload_len = bpf_htons(hlen - sizeof(*ip6) + frame);
	ip6_dec_hop_limit(ip6);
	if (s->behavior != PROXY_BEH_AS)
		proxy_count(idx, PS_CACHE_HIT);
	proxy_count(idx, PS_FROM_NF);
	return bpf_redirect(params.ifindex, 0);
}

/* proxy_from_nf_xdp is proxy_from_nf's XDP twin (End.AS, End.AD,
 * End.AD.flow; End.AM above): it decides everything before it writes
 * (the header to restore, the kept OPoT TLV, a FIB lookup of the restored
 * destination that must succeed, room in front of the frame) and hands
 * every packet it cannot finish to tc untouched, which serves, drops and
 * counts it (hop limit / TTL <= 1 and its ICMPv6 error included).
 */
static __always_inline int proxy_from_nf_xdp(struct pctx *c, __u32 idx, const struct proxy_sid *s, __be16 proto)
{
	struct xdp_md *ctx = c->ctx;
	struct bpf_fib_lookup params;
	struct proxy_back b = {};
	__u32 inner = s->inner, l3len, frame, r, stat = PS_DROP;
	struct ipv6hdr *ip6;
	struct ethhdr *eth;
	__be32 word0;
	__u64 hlen;

	if (s->behavior == PROXY_BEH_AM || s->behavior == PROXY_BEH_AM_NAT)
		return proto == bpf_htons(ETH_P_IPV6) ? proxy_am_back_xdp(c, idx, s) : XDP_PASS;
	if (inner == IPPROTO_ETHERNET)
		return XDP_PASS; /* proxy_nf_l2_xdp_run's */
	if ((inner == IPPROTO_IPV6) != (proto == bpf_htons(ETH_P_IPV6)))
		return XDP_PASS;
	frame = c->p.data_end - c->p.data;
	if (inner == IPPROTO_IPV6) {
		struct ipv6hdr *in6 = pkt_ptr(&c->p, c->p.l3off, sizeof(*in6));

		if (!in6 || in6->hop_limit <= 1)
			return XDP_PASS;
		l3len = sizeof(*in6) + bpf_ntohs(in6->payload_len);
	} else {
		struct iphdr *in4 = pkt_ptr(&c->p, c->p.l3off, sizeof(*in4));

		if (!in4 || in4->ttl <= 1 || in4->ihl < 5)
			return XDP_PASS;
		l3len = bpf_ntohs(in4->tot_len);
		if (in4->ihl * 4 > l3len)
			return XDP_PASS;
	}
	if (sizeof(struct ethhdr) + l3len > frame)
		return XDP_PASS;
	r = proxy_back_find(c, CTX_XDP, idx, s, ctx->ingress_ifindex, &b, &stat);
	if (r)
		return XDP_PASS;
	hlen = proxy_bound(b.hlen);
	if (hlen < sizeof(struct ipv6hdr) || hlen > PROXY_HDR_MAX || l3len + hlen - sizeof(struct ipv6hdr) > 0xffff)
		return XDP_PASS;
	word0 = b.has_word0 ? b.word0 : *(const __be32 *)b.hdr;
	if (proxy_xdp_fib(ctx, (idx % PROXY_MAX_SIDS) * 2 + 1, b.hdr + 24, b.hdr + 8, word0,
			  b.hdr[6], hlen + l3len, b.hdr[7], &params))
		return XDP_PASS;
	/* Ethernet padding is not the packet's; then room for the header. */
	if (frame > sizeof(struct ethhdr) + l3len &&
	    bpf_xdp_adjust_tail(ctx, -(int)(frame - sizeof(struct ethhdr) - l3len)))
		return XDP_PASS;
	if (bpf_xdp_adjust_head(ctx, -(int)hlen))
		return XDP_PASS;
	if (proxy_opot_take(&b)) {
		/* Another CPU took the TLV first: the frame back as it was. */
		if (bpf_xdp_adjust_head(ctx, (int)hlen))
			return proxy_drop_xdp(idx, DROP_ADJUST_ROOM);
		return XDP_PASS;
	}
	/* Committed: from here the frame is rewritten. */
	if (bpf_xdp_store_bytes(ctx, sizeof(struct ethhdr), (void *)b.hdr, hlen))
		goto fail;
	if (b.tlv) {
		__u32 at = (b.tlv - 1) & (PROXY_HDR_MAX - 1);

		if (at > PROXY_HDR_MAX - OPOT_TLV_LEN ||
		    bpf_xdp_store_bytes(ctx, sizeof(struct ethhdr) + at, b.ot.b, OPOT_TLV_LEN))
			goto fail;
	}
	ctx_reload(c, CTX_XDP);
	eth = pkt_ptr(&c->p, 0, sizeof(*eth));
	ip6 = pkt_ptr(&c->p, sizeof(*eth), sizeof(*ip6));
	if (!eth || !ip6)
		goto fail;
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	fib_set_macs(eth, &params);
	*(__be32 *)ip6 = word0;
	ip6->payload_len = bpf_htons(hlen - sizeof(*ip6) + l3len);
	ip6_dec_hop_limit(ip6);
	/* The inner packet's hop limit / TTL: the proxy forwards it. */
	if (inner == IPPROTO_IPV6) {
		struct ipv6hdr *in6 = pkt_ptr(&c->p, (sizeof(*eth) + hlen) & (2 * PROXY_HDR_MAX - 1), sizeof(*in6));

		if (!in6)
			goto fail;
		in6->hop_limit -= 1;
	} else {
		struct iphdr *in4 = pkt_ptr(&c->p, (sizeof(*eth) + hlen) & (2 * PROXY_HDR_MAX - 1), sizeof(*in4));
		__u32 sum;

		if (!in4)
			goto fail;
		/* RFC 1624: HC' = ~(~HC + ~m + m'), m the TTL/protocol word. */
		sum = (__u16)~in4->check + (__u16)~bpf_htons((__u16)in4->ttl << 8 | in4->protocol);
		in4->ttl -= 1;
		sum += bpf_htons((__u16)in4->ttl << 8 | in4->protocol);
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		in4->check = ~(__u16)sum;
	}
	if (s->behavior != PROXY_BEH_AS)
		proxy_count(idx, PS_CACHE_HIT);
	proxy_count(idx, PS_FROM_NF);
	return bpf_redirect(params.ifindex, 0);
fail:
	return proxy_drop_xdp(idx, DROP_ADJUST_ROOM);
}

/* proxy_sr_run and proxy_nf_run are the two directions as global
 * functions (verified once each, whichever program calls them).
 */
__attribute__((noinline)) int proxy_sr_run(struct __sk_buff *skb, __u32 idx)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;

	if (!skb)
		return PROXY_NEXT;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s || !s->behavior)
		return PROXY_NEXT;
	ctx_reload(&c, CTX_TC);
	return proxy_sr(&c, CTX_TC, idx, s);
}

__attribute__((noinline)) int proxy_sr_xdp_run(struct xdp_md *ctx, __u32 idx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;

	if (!ctx)
		return XDP_PASS;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s || !s->behavior)
		return XDP_PASS;
	ctx_reload(&c, CTX_XDP);
	return proxy_sr(&c, CTX_XDP, idx, s);
}

/* proxy_nf_l2_run and proxy_nf_l2_xdp_run are the NF -> SR direction of
 * an Ethernet inner type, global functions called by the programs
 * themselves (their frames would not fit the stack under proxy_nf_run's).
 * proxy_is_l2 tells the programs which SIDs they serve.
 */
static __always_inline int proxy_is_l2(__u32 idx)
{
	struct proxy_sid *s = bpf_map_lookup_elem(&proxy_cfg, &idx);

	return s && s->inner == IPPROTO_ETHERNET && (s->behavior == PROXY_BEH_AS || s->behavior == PROXY_BEH_AD);
}

__attribute__((noinline)) int proxy_nf_l2_run(struct __sk_buff *skb, __u32 idx)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;

	if (!skb)
		return PROXY_NEXT;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s || !s->behavior)
		return PROXY_NEXT;
	ctx_reload(&c, CTX_TC);
	return proxy_from_nf_l2(&c, idx, s);
}

__attribute__((noinline)) int proxy_nf_l2_xdp_run(struct xdp_md *ctx, __u32 idx)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;

	if (!ctx)
		return XDP_PASS;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s || !s->behavior)
		return XDP_PASS;
	ctx_reload(&c, CTX_XDP);
	return proxy_from_nf_l2_xdp(&c, idx, s);
}

__attribute__((noinline)) int proxy_nf_xdp_run(struct xdp_md *ctx, __u32 idx, __u32 proto)
{
	struct pctx c = { .ctx = ctx, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;

	if (!ctx)
		return XDP_PASS;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s || !s->behavior)
		return XDP_PASS;
	ctx_reload(&c, CTX_XDP);
	return proxy_from_nf_xdp(&c, idx, s, (__be16)proto);
}

__attribute__((noinline)) int proxy_nf_run(struct __sk_buff *skb, __u32 idx, __u32 proto)
{
	struct pctx c = { .ctx = skb, .p = { .l3off = sizeof(struct ethhdr) } };
	struct proxy_sid *s;

	if (!skb)
		return PROXY_NEXT;
	s = bpf_map_lookup_elem(&proxy_cfg, &idx);
	if (!s || !s->behavior)
		return PROXY_NEXT;
	ctx_reload(&c, CTX_TC);
	return proxy_from_nf(&c, idx, s, (__be16)proto);
}

#endif /* SRCHAIN_PROXY_H */
