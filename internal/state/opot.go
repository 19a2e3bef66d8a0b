package state

import (
	"fmt"
	"net/netip"
)

// ProgramOPoT is the program kind of the ordered proof of transit stages
// of a node (internal/opotdp, docs/opot.md "Deployment"): the headend at
// tc egress of the chain's ingress router, the transit at tc ingress of
// each NF node, the verifier at tc ingress of the chain's egress router.
const ProgramOPoT = "opot"

// OPoT roles of a node on a chain (opot.Role's names).
const (
	OPoTHeadend  = "headend"
	OPoTTransit  = "transit"
	OPoTVerifier = "verifier"
)

// OPoTConfig is the typed configuration of a node's OPoT program
// (Program.Config of kind ProgramOPoT). The key material is not here: it
// is in Node.Secrets (compile.OPoTSecretName), which plan redacts.
type OPoTConfig struct {
	// Chains the node takes part in, by profile number.
	Chains []OPoTChain `json:"chains"`
	// Egress are the interfaces whose tc egress runs the headend stage
	// (the node is the headend of a chain): the kernel's seg6 encap has
	// built the SRH by then, whichever interface the route chose.
	Egress []string `json:"egress,omitempty"`
	// Ingress are the interfaces whose tcx ingress runs the transit
	// and/or verifier stages, in front of srchain's End program (none
	// when every transit entry is InEnd and the node verifies no chain).
	Ingress []string `json:"ingress,omitempty"`
}

// OPoTChain is one chain's entry of a node (the opot_chains map).
type OPoTChain struct {
	Name string `json:"name"`
	// Profile is the chain's profile number (chain index + 1), the key of
	// the BPF maps and of the node's secrets.
	Profile uint32 `json:"profile"`
	// Role is OPoTHeadend, OPoTTransit or OPoTVerifier.
	Role string `json:"role"`
	// Hop is the node's index j in the proof (0: headend, k-1: verifier).
	Hop int `json:"hop"`
	// K is the number of nodes in the proof (headend + NFs + verifier).
	K int `json:"k"`
	// SID is the destination the packet carries when the node's stage
	// runs: the first segment (headend, right after the encap), the NF's
	// SID as written in the segment list (transit), the egress SID
	// (verifier).
	SID netip.Addr `json:"sid"`
	// Last is the chain's egress SID, segment[0] of its SRH.
	Last netip.Addr `json:"last"`
	// SIDBits is the prefix length of the egress SID's route, LOC+FUNCT
	// (spec.SIDFormat.SIDBits; 0: 128), on the verifier: every packet
	// whose DA falls in SID/SIDBits is the chain's, verified or dropped
	// (docs/opot.md "Egress: nothing decapsulates unproven").
	SIDBits int `json:"sid_bits,omitempty"`
	// Slot is the profile slot the headend starts packets with.
	Slot uint8 `json:"slot,omitempty"`
	// InEnd: a transit entry whose SID an srchain End.* program serves
	// on the node, which updates the proof itself: the eBPF End (it
	// loads the OPoT maps: EndConfig.OPoT) or an End.AD / End.AD.flow
	// SR proxy (it loads them when the node has such an entry on one of
	// its SIDs). No transit stage runs for it.
	InEnd bool `json:"in_end,omitempty"`
}

// OPoTSlots is how many profiles a chain has at once (docs/opot.md
// "Profiles"): slot 0 the headend starts with, slot 1 the next key.
const OPoTSlots = 2

// OPoTSecretName names the Node.Secrets entry holding one node's
// parameters (opot.NodeParams, binary) of one slot of a chain's profile;
// profile is the chain's profile number.
func OPoTSecretName(chain string, profile, slot int) string {
	return fmt.Sprintf("opot/%s/%d/slot%d", chain, profile, slot)
}
