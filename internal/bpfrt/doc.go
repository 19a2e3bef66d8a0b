// Package bpfrt is the BPF runtime every srchain loader shares: locks on
// pinned objects, counter readers for the maps of bpf/lib/counters.h and
// bpf/lib/fib.h, load errors that keep the verifier's, and the identity
// of network namespaces (for pin directories that must not outlive the
// namespace they describe).
//
// Loaders (internal/datapath for End, internal/firewall) keep their own
// program-specific logic and call this package for the plumbing, so that
// a new kind gets the same locking, counters and errors by construction.
package bpfrt
