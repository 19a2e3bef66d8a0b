/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sink: the benchmark sink. Counts and drops every frame the DUT sent,
 * as a cross-check of the DUT's egress tx counter, and records the
 * one-way latency of frames carrying the generator's trailer (see
 * bench/bench.h). Dropping in XDP keeps the sink far cheaper than the DUT.
 */
#include "common.h"
#include "bench.h"

struct sink_stats {
	__u64 packets;
	__u64 bytes;
	__u64 stamped;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_stats);
} stats SEC(".maps");

/* Latency samples in ns, a ring indexed by lat_next. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_LAT_SAMPLES);
	__type(key, __u32);
	__type(value, __u64);
} lat_samples SEC(".maps");

__u64 lat_next = 0;

SEC("xdp")
int sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0, len = (__u32)(data_end - data);
	struct sink_stats *s = bpf_map_lookup_elem(&stats, &key);
	__u64 tr[2];

	if (!s)
		return XDP_DROP;
	s->packets++;
	s->bytes += len;

	if (len < BENCH_TRAILER_LEN || len > BENCH_MAX_FRAME + 256)
		return XDP_DROP;
	/* The helper does the bounds check at a variable offset. */
	if (bpf_xdp_load_bytes(ctx, len - BENCH_TRAILER_LEN, tr, sizeof(tr)))
		return XDP_DROP;
	if (tr[0] == BENCH_MAGIC) {
		__u64 now = bpf_ktime_get_ns();
		__u32 slot;
		__u64 *v;

		s->stamped++;
		slot = (__u32)__sync_fetch_and_add(&lat_next, 1) & (BENCH_LAT_SAMPLES - 1);
		v = bpf_map_lookup_elem(&lat_samples, &slot);
		if (v && now > tr[1])
			*v = now - tr[1];
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
