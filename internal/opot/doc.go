// Package opot is the pure-Go foundation of ordered proof of transit
// (OPoT, seed 003 sections III-A and IV; draft-ietf-sfc-proof-of-transit):
// the field arithmetic the eBPF programs will use (written here exactly
// as the C will be), per-chain key profiles, the SRH TLV codec, and a
// reference model of the headend, transit and verifier data plane with an
// anti-replay window. The eBPF programs of issue 11 are checked against
// this model; docs/opot.md explains the math, the wire format and the
// threat model.
package opot
