// Package bench is srchain's benchmark harness (DESIGN.md C9): it builds a
// generator -> DUT -> sink line of network namespaces per case, blasts
// pre-built frames from an XDP live-frames generator so that the DUT, not
// the generator, is the limit, counts what the DUT forwarded (its egress tx
// counter) cross-checked by an XDP drop-and-count program at the sink, and
// reports medians over interleaved rounds as ratios to a baseline measured
// in the same run.
//
// Modes: max rate; RFC 2544 section 26.1 throughput as a partial drop rate
// (binary search on the offered rate with a loss threshold, as seed 001
// section 5 does); latency (fixed low rate, one-way latency from a
// timestamp trailer written by the generator and read at the sink, seed
// 002 section 4.6).
//
// Cases live in a registry of scenarios (Register); a case is a small
// struct literal: how to configure the DUT and what frames to send.
package bench
