/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Per-CPU counters shared by srchain programs.
 *
 *   drop_counters  per-CPU array, one __u64 per enum srchain_drop_reason
 *                  (index = reason). Its size is the fixed
 *                  SRCHAIN_DROP_SLOTS, not DROP_MAX, so appending a reason
 *                  keeps the map compatible with pinned instances (a
 *                  pinned map of another size cannot be reused). Go reads
 *                  the first drop.Max slots with datapath.ReadDropCounts,
 *                  which sums the CPUs into drop.Counts.
 *   sid_counters   per-CPU array of struct sid_counter, indexed by the
 *                  counter index the loader stores with each SID; packets
 *                  and bytes the behavior handled (drops included, so
 *                  packets - drops = forwarded).
 *
 * Every object file that includes this header gets its own instances; the
 * maps are plain (not pinned by name) unless the loader pins them.
 * Per-CPU maps need no atomics: each CPU owns its slot.
 */
#ifndef SRCHAIN_COUNTERS_H
#define SRCHAIN_COUNTERS_H

#include "common.h"

/* Number of per-SID counter slots; the loader hands out indexes. */
#define SRCHAIN_MAX_SID_COUNTERS 1024

/* Capacity of drop_counters: room for every reason ever appended to
 * drop.h. ABI of pinned maps: never change it.
 */
#define SRCHAIN_DROP_SLOTS 64

_Static_assert(DROP_MAX <= SRCHAIN_DROP_SLOTS,
	       "more drop reasons than drop_counters slots (SRCHAIN_DROP_SLOTS)");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SRCHAIN_DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} drop_counters SEC(".maps");

struct sid_counter {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SRCHAIN_MAX_SID_COUNTERS);
	__type(key, __u32);
	__type(value, struct sid_counter);
} sid_counters SEC(".maps");

/* count_drop adds one to the counter of reason (out-of-range reasons are
 * counted as DROP_NONE so a bug never goes unseen). Returns reason so a
 * caller can write `return count_drop(r);` in helpers.
 */
static __always_inline __u32 count_drop(__u32 reason)
{
	__u32 key = reason < DROP_MAX ? reason : DROP_NONE;
	__u64 *v = bpf_map_lookup_elem(&drop_counters, &key);

	if (v)
		*v += 1;
	return reason;
}

/* count_sid accounts one packet of len bytes to SID counter slot idx.
 * Callers pass IP bytes (no Ethernet header), as seg6local and ip6tables.
 */
static __always_inline void count_sid(__u32 idx, __u64 len)
{
	struct sid_counter *c;

	if (idx >= SRCHAIN_MAX_SID_COUNTERS)
		return;
	c = bpf_map_lookup_elem(&sid_counters, &idx);
	if (c) {
		c->packets += 1;
		c->bytes += len;
	}
}

#endif /* SRCHAIN_COUNTERS_H */
