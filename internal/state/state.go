// Package state is the compiler's output and the applier's input: the
// desired configuration of every node, in plain data with no behavior.
//
// Conventions that producers and consumers rely on:
//   - every slice is sorted deterministically by the compiler (nodes by name,
//     interfaces by name, routes by table then prefix, SIDs by address), so
//     the JSON form is golden-testable;
//   - segment lists are in travel order (first SID visited first), never in
//     SRH order; the codec and the applier reverse them;
//   - a zero netip.Addr / netip.Prefix means "not set";
//   - it is self-contained: files the spec names (a firewall's rules_file)
//     are inlined at compile time, so no consumer reads user files;
//   - per-kind configuration is the kind's own typed struct, encoded as
//     JSON by the kind (Program.Config), never a string map;
//   - secret material lives in Node.Secrets, which Redacted blanks out
//     for display (`srchain plan`).
package state

import (
	"encoding/json"
	"net/netip"
)

// FormatVersion is the version of this package's JSON form. Bump it on
// any change a consumer of an older form would misread.
//
// 2: typed Program.Config (was Params), NF, Node.Digest, Node.Secrets.
// 3: Node.Shadowed, LocalSID.Chain; the controller stores a node as its
// base and one Part per chain (an agent of version 2 would apply the
// base alone and remove every chain).
const FormatVersion = 3

// Network is the desired state of a whole spec.
type Network struct {
	// Version is FormatVersion of the producer.
	Version int    `json:"version"`
	Name    string `json:"name"`
	Nodes   []Node `json:"nodes"`
	Links   []Link `json:"links"`
}

// Link is a point-to-point wire between two interfaces (a veth pair in the lab).
type Link struct {
	A   Endpoint `json:"a"`
	B   Endpoint `json:"b"`
	MTU int      `json:"mtu"`
}

// Endpoint names one interface of one node.
type Endpoint struct {
	Node      string `json:"node"`
	Interface string `json:"interface"`
}

// Node is everything one node must have.
type Node struct {
	Name string `json:"name"`
	// Role is "host" or "router" as in the spec.
	Role string `json:"role"`
	// Sysctls in application order (e.g. forwarding, seg6_enabled).
	Sysctls []Sysctl `json:"sysctls,omitempty"`
	// TunSrc is the outer source address of encapsulations (ip sr tunsrc).
	TunSrc netip.Addr `json:"tunsrc,omitzero"`
	// InterfacesUnmanaged: the node's interfaces (addresses, lo's
	// addresses, MTUs, up) belong to its operator; apply checks them and
	// fails on a mismatch (apply.ErrUnmanaged) instead of writing them.
	// An applier that predates the field writes them as before.
	InterfacesUnmanaged bool        `json:"interfaces_unmanaged,omitempty"`
	Interfaces          []Interface `json:"interfaces"`
	// Loopback holds addresses placed on lo (service or host addresses).
	Loopback []netip.Prefix `json:"loopback,omitempty"`
	Routes   []Route        `json:"routes,omitempty"`
	// Shadowed are the plain routes that a chain's SR policy to the same
	// destination replaces (Shadow): not installed, kept so that the
	// node's state without that chain has them (Split, Join).
	Shadowed []Route    `json:"shadowed,omitempty"`
	Rules    []Rule     `json:"rules,omitempty"`
	SIDs     []LocalSID `json:"sids,omitempty"`
	Programs []Program  `json:"programs,omitempty"`
	// Secrets holds key material (OPoT shares, masks); see Redacted.
	Secrets []Secret `json:"secrets,omitempty"`
	// Digest identifies this desired state of the node (see Seal): two
	// states with the same digest are the same, so an agent or the lab
	// can tell at a glance whether a node's state changed.
	Digest string `json:"digest,omitempty"`
}

// Sysctl is one kernel setting, key in dotted form.
type Sysctl struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Interface is one network interface of a node.
type Interface struct {
	Name  string         `json:"name"`
	MTU   int            `json:"mtu"`
	Addrs []netip.Prefix `json:"addrs,omitempty"`
	Peer  Endpoint       `json:"peer"`
	// GRO turns generic receive offload on: the peer redirects frames
	// into this veth with XDP, which the kernel drops silently unless the
	// receiving end has NAPI (MACHINE-NOTES; GRO gives it NAPI).
	GRO bool `json:"gro,omitempty"`
	// SoftwareChecksum turns transmit checksum offload off on a veth
	// (and so TSO): its peer runs XDP, and a frame a veth's XDP program
	// redirects leaves the skb's checksum state behind, so a packet whose
	// checksum was left for the hardware to complete (CHECKSUM_PARTIAL,
	// what a local sender or GRO makes; nothing completes it on a veth)
	// would go on with a wrong one. A real NIC completes it on the wire;
	// the applier leaves other links alone.
	SoftwareChecksum bool `json:"software_checksum,omitempty"`
	// NoGSO turns TSO and GSO off: packets leave segmented, as on a
	// wire. NoGRO turns GRO off: received packets are not aggregated.
	// For the interfaces facing (NoGSO) and of (NoGRO) a node that writes
	// a per-packet OPoT proof at tc, which cannot prove a GSO packet's
	// segments one by one (docs/opot.md "GSO").
	NoGSO bool `json:"no_gso,omitempty"`
	NoGRO bool `json:"no_gro,omitempty"`
}

// EncapMode is how an SR policy adds its segment list.
type EncapMode string

const (
	ModeEncap  EncapMode = "encap"  // H.Encaps (RFC 8986 5.1): outer IPv6 + SRH
	ModeInsert EncapMode = "inline" // H.Insert: SRH inserted after the IPv6 header
)

// SREncap is an SR policy attached to a route (seg6 lwtunnel).
type SREncap struct {
	Mode     EncapMode    `json:"mode"`
	Segments []netip.Addr `json:"segments"` // travel order
	// TLVs is the SRH's TLV area, after the segments: the kernel copies
	// it into every packet. Its length is a multiple of 16 (the bytes
	// are read back as segments, see apply). The headend of an OPoT
	// chain behind the kernel's encap reserves its TLV here
	// (opot.Reservation).
	TLVs []byte `json:"tlvs,omitempty"`
}

// Route is one route; Table 0 means the main table.
type Route struct {
	Table int          `json:"table,omitempty"`
	Dst   netip.Prefix `json:"dst"`
	Via   netip.Addr   `json:"via,omitzero"`
	Dev   string       `json:"dev,omitempty"`
	Encap *SREncap     `json:"encap,omitempty"`
	// Chain names the chain this route steers into, for status and trace.
	Chain string `json:"chain,omitempty"`
	// MSS, on a chain's policy route at its ingress, is the TCP MSS that
	// fits the chain (compile.MSSFor): the node clamps the SYNs of the
	// chain's flows, both ways, to it (internal/mss). 0: no clamp.
	MSS int `json:"mss,omitempty"`
}

// PortRange is an inclusive port range; zero means any.
type PortRange struct {
	From uint16 `json:"from"`
	To   uint16 `json:"to"`
}

// Rule is a policy-routing rule (ip rule) used for 5-tuple classifiers:
// it sends matching traffic to a table holding the chain's SR policy.
type Rule struct {
	Priority int          `json:"priority"`
	Family   int          `json:"family"` // 4 or 6
	Src      netip.Prefix `json:"src,omitzero"`
	Dst      netip.Prefix `json:"dst,omitzero"`
	IPProto  uint8        `json:"ipproto,omitempty"`
	SPort    PortRange    `json:"sport,omitzero"`
	DPort    PortRange    `json:"dport,omitzero"`
	IIF      string       `json:"iif,omitempty"`
	Table    int          `json:"table"`
	Chain    string       `json:"chain,omitempty"`
}

// Behavior is an SRv6 endpoint behavior (RFC 8986 names).
type Behavior string

const (
	End    Behavior = "End"
	EndX   Behavior = "End.X"
	EndDX4 Behavior = "End.DX4"
	EndDX6 Behavior = "End.DX6"
	EndDT6 Behavior = "End.DT6"
	// EndB6Encaps is a binding SID (RFC 8986 section 4.13): it moves the
	// packet's SRH on to its next segment and pushes Segments in a new
	// outer IPv6 header and SRH (a pathlet, seed 004).
	EndB6Encaps Behavior = "End.B6.Encaps"
)

// Datapath says who implements a SID on a node.
type Datapath string

const (
	Kernel Datapath = "kernel" // seg6local route
	EBPF   Datapath = "ebpf"   // srchain tc program + SID map entry
)

// LocalSID is one SID instantiated on a node.
type LocalSID struct {
	// SID is the SID prefix: /128, or shorter when ARGS bits follow.
	SID      netip.Prefix `json:"sid"`
	Behavior Behavior     `json:"behavior"`
	NH4      netip.Addr   `json:"nh4,omitzero"`
	NH6      netip.Addr   `json:"nh6,omitzero"`
	OIF      string       `json:"oif,omitempty"`
	Table    int          `json:"table,omitempty"`
	Datapath Datapath     `json:"datapath"`
	// NF is the network function this SID fronts ("" for egress SIDs).
	NF string `json:"nf,omitempty"`
	// Chain is the chain this SID belongs to: its egress (decapsulation)
	// SID or a binding SID of its pathlets; "" for SIDs shared by chains.
	Chain string `json:"chain,omitempty"`
	// NextCSID gives End the NEXT-C-SID flavor (RFC 9800 section 4.1)
	// when set: a compressed chain crosses this SID.
	NextCSID CSIDFlavor `json:"next_csid,omitzero"`
	// Segments is the segment list End.B6.Encaps pushes, in travel
	// order.
	Segments []netip.Addr `json:"segments,omitempty"`
}

// CSIDFlavor is the NEXT-C-SID layout: locator block and node+function
// lengths in bits (the kernel's lblen and nflen).
type CSIDFlavor struct {
	BlockBits        int `json:"block_bits"`
	NodeFunctionBits int `json:"node_function_bits"`
}

// Expand returns the SIDs a C-SID container stands for: each non-zero
// C-SID after the locator block, as a full SID (block + C-SID, zeros
// after), in travel order (RFC 9800 section 4.1).
func (f CSIDFlavor) Expand(container netip.Addr) []netip.Addr {
	b := container.As16()
	lb, nb := f.BlockBits/8, f.NodeFunctionBits/8
	var out []netip.Addr
	for off := lb; nb > 0 && off+nb <= 16; off += nb {
		var sid [16]byte
		copy(sid[:lb], b[:lb])
		copy(sid[lb:lb+nb], b[off:off+nb])
		zero := true
		for _, x := range b[off : off+nb] {
			zero = zero && x == 0
		}
		if zero {
			break
		}
		out = append(out, netip.AddrFrom16(sid))
	}
	return out
}

// ProgramEnd is the program kind of srchain's tc End program, which
// serves a node's "ebpf" SIDs (internal/kinds/end).
const ProgramEnd = "end"

// EndConfig is the typed configuration of the End program (Program.Config
// of kind ProgramEnd; none: the zero value).
type EndConfig struct {
	// OPoT: the node's OPoT program has transit entries done in the End
	// (OPoTChain.InEnd); the End loads that program's pinned maps to
	// update their proofs (bpf/lib/end_opot.h).
	OPoT bool `json:"opot,omitempty"`
}

// Program is an eBPF program attachment the node needs.
type Program struct {
	// Kind names the program (e.g. "end", "firewall"); its driver is
	// registered by an NF kind (internal/kind).
	Kind string `json:"kind"`
	// Interfaces it attaches to (tc ingress).
	Interfaces []string `json:"interfaces"`
	// NF is the network function the program implements ("" for a
	// node-wide program such as "end").
	NF string `json:"nf,omitempty"`
	// Config is the kind's typed configuration as JSON (the kind's
	// package defines the struct and decodes it). encoding/json writes
	// struct fields in declaration order, so the same config always
	// gives the same bytes; kinds keep any list in it sorted.
	Config json.RawMessage `json:"config,omitempty"`
	// XDP: the program's XDP stage runs in the node's XDP pipeline (the
	// program of kind "pipeline", PipelineConfig), in front of its tc
	// program, which stays attached for what XDP hands to the stack.
	XDP bool `json:"xdp,omitempty"`
}

// Secret is one piece of key material a node's programs need. It lives
// apart from the programs' Config so that it can be redacted and, later,
// stored apart.
type Secret struct {
	// Name says what it is, e.g. "opot/chain1/share".
	Name string `json:"name"`
	// NF is the network function that uses it.
	NF    string `json:"nf,omitempty"`
	Value []byte `json:"value,omitempty"`
	// Redacted is set, and Value empty, in a redacted copy.
	Redacted bool `json:"redacted,omitempty"`
}
