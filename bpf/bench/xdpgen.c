/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* xdpgen: the benchmark traffic generator.
 *
 * Run with BPF_PROG_RUN + BPF_F_TEST_XDP_LIVE_FRAMES: every run the kernel
 * hands us a frame from its page pool, we fill it from a template and
 * redirect it out of the generator's veth. The pool recycles pages that
 * the DUT already rewrote (hop limit, SRH, pushed headers), so the frame
 * must be rebuilt from the template on every run, never trusted.
 * Templates rotate (IMIX sizes, source/destination variation) by a run
 * counter; the counter is also the exact number of frames offered.
 */
#include "common.h"
#include "bench.h"

struct tmpl {
	__u32 len;
	__u32 pad;
	__u8 data[BENCH_MAX_FRAME];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_MAX_TEMPLATES);
	__type(key, __u32);
	__type(value, struct tmpl);
} templates SEC(".maps");

/* Set by the loader before load: the generator veth. */
SRCHAIN_CONFIG(__u32, cfg_ifindex, 0);

/* Changed by the harness between measurements (profile and mode change,
 * the program stays): templates in use, and whether to write the latency
 * trailer.
 */
__u32 ntemplates = 1;
__u32 stamp = 0;

/* Pacing: with interval_ns > 0 a frame is sent only when next_ns is
 * due; other runs return XDP_DROP at once (a spin that costs tens of ns).
 * Pacing lives here rather than in Go because every BPF_PROG_RUN call in
 * live-frames mode pays a fixed ~10 ms (page pool set-up and teardown):
 * the harness makes one long call per trial and stops it with a signal.
 */
__u64 interval_ns = 0;
__u64 next_ns = 0;

/* Frames sent so far; BPF_PROG_RUN runs on one CPU at a time, so a plain
 * increment is exact.
 */
__u64 runs = 0;

/* Per-packet flow variation (more flows than templates): with flows > 1
 * the 4 bytes at flow_off (the low 32 bits of the inner IPv6 source
 * address, set by the harness) become 1 + run counter modulo flows, in
 * network order, so run k belongs to flow k % flows. The inner UDP
 * checksum is not fixed up: forwarding and the proxies do not check it.
 */
__u32 flows = 0;
__u32 flow_off = 0;

SEC("xdp")
int xdpgen(struct xdp_md *ctx)
{
	__u32 n = ntemplates ? ntemplates : 1;
	__u64 run = runs;
	__u32 idx = (__u32)(run % n);
	struct tmpl *t;
	__u32 len;
	int cur;

	if (interval_ns) {
		__u64 now = bpf_ktime_get_ns();

		if (now < next_ns)
			return XDP_DROP;
		/* Catch up at most 1 ms so a stall does not become a burst. */
		next_ns = next_ns + 1000000 < now ? now : next_ns;
		next_ns += interval_ns;
	}
	runs++;
	t = bpf_map_lookup_elem(&templates, &idx);
	if (!t)
		return XDP_ABORTED;
	len = t->len;
	if (len < ETH_HLEN || len > BENCH_MAX_FRAME)
		return XDP_ABORTED;
	cur = (int)(ctx->data_end - ctx->data);
	if (cur != (int)len && bpf_xdp_adjust_tail(ctx, (int)len - cur))
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, t->data, len))
		return XDP_ABORTED;
	if (stamp && len >= ETH_HLEN + BENCH_TRAILER_LEN) {
		__u64 trailer[2] = { BENCH_MAGIC, bpf_ktime_get_ns() };

		if (bpf_xdp_store_bytes(ctx, len - BENCH_TRAILER_LEN, trailer, sizeof(trailer)))
			return XDP_ABORTED;
	}
	if (flows > 1) {
		__u32 f = bpf_htonl((__u32)(run % flows) + 1);
		__u32 off = flow_off;

		if (off < ETH_HLEN || off > len - sizeof(f))
			return XDP_ABORTED;
		if (bpf_xdp_store_bytes(ctx, off, &f, sizeof(f)))
			return XDP_ABORTED;
	}
	return bpf_redirect(cfg_ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
