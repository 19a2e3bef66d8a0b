/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Layout shared by the benchmark generator (bpf/bench/xdpgen.c), the benchmark
 * sink (bpf/bench/sink.c) and internal/bench.
 *
 * Latency stamping (seed 002 section 4.6 measures one-way latency through
 * the DUT): the generator writes a trailer into the last BENCH_TRAILER_LEN
 * bytes of the frame: an 8-byte magic then bpf_ktime_get_ns(). Behaviors
 * only add or strip headers, so the trailer stays the last bytes of the
 * frame whatever the DUT did, and the sink finds it without parsing.
 */
#ifndef SRCHAIN_BENCH_H
#define SRCHAIN_BENCH_H

/* Largest frame the generator can send; templates are this big. */
#define BENCH_MAX_FRAME 2048
/* Templates the generator cycles through (IMIX x flows). */
#define BENCH_MAX_TEMPLATES 64
/* Latency samples the sink keeps (a ring; power of two). */
#define BENCH_LAT_SAMPLES 65536

#define BENCH_TRAILER_LEN 16
#define BENCH_MAGIC 0x5352434842454e43ULL /* "SRCHBENC" */

#endif /* SRCHAIN_BENCH_H */
