package state

import "net/netip"

// ProgramIngress is the program kind of srchain's eBPF ingress (headend),
// which steers a router's chains when its spec says `ingress: ebpf`
// (internal/ingress).
const ProgramIngress = "ingress"

// IngressConfig is the typed configuration of a node's ingress program
// (Program.Config). The node's TunSrc is the outer source; the hop limit
// of IPv4 packets and the flow label mode are read from the node's
// sysctls when applied, as the kernel reads them per packet.
type IngressConfig struct {
	// Chains in spec order (the classification order is derived from it:
	// internal/ingress Rules).
	Chains []IngressChain `json:"chains"`
}

// IngressChain is one chain the node is the ingress of.
type IngressChain struct {
	Name string    `json:"name"`
	Mode EncapMode `json:"mode"`
	// Segments in travel order, as SREncap: encap mode, the NF SIDs and
	// the egress SID; insert mode, the NF SIDs (the SRH's segment[0] is
	// the packet's destination).
	Segments []netip.Addr `json:"segments"`
	// Dev is the device of the chain's kernel policy route: the outer
	// hop limit of an IPv4 packet is its IPv6 hop_limit, as the kernel's
	// ip6_dst_hoplimit takes it.
	Dev string `json:"dev"`
	// The classifier: destinations, sources (none: any), IP protocol (0:
	// any), port ranges (zero: any).
	Dst   []netip.Prefix `json:"dst"`
	Src   []netip.Prefix `json:"src,omitempty"`
	Proto uint8          `json:"proto,omitempty"`
	SPort PortRange      `json:"sport,omitzero"`
	DPort PortRange      `json:"dport,omitzero"`
	// Ext is the headend extension (bpf/lib/ingress.h ing_headend_ext):
	// IngressExtOPoT for a chain with opot (the headend writes the OPoT
	// TLV as it encapsulates); 0: none.
	Ext uint32 `json:"ext,omitempty"`
	// Pool, when set, makes the chain's NF at one position a pool of
	// instances chosen per flow (per-flow setup, seed 004): Segments is
	// the first instance's list, Pool.Variants every instance's.
	Pool *IngressPool `json:"pool,omitempty"`
}

// IngressExtOPoT is IngressChain.Ext of an OPoT chain (ING_EXT_OPOT).
const IngressExtOPoT = 1

// IngressPool is the per-flow choice among a pool's instances for one
// chain: the ingress reports the first packet of a flow it has no entry
// for, the node's flow-setup loop (internal/flowsetup) picks a variant
// and installs the flow's entry, later packets follow it.
type IngressPool struct {
	Name string `json:"name"`
	// Pick is how an instance is chosen: PickLeastLoaded or PickHash.
	Pick string `json:"pick"`
	// NFs names the instances, Variants their segment lists (travel
	// order), in the same order.
	NFs      []string       `json:"nfs"`
	Variants [][]netip.Addr `json:"variants"`
}

// Pool pick methods.
const (
	PickLeastLoaded = "least-loaded" // fewest active flows
	PickHash        = "hash"         // a hash of the flow's 5-tuple
)
