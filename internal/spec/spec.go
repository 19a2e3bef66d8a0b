// Package spec is srchain's input: the YAML description of a lab or
// deployment (nodes, links, network functions, chains, probe traffic).
//
// Decoding is strict: an unknown key, a wrong type or an unparsable address
// is an error carrying the file, line, column and field path
// (e.g. chains[1].nfs[2]). Validate checks the meaning (references,
// addressing, SIDs, MTU budget, connectivity) and reports every problem at
// once with errors.Join. docs/spec.md is the user-facing reference.
package spec

import (
	"net/netip"

	"gopkg.in/yaml.v3"
)

// Spec is one YAML document.
type Spec struct {
	// Name names the lab; it prefixes namespace names, so it is short.
	Name      string    `yaml:"name"`
	SIDFormat SIDFormat `yaml:"sid_format"`
	// Routing is how routers learn each other's locators: RoutingStatic
	// (the default: routes the compiler computes) or RoutingBGP.
	Routing string `yaml:"routing"`
	Nodes   []Node `yaml:"nodes"`
	Links   []Link `yaml:"links"`
	NFs     []NF   `yaml:"nfs"`
	// Pools are sets of interchangeable NF instances a chain can name in
	// its nfs (per-flow setup, pools.go).
	Pools   []Pool  `yaml:"pools"`
	Chains  []Chain `yaml:"chains"`
	Traffic []Probe `yaml:"traffic"`

	// File is the path the spec was read from, used in error messages.
	File string `yaml:"-"`
	// pos maps a field path to where it appears in the file.
	pos map[string]pos `yaml:"-"`
	// tainted are the fields an unknown key was a typo of (the field it
	// is nearest to): their validation errors would only echo the typo
	// (Check drops them).
	tainted map[string]bool `yaml:"-"`
	// truncated: decoding stopped at the node limit, so everything after
	// that point is missing and validating the rest would only report
	// what was never read (Check).
	truncated bool
	// files caches ReadFile.
	files map[string]readResult `yaml:"-"`
	// paths caches ShortestPaths by root for the topology it was computed
	// on (pathsShape): validation and compilation ask for one tree per
	// chain leg, tens of thousands of times on the same few roots.
	paths      map[string]*Tree `yaml:"-"`
	pathsShape [2]int           `yaml:"-"`
}

// SIDFormat splits a SID into LOC:FUNCT:ARGS (RFC 8986 section 3.1).
type SIDFormat struct {
	LocatorBits  int `yaml:"locator_bits"`
	FunctionBits int `yaml:"function_bits"`
	ArgsBits     int `yaml:"args_bits"`
	// CSID is the compressed-SID layout (RFC 9800), needed by chains
	// with `compression: next-c-sid`.
	CSID *CSIDFormat `yaml:"csid"`
}

// CSIDFormat splits LOC:FUNCT into a locator block shared by the SIDs of
// a compressed chain and a node+function C-SID (RFC 9800 section 4.1,
// the kernel's NEXT-C-SID flavor lblen / nflen).
type CSIDFormat struct {
	BlockBits        int `yaml:"block_bits"`
	NodeFunctionBits int `yaml:"node_function_bits"`
}

// PerContainer is how many C-SIDs one 128-bit container holds after its
// locator block.
func (f CSIDFormat) PerContainer() int {
	if f.NodeFunctionBits <= 0 || f.BlockBits >= 128 {
		return 0
	}
	return (128 - f.BlockBits) / f.NodeFunctionBits
}

// Values of Spec.Routing.
const (
	// RoutingStatic: the compiler gives every router a route to every
	// locator and link subnet (shortest paths).
	RoutingStatic = "static"
	// RoutingBGP: the locators are advertised and learned with BGP
	// (FRR on every router, eBGP on every router-router link); link
	// subnets stay static (docs/spec.md "Routing").
	RoutingBGP = "bgp"
)

// Node roles.
const (
	RoleHost   = "host"
	RoleRouter = "router"

	// RoleLegacyNF is an SR-unaware network function (seed 001): its
	// own namespace with one or two links to the router of the SR
	// proxy that serves it, IP forwarding on, default routes back to
	// that router, and real software (nftables, tc) configured from
	// Node.LegacyNF. It forwards plain packets and knows nothing of SRv6.
	RoleLegacyNF = "legacy-nf"
)

// Datapaths: who runs a router's End / End.X SIDs.
const (
	DatapathKernel = "kernel"
	DatapathEBPF   = "ebpf"
	// DatapathXDP is DatapathEBPF with the End program's XDP twin in
	// front of its tc program (docs/datapath.md "XDP from the spec").
	DatapathXDP = "xdp"
)

// EBPFDatapath reports whether srchain's End program serves the router's
// End / End.X SIDs (datapath ebpf or xdp).
func (n *Node) EBPFDatapath() bool {
	return n.Datapath == DatapathEBPF || n.Datapath == DatapathXDP
}

// Ingresses: who steers traffic into the chains at a router (the
// headend, RFC 8986 5.1 H.Encaps / H.Insert).
const (
	IngressKernel = "kernel"
	IngressEBPF   = "ebpf"
)

// Node is a host (traffic source or sink, never forwards) or a router
// (forwards, may own a locator and SIDs).
type Node struct {
	Name string `yaml:"name"`
	Role string `yaml:"role"`
	// Locator is the router's SID block (LOC, RFC 8986 section 3.1).
	Locator  netip.Prefix `yaml:"locator"`
	Datapath string       `yaml:"datapath"`
	// Ingress says who classifies and encapsulates the chains this
	// router is the ingress of: IngressKernel (ip rules + seg6 routes)
	// or IngressEBPF (srchain's ingress program, docs/datapath.md).
	Ingress string `yaml:"ingress"`
	// LegacyNF configures a node with role legacy-nf (nil: defaults).
	LegacyNF *LegacyNF `yaml:"legacy_nf"`
	// TunnelSource is a router's outer source address for the SRv6
	// encapsulations it makes (`ip sr tunsrc`, the eBPF ingress), e.g.
	// an address the host already has on lo; unset: the router's first
	// IPv6 interface address (docs/deploy.md).
	TunnelSource netip.Addr `yaml:"tunnel_source"`
	// InterfacesManaged false says the host's interfaces are configured
	// already (addresses, MTUs, up): srchain checks them and reports a
	// mismatch instead of writing them. nil: true (managed).
	InterfacesManaged *bool `yaml:"interfaces_managed"`
}

// LegacyNF is the software of an SR-unaware network function node
// (role legacy-nf, docs/proxy.md): what it runs on the plain packets its
// SR proxy hands it.
type LegacyNF struct {
	// Return is the NF's interface toward the proxy's IFACE-IN: its
	// default routes leave there. Needed when the node has two links
	// (in on one, out on the other); with one link it is that link.
	Return string `yaml:"return"`
	// Ruleset is nft text, the body of srchain's table inet srchain_nf
	// (chains with hooks: a stateful firewall with ct state, NAT with
	// masquerade or snat), loaded atomically with the real nft.
	Ruleset string `yaml:"ruleset"`
	// RulesetFile is the same from a file (relative to the spec).
	RulesetFile string `yaml:"ruleset_file"`
	// RateLimit puts a tc tbf rate limiter on interfaces of the node.
	RateLimit []RateLimit `yaml:"rate_limit"`
	// Routes send some destinations out of another link than the
	// default routes: a two-armed NF (inside and outside) serving a
	// proxy SID per direction.
	Routes []LegacyRoute `yaml:"routes"`
}

// LegacyRoute is a static route of a legacy NF: dst via the router on
// interface.
type LegacyRoute struct {
	Dst       netip.Prefix `yaml:"dst"`
	Interface string       `yaml:"interface"`
}

// RateLimit is one token-bucket limiter (tc qdisc tbf) on the egress of
// an interface.
type RateLimit struct {
	Interface string `yaml:"interface"`
	// RateKbit is the rate in kbit/s (1000 bit/s).
	RateKbit int `yaml:"rate_kbit"`
	// BurstBytes is the bucket size (default DefaultBurstBytes).
	BurstBytes int `yaml:"burst_bytes"`
	// LatencyMS bounds how long a packet may wait (default
	// DefaultLatencyMS).
	LatencyMS int `yaml:"latency_ms"`
}

// Rate limiter defaults and bounds (tc tbf).
const (
	DefaultBurstBytes = 32 * 1024
	DefaultLatencyMS  = 50
	MaxRateKbit       = 100_000_000 // 100 Gbit/s
	MaxBurstBytes     = 64 << 20
	MaxLatencyMS      = 10_000
)

// Link is a point-to-point wire between two node interfaces.
type Link struct {
	// Name is optional; when set it must be unique.
	Name      string     `yaml:"name"`
	Endpoints []Endpoint `yaml:"endpoints"`
	MTU       int        `yaml:"mtu"`
}

// Endpoint is one end of a link.
type Endpoint struct {
	Node      string         `yaml:"node"`
	Interface string         `yaml:"interface"`
	Addresses []netip.Prefix `yaml:"addresses"`
}

// SID behaviors an NF may ask for.
const (
	BehaviorEnd  = "End"
	BehaviorEndX = "End.X"
)

// NF is a network function instantiated at a SID on a router.
type NF struct {
	Name string `yaml:"name"`
	// Kind says what the NF does; see Kinds.
	Kind string `yaml:"kind"`
	Node string `yaml:"node"`
	// SRAware is false for legacy NFs that need an SR proxy (seed 001).
	SRAware *bool `yaml:"sr_aware"`
	// SID is optional; when unset one is allocated from the node's locator.
	SID       netip.Addr `yaml:"sid"`
	Behavior  string     `yaml:"behavior"`
	Interface string     `yaml:"interface"`
	// Config is kind-specific and decoded by the kind's owner.
	Config yaml.Node `yaml:"config"`
}

// Chain modes.
const (
	ModeEncap  = "encap"  // H.Encaps, RFC 8986 section 5.1
	ModeInsert = "insert" // H.Insert, SRH inserted into the original packet
)

// Egress behaviors.
const (
	EgressDX4 = "End.DX4"
	EgressDX6 = "End.DX6"
	EgressDT6 = "End.DT6"
)

// Chain steers traffic matching a classifier through NFs in order.
type Chain struct {
	Name    string   `yaml:"name"`
	Ingress string   `yaml:"ingress"`
	Egress  string   `yaml:"egress"`
	Match   Match    `yaml:"match"`
	NFs     []string `yaml:"nfs"`
	Mode    string   `yaml:"mode"`
	// EgressBehavior decapsulates at the egress (encap mode only).
	EgressBehavior string `yaml:"egress_behavior"`
	// EgressSID is optional; when unset one is allocated from the egress
	// locator.
	EgressSID netip.Addr `yaml:"egress_sid"`
	// Compression packs the chain's SIDs into C-SID containers
	// (CompressionNextCSID, RFC 9800); "" for full SIDs.
	Compression string `yaml:"compression"`
	// Args gives an NF of the chain the ARGS value this chain writes
	// into its SID (RFC 8986 section 3.1), by NF name: two chains can
	// reach one SID with different arguments (End.AN.NF's ARG -> mark,
	// the firewall's eval-args). Unset: the SID as the NF has it.
	Args map[string]uint64 `yaml:"args"`
	// OPoT turns on ordered proof of transit for the chain (seed 003;
	// docs/opot.md): the compiler generates its key profile.
	OPoT bool `yaml:"opot"`
	// MaxSIDs bounds the segments of each SRH the chain's packets carry
	// (0: no bound). A longer chain is split into pathlets joined by
	// binding SIDs (seed 004; pathlets.go, docs/controller.md
	// "Pathlets").
	MaxSIDs int `yaml:"max_sids"`
	// Pool is the pool the chain names in its nfs, PoolAt its position
	// there; Parse puts the pool's first instance in NFs[PoolAt] (the
	// chain as its kernel route steers it) and keeps the pool here.
	Pool   string `yaml:"-"`
	PoolAt int    `yaml:"-"`
}

// CompressionNextCSID is the NEXT-C-SID flavor (RFC 9800 section 4.1).
const CompressionNextCSID = "next-c-sid"

// Match is a chain's classifier: destination prefixes plus an optional
// 5-tuple refinement.
type Match struct {
	Dst   []netip.Prefix `yaml:"dst"`
	Src   []netip.Prefix `yaml:"src"`
	Proto string         `yaml:"proto"`
	DPort PortRange      `yaml:"dport"`
	SPort PortRange      `yaml:"sport"`
}

// Probe is a piece of lab traffic with the chain it must cross.
type Probe struct {
	Name  string     `yaml:"name"`
	From  string     `yaml:"from"`
	To    netip.Addr `yaml:"to"`
	Proto string     `yaml:"proto"`
	DPort int        `yaml:"dport"`
	// Expect is a chain name, or ExpectNone for traffic no chain steers.
	Expect string `yaml:"expect"`
}

// ExpectNone marks a probe that must not be steered into any chain.
const ExpectNone = "none"

// ExpectDrop marks a probe that must not arrive (an NF on its path drops
// it).
const ExpectDrop = "drop"

// Protocol names accepted in match.proto and traffic[].proto.
const (
	ProtoTCP    = "tcp"
	ProtoUDP    = "udp"
	ProtoICMP   = "icmp" // ICMP for IPv4, ICMPv6 for IPv6
	ProtoICMPv6 = "icmpv6"
)

// HasConfig reports whether the NF has a config section (not absent, not
// null).
func (n *NF) HasConfig() bool {
	return n.Config.Kind != 0 && !(n.Config.Kind == yaml.ScalarNode && n.Config.ShortTag() == "!!null")
}

// IsSRAware reports whether the NF processes SRv6 itself (the default).
func (n *NF) IsSRAware() bool { return n.SRAware == nil || *n.SRAware }

// Node returns the node with that name, or nil.
func (s *Spec) Node(name string) *Node {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// NF returns the NF with that name, or nil.
func (s *Spec) NF(name string) *NF {
	for i := range s.NFs {
		if s.NFs[i].Name == name {
			return &s.NFs[i]
		}
	}
	return nil
}

// Chain returns the chain with that name, or nil.
func (s *Spec) Chain(name string) *Chain {
	for i := range s.Chains {
		if s.Chains[i].Name == name {
			return &s.Chains[i]
		}
	}
	return nil
}

// Family is the inner address family of the chain's traffic (4 or 6),
// taken from its first destination prefix; 0 when it has none.
func (c *Chain) Family() int {
	if len(c.Match.Dst) == 0 || !c.Match.Dst[0].IsValid() {
		return 0
	}
	if c.Match.Dst[0].Addr().Is4() {
		return 4
	}
	return 6
}

// HasFiveTuple reports whether the classifier needs policy routing (more
// than a destination prefix).
func (m *Match) HasFiveTuple() bool {
	return len(m.Src) > 0 || m.Proto != "" || !m.DPort.IsZero() || !m.SPort.IsZero()
}
