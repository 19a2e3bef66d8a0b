// Package proxy is the NF kind "proxy": an SR proxy (seed 001,
// draft-ietf-spring-sr-service-programming section 6) on a router in
// front of an SR-unaware NF that runs on a node with role legacy-nf. The
// proxy's SID is an ordinary local SID of the router; srchain's proxy
// program (internal/proxydp) serves it at tcx ingress: towards the NF it
// removes (End.AS, End.AD, End.AD.flow) or masks (End.AM) the SRv6
// encapsulation, and on the NF's way back it puts it on again.
// docs/proxy.md has the design.
//
// Spec:
//
//	nfs:
//	  - name: fw
//	    kind: proxy
//	    node: r2               # the proxy's router
//	    sr_aware: false        # optional: a proxy fronts an SR-unaware NF
//	    config:
//	      legacy_nf: fw1       # the node (role legacy-nf) running the NF
//	      behavior: end.ad     # end.as | end.ad | end.ad-flow | end.am | end.am-nat
//	      inner: ipv4          # end.as/ad/ad-flow: ipv4 | ipv6 (default: the chains' family)
//	      segments: [...]      # end.as: the list pushed after the NF (default: the chain's rest)
//	      source: "fc00::1"    # end.as: outer source (default: the router's tunsrc)
//	      to_nf: eth2          # IFACE-OUT on the router (default: derived from the NF's links)
//	      from_nf: eth3        # IFACE-IN on the router (default: the NF's return link)
//	      cache_size: 4096     # end.ad-flow: flows cached
//	      idle_timeout: 30s    # end.ad-flow: a flow idle this long may be evicted
package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/end"
	"github.com/srchain/srchain/internal/kinds/netfilter"
	"github.com/srchain/srchain/internal/legacynf"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Name is the NF kind and the state.Program kind.
const Name = "proxy"

// Behaviour names in the spec.
const (
	AS     = "end.as"
	AD     = "end.ad"
	ADFlow = "end.ad-flow"
	AM     = "end.am"
	AMNAT  = "end.am-nat"
)

var behaviors = map[string]state.Behavior{
	AS: state.EndAS, AD: state.EndAD, ADFlow: state.EndADFlow, AM: state.EndAM, AMNAT: state.EndAMNAT,
}

// Flow cache bounds (end.ad-flow).
const (
	DefaultCacheSize   = 4096
	MaxCacheSize       = 1 << 20
	DefaultIdleTimeout = 30 * time.Second
	MinIdleTimeout     = time.Second
	MaxIdleTimeout     = time.Hour
	// MaxSegments is the longest list End.AS pushes (the proxy
	// program's SRCHAIN_MAX_SEGS).
	MaxSegments = 16
)

// ErrBadConfig: a state.Program whose config does not describe a proxy.
var ErrBadConfig = errors.New("bad proxy program config")

func init() { kind.Register(Kind{}) }

// Kind is the proxy kind.
type Kind struct{}

// Name implements kind.Kind.
func (Kind) Name() string { return Name }

// Drivers: the proxy program.
func (Kind) Drivers() map[string]kind.Driver { return map[string]kind.Driver{Name: driver{}} }

// ServesLegacy: a proxy fronts an SR-unaware NF (kind.LegacyProxy).
func (Kind) ServesLegacy() bool { return true }

// Config is an NF's config section.
type Config struct {
	LegacyNF    string       `yaml:"legacy_nf"`
	Behavior    string       `yaml:"behavior"`
	Inner       string       `yaml:"inner"`
	Segments    []netip.Addr `yaml:"segments"`
	Source      netip.Addr   `yaml:"source"`
	ToNF        string       `yaml:"to_nf"`
	FromNF      string       `yaml:"from_nf"`
	CacheSize   *int         `yaml:"cache_size"`
	IdleTimeout string       `yaml:"idle_timeout"`

	segmentsSet bool // segments given, even if none of them was valid
}

var knownKeys = []string{"legacy_nf", "behavior", "inner", "segments", "source", "to_nf", "from_nf", "cache_size", "idle_timeout"}

// Program is the typed config of a proxy program in the desired state.
type Program struct {
	// SID is the proxy's SID (no ARGS: the program matches it exactly).
	SID      netip.Prefix   `json:"sid"`
	Behavior state.Behavior `json:"behavior"`
	// LegacyNF is the node running the NF.
	LegacyNF string `json:"legacy_nf"`
	// IfaceOut (to the NF) and IfaceIn (back from it) on the router.
	IfaceOut string `json:"iface_out"`
	IfaceIn  string `json:"iface_in"`
	// NFNext6 / NFNext4 are the NF's addresses on IfaceOut's link.
	NFNext6 netip.Addr `json:"nf_next6"`
	NFNext4 netip.Addr `json:"nf_next4,omitzero"`
	// Inner is the inner family End.AS/AD/AD.flow accept (4 or 6).
	Inner int `json:"inner,omitempty"`
	// Source and Segments (travel order) are what End.AS pushes.
	Source   netip.Addr   `json:"source,omitzero"`
	Segments []netip.Addr `json:"segments,omitempty"`
	// CacheSize and IdleTimeoutMS bound End.AD.flow's cache.
	CacheSize     int   `json:"cache_size,omitempty"`
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	// SRSide are the router's interfaces where SRv6 packets for the SID
	// arrive (those to routers and hosts), sorted.
	SRSide []string `json:"sr_side"`
	// OPoT: a chain with opot crosses this End.AD / End.AD.flow proxy,
	// which carries each packet's OPoT TLV across the NF (docs/proxy.md
	// "OPoT through a proxy").
	OPoT bool `json:"opot,omitempty"`
}

// NeedsTail reports whether b hands the NF the inner packet and so
// needs a segment after it: it cannot be a chain's last segment.
func NeedsTail(b state.Behavior) bool {
	return b == state.EndAS || b == state.EndAD || b == state.EndADFlow
}

func valueNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func nfPath(path string) string { return strings.TrimSuffix(path, ".config") }

// decode reads the config, reporting keys and types.
func decode(s *spec.Spec, nf *spec.NF, path string) (Config, []error) {
	var c Config
	node := &nf.Config
	if !nf.HasConfig() {
		return c, []error{s.ErrorAt(path, nil, "proxy needs a config with legacy_nf and behavior")}
	}
	if node.Kind != yaml.MappingNode {
		return c, []error{s.ErrorAt(path, node, "proxy config must be a mapping")}
	}
	var errs []error
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		if !slices.Contains(knownKeys, k.Value) {
			errs = append(errs, s.ErrorAt(path+"."+spec.Clip(k.Value), k, "unknown proxy config key %s (want %s)", spec.Clip(k.Value), strings.Join(knownKeys, ", ")))
		}
	}
	for _, k := range knownKeys {
		v := valueNode(node, k)
		if v == nil {
			continue
		}
		var err error
		switch k {
		case "segments":
			c.segmentsSet = true
			if v.Kind != yaml.SequenceNode {
				err = fmt.Errorf("want a list of IPv6 addresses")
				break
			}
			for i, e := range v.Content {
				if a, ok := unicast6(e); ok {
					c.Segments = append(c.Segments, a)
				} else {
					errs = append(errs, s.ErrorAt(fmt.Sprintf("%s.segments[%d]", path, i), e, "segment %s is not a unicast IPv6 address", echo(e)))
				}
			}
		case "source":
			if a, ok := unicast6(v); ok {
				c.Source = a
			} else {
				err = fmt.Errorf("source %s is not a unicast IPv6 address", echo(v))
			}
		case "cache_size":
			n, perr := strconv.ParseInt(v.Value, 0, 64)
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || perr != nil {
				err = fmt.Errorf("expected an integer, got %s", echo(v))
			} else {
				size := int(n)
				c.CacheSize = &size
			}
		default:
			var str string
			if v.Kind != yaml.ScalarNode {
				err = fmt.Errorf("want a string")
			} else if err = v.Decode(&str); err == nil {
				switch k {
				case "legacy_nf":
					c.LegacyNF = str
				case "behavior":
					c.Behavior = str
				case "inner":
					c.Inner = str
				case "to_nf":
					c.ToNF = str
				case "from_nf":
					c.FromNF = str
				case "idle_timeout":
					c.IdleTimeout = str
				}
			}
		}
		if err != nil {
			errs = append(errs, s.ErrorAt(path+"."+k, v, "%s: bad value: %v", k, err))
		}
	}
	return c, errs
}

// unicast6 reads a routable IPv6 unicast address from n, what End.AS
// pushes as a segment or as the outer source (RFC 8754 segments are
// global addresses; a link-local one means nothing past the link).
func unicast6(n *yaml.Node) (netip.Addr, bool) {
	if n.Kind != yaml.ScalarNode {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(n.Value)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" || a.IsMulticast() || a.IsUnspecified() ||
		a.IsLoopback() || a.IsLinkLocalUnicast() {
		return netip.Addr{}, false
	}
	return a, true
}

// echo names a config value in an error, clipped (spec.Clip).
func echo(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return "(not a single value)"
	}
	return spec.Clip(n.Value)
}

// resolved is a config checked against the topology.
type resolved struct {
	cfg      Config
	behavior state.Behavior
	out, in  spec.Hop // router -> NF over IfaceOut; router side of IfaceIn
	inner    int
	segments []netip.Addr
	timeout  time.Duration
	size     int
}

// Check validates an NF's config and its place in the spec.
func (Kind) Check(s *spec.Spec, nf *spec.NF, path string) []error {
	_, errs := resolve(s, nf, path)
	return errs
}

// resolve checks and derives everything Compile needs; errs empty means
// it is complete.
func resolve(s *spec.Spec, nf *spec.NF, path string) (resolved, []error) {
	var r resolved
	c, errs := decode(s, nf, path)
	r.cfg = c
	np := nfPath(path)
	at := func(key string) *yaml.Node {
		if nf.Config.Kind == yaml.MappingNode {
			if v := valueNode(&nf.Config, key); v != nil {
				return v
			}
		}
		return nil
	}
	bad := func(key, format string, args ...any) {
		p := path
		if key != "" {
			p += "." + key
		}
		errs = append(errs, s.ErrorAt(p, at(key), format, args...))
	}
	if nf.SRAware != nil && *nf.SRAware {
		errs = append(errs, s.ErrorAt(np+".sr_aware", nil, "a proxy fronts an SR-unaware NF: sr_aware must be false or unset"))
	}
	if nf.Behavior == spec.BehaviorEndX || nf.Interface != "" {
		errs = append(errs, s.ErrorAt(np+".behavior", nil, "a proxy's SID behaviour is config.behavior (%s); leave behavior End and interface unset", strings.Join(slices.Sorted(mapsKeys()), ", ")))
	}
	if nf.SID.IsValid() && s.SIDFormat.ArgsBits > 0 && s.SIDFormat.WithArgs(nf.SID, 0) != nf.SID {
		errs = append(errs, s.ErrorAt(np+".sid", nil, "SID %s has ARGS bits set: a proxy SID takes no arguments", nf.SID))
	}
	// A datapath: ebpf or xdp router is fine: its End program hands on
	// (TC_ACT_UNSPEC) every packet not to one of its own SIDs, the proxy
	// SIDs and the plain packets back from the legacy NF included, and a
	// proxy keeps the node's End at tc (docs/pipeline.md).
	if n := s.Node(nf.Node); n != nil && n.Ingress == spec.IngressEBPF {
		errs = append(errs, s.ErrorAt(np+".node", nil, "router %q has ingress: ebpf, whose classifier would also see the plain packets coming back from the legacy NFs and could steer them into a chain again; serve proxies from a router with ingress: kernel (docs/proxy.md, Limits)", nf.Node))
	}
	for i := range s.NFs {
		o := &s.NFs[i]
		if _, known := kind.Lookup(o.Kind); known && o.Node == nf.Node && !sharesRouter[o.Kind] {
			errs = append(errs, s.ErrorAt(np+".node", nil, "router %q also runs NF %q of kind %s, whose program would share the tcx hook with the proxy programs and see or hide the proxy's packets depending on the order they were attached; put them on different routers (docs/proxy.md, Limits)", nf.Node, o.Name, o.Kind))
		}
	}
	if !nf.HasConfig() || nf.Config.Kind != yaml.MappingNode {
		return r, errs
	}
	b, ok := behaviors[c.Behavior]
	switch {
	case c.Behavior == "":
		bad("", "behavior is required (%s)", strings.Join(slices.Sorted(mapsKeys()), ", "))
	case !ok:
		bad("behavior", "behavior must be one of %s, got %s", strings.Join(slices.Sorted(mapsKeys()), ", "), spec.Clip(c.Behavior))
	}
	r.behavior = b
	// OPoT needs the packet's own TLV back after the NF (End.AD and
	// End.AD.flow carry it, End.AM never removes it); End.AS pushes a
	// header of its own, and End.AM.NAT rewrites segment 0, the chain's
	// egress SID that names the chain at the verifier.
	for ci := range s.Chains {
		if ch := &s.Chains[ci]; ok && ch.OPoT && slices.Contains(ch.NFs, nf.Name) && (b == state.EndAS || b == state.EndAMNAT) {
			errs = append(errs, s.ErrorAt(fmt.Sprintf("chains[%d].opot", ci), nil, "chain %q crosses proxy %q (%s), which cannot carry a proof of transit: use end.ad, end.ad-flow or end.am (docs/proxy.md, OPoT through a proxy)", ch.Name, nf.Name, c.Behavior))
		}
	}
	isAS := b == state.EndAS
	if !isAS && len(c.Segments) > 0 {
		bad("segments", "segments are pushed by end.as only")
	}
	if !isAS && c.Source.IsValid() {
		bad("source", "source is used by end.as only")
	}
	if ok && b != state.EndADFlow {
		for key, set := range map[string]bool{"cache_size": c.CacheSize != nil, "idle_timeout": c.IdleTimeout != ""} {
			if set {
				bad(key, "%s is a setting of end.ad-flow", key)
			}
		}
	}
	if ok && !NeedsTail(b) && c.Inner != "" {
		bad("inner", "inner is a setting of end.as, end.ad and end.ad-flow (%s hands the NF the whole IPv6 packet)", c.Behavior)
	}
	if b == state.EndADFlow {
		r.size = DefaultCacheSize
		if c.CacheSize != nil {
			r.size = *c.CacheSize
			if r.size < 1 || r.size > MaxCacheSize {
				bad("cache_size", "cache_size must be 1..%d, got %d", MaxCacheSize, r.size)
			}
		}
		// A router's End.AD.flow proxies share one flow table, sized
		// to the sum of their caches (driver.go nodeSIDs): the sum has
		// the bound of one cache, reported once, at the router's last
		// End.AD.flow proxy.
		if sum, last := routerFlows(s, nf.Node); last == nf && sum > MaxCacheSize {
			bad("cache_size", "the end.ad-flow proxies of router %q cache %d flows together, at most %d (they share one flow table)", nf.Node, sum, MaxCacheSize)
		}
		r.timeout = DefaultIdleTimeout
		if c.IdleTimeout != "" {
			d, err := time.ParseDuration(c.IdleTimeout)
			switch {
			case err != nil:
				bad("idle_timeout", "idle_timeout %s: want a duration such as 30s", spec.Clip(c.IdleTimeout))
			case d < MinIdleTimeout || d > MaxIdleTimeout || d%time.Millisecond != 0:
				bad("idle_timeout", "idle_timeout must be %s..%s in whole milliseconds, got %s", MinIdleTimeout, MaxIdleTimeout, d)
			default:
				r.timeout = d
			}
		}
	}
	// The legacy NF and the links between it and the proxy's router.
	ln := s.Node(c.LegacyNF)
	linked := false
	switch {
	case c.LegacyNF == "":
		bad("", "legacy_nf is required: the node (role %s) running the NF", spec.RoleLegacyNF)
	case ln == nil:
		bad("legacy_nf", "unknown node %s", spec.Clip(c.LegacyNF))
	case ln.Role != spec.RoleLegacyNF:
		bad("legacy_nf", "node %q is a %s, not a %s", ln.Name, ln.Role, spec.RoleLegacyNF)
	default:
		hops := s.LegacyLinks(ln.Name)
		linked = len(hops) > 0 && !slices.ContainsFunc(hops, func(h spec.Hop) bool { return h.To != nf.Node })
		if !linked {
			bad("legacy_nf", "legacy NF %q is not linked (only) to the proxy's router %q", ln.Name, nf.Node)
		}
	}
	if linked {
		ret, out, ok := s.LegacyReturn(ln.Name)
		if ok {
			// As the router sees them: IFACE-OUT reaches the NF's
			// ingress link, IFACE-IN is the NF's return link.
			r.out = spec.Hop{From: nf.Node, To: ln.Name, FromIf: out.ToIf, ToIf: out.FromIf, Link: out.Link}
			r.in = spec.Hop{From: nf.Node, To: ln.Name, FromIf: ret.ToIf, ToIf: ret.FromIf, Link: ret.Link}
		}
		for _, dir := range []struct {
			key, name string
			hop       *spec.Hop
		}{{"to_nf", c.ToNF, &r.out}, {"from_nf", c.FromNF, &r.in}} {
			if dir.name == "" {
				continue
			}
			i := slices.IndexFunc(s.LegacyLinks(ln.Name), func(h spec.Hop) bool { return h.ToIf == dir.name })
			if i < 0 {
				bad(dir.key, "router %q has no link to legacy NF %q on interface %s", nf.Node, ln.Name, spec.Clip(dir.name))
				continue
			}
			h := s.LegacyLinks(ln.Name)[i]
			*dir.hop = spec.Hop{From: nf.Node, To: ln.Name, FromIf: h.ToIf, ToIf: h.FromIf, Link: h.Link}
		}
		if r.out.FromIf != "" {
			if _, ok := s.PeerAddr(r.out, 6); !ok {
				bad("legacy_nf", "legacy NF %q has no IPv6 address on the link from %s (the proxy's IPv6 next hop)", ln.Name, r.out.FromIf)
			}
		}
	}
	// Chains through the proxy.
	fams := map[int]string{}
	var tail []netip.Addr
	tailFrom := ""
	plan := s.SIDs()
	for ci := range s.Chains {
		ch := &s.Chains[ci]
		for k, n := range ch.NFs {
			if n != nf.Name {
				continue
			}
			cp := fmt.Sprintf("chains[%d]", ci)
			if _, ok := ch.Args[nf.Name]; ok {
				errs = append(errs, s.ErrorAt(cp+".args."+nf.Name, nil, "proxy %q takes no ARGS: its program matches its SID exactly", nf.Name))
			}
			if NeedsTail(b) && ch.Mode == spec.ModeInsert {
				errs = append(errs, s.ErrorAt(fmt.Sprintf("%s.nfs[%d]", cp, k), nil, "%s cannot serve insert mode chain %q: it hands the NF the inner packet, and in insert mode there is none; its SID cannot be the last segment either (use end.am, or encap mode)", c.Behavior, ch.Name))
			}
			if k+1 < len(ch.NFs) {
				if next := s.NF(ch.NFs[k+1]); next != nil && next.Kind == Name && next.Node == nf.Node {
					errs = append(errs, s.ErrorAt(fmt.Sprintf("%s.nfs[%d]", cp, k+1), nil, "proxy %q follows proxy %q on the same router %q: what comes back from a legacy NF is routed, and a proxy SID routes to a blackhole outside its program; put them on different routers", next.Name, nf.Name, nf.Node))
				}
			}
			if b == state.EndAM || b == state.EndAMNAT {
				// End.AM hands the NF the whole SR packet: its links carry
				// the chain's overhead too, as every link on the path does.
				need := ch.Overhead() + spec.MinInnerPacket
				for _, h := range []spec.Hop{r.out, r.in} {
					if h.FromIf == "" {
						continue
					}
					if mtu := s.Links[h.Link].MTU; mtu < need {
						errs = append(errs, s.ErrorAt(cp, nil, "links[%d] (%s-%s) has mtu %d, but chain %q reaches legacy NF %q through %s with its SR header: it needs %d (%d bytes of SR overhead + a %d-byte inner packet)",
							h.Link, h.From, h.To, mtu, ch.Name, c.LegacyNF, c.Behavior, need, ch.Overhead(), spec.MinInnerPacket))
						break
					}
				}
			}
			if f := ch.Family(); f != 0 {
				if _, seen := fams[f]; !seen {
					fams[f] = ch.Name
				}
			}
			if isAS && ch.Mode == spec.ModeEncap {
				var t []netip.Addr
				for _, rest := range ch.NFs[k+1:] {
					if p, ok := plan.NF[rest]; ok {
						a := p.Addr()
						if arg, ok := ch.Args[rest]; ok {
							a = s.SIDFormat.WithArgs(a, arg)
						}
						t = append(t, a)
					}
				}
				if p, ok := plan.Egress[ch.Name]; ok {
					t = append(t, p.Addr())
				}
				switch {
				case tailFrom == "":
					tail, tailFrom = t, ch.Name
				case !slices.Equal(t, tail) && len(c.Segments) == 0:
					errs = append(errs, s.ErrorAt(fmt.Sprintf("%s.nfs[%d]", cp, k), nil, "end.as %q pushes one segment list, but chains %q and %q continue differently after it: give config.segments, or use end.ad", nf.Name, tailFrom, ch.Name))
				}
			}
		}
	}
	if NeedsTail(b) {
		switch c.Inner {
		case "":
			switch len(fams) {
			case 0:
				bad("", "inner is required (ipv4 or ipv6): no chain crosses %q to take it from", nf.Name)
			case 1:
				for f := range fams {
					r.inner = f
				}
			default:
				bad("", "chains %q (IPv4) and %q (IPv6) cross %q: one %s SID accepts one inner family; give each family its own proxy", fams[4], fams[6], nf.Name, c.Behavior)
			}
		case "ipv4", "ipv6":
			r.inner = 4
			if c.Inner == "ipv6" {
				r.inner = 6
			}
			for f, ch := range fams {
				if f != r.inner {
					bad("inner", "inner %s, but chain %q carries IPv%d", c.Inner, ch, f)
				}
			}
		default:
			bad("inner", "inner must be ipv4 or ipv6, got %s", spec.Clip(c.Inner))
		}
		if r.inner == 4 && r.out.FromIf != "" {
			if _, ok := s.PeerAddr(r.out, 4); !ok {
				bad("legacy_nf", "inner ipv4: legacy NF %q needs an IPv4 address on the link from %s (the proxy's IPv4 next hop)", c.LegacyNF, r.out.FromIf)
			}
		}
	}
	if isAS {
		r.segments = tail
		if len(c.Segments) > 0 {
			r.segments = c.Segments
		}
		if len(r.segments) == 0 && tailFrom == "" && !c.segmentsSet {
			bad("", "end.as needs segments (the list it pushes after the NF): no encap chain crosses %q to take them from", nf.Name)
		}
		if len(r.segments) > MaxSegments {
			bad("segments", "end.as pushes at most %d segments, got %d", MaxSegments, len(r.segments))
		}
	}
	// One proxy per IFACE-IN: what comes back there is this proxy's.
	if r.in.FromIf != "" {
		for i := range s.NFs {
			o := &s.NFs[i]
			if o == nf {
				break
			}
			if o.Kind != Name || o.Node != nf.Node || !o.HasConfig() {
				continue
			}
			or, _ := resolveLinks(s, o)
			if or == r.in.FromIf {
				errs = append(errs, s.ErrorAt(np+".config", nil, "proxy %q already takes what comes back on %s of %q: one proxy per IFACE-IN (use end.ad-flow to share a legacy NF among chains)", o.Name, r.in.FromIf, nf.Node))
			}
		}
	}
	// The legacy NF's ruleset, checked once (by its first proxy) with
	// the real nft.
	if ln != nil && ln.Role == spec.RoleLegacyNF && ln.LegacyNF != nil && firstProxyOf(s, nf, ln.Name) {
		errs = append(errs, checkRuleset(s, ln)...)
	}
	return r, errs
}

// resolveLinks is the IFACE-IN another proxy NF uses ("" if unknown).
func resolveLinks(s *spec.Spec, nf *spec.NF) (string, bool) {
	var c Config
	if v := valueNode(&nf.Config, "from_nf"); v != nil {
		_ = v.Decode(&c.FromNF)
	}
	if c.FromNF != "" {
		return c.FromNF, true
	}
	var ln string
	if v := valueNode(&nf.Config, "legacy_nf"); v != nil {
		_ = v.Decode(&ln)
	}
	ret, _, ok := s.LegacyReturn(ln)
	if !ok {
		return "", false
	}
	return ret.ToIf, true
}

func firstProxyOf(s *spec.Spec, nf *spec.NF, legacy string) bool {
	for i := range s.NFs {
		o := &s.NFs[i]
		if o == nf {
			return true
		}
		if o.Kind != Name || !o.HasConfig() || o.Config.Kind != yaml.MappingNode {
			continue
		}
		if v := valueNode(&o.Config, "legacy_nf"); v != nil && v.Value == legacy {
			return false
		}
	}
	return true
}

func checkRuleset(s *spec.Spec, ln *spec.Node) []error {
	i := slices.IndexFunc(s.Nodes, func(n spec.Node) bool { return n.Name == ln.Name })
	p := fmt.Sprintf("nodes[%d].legacy_nf", i)
	body, key := ln.LegacyNF.Ruleset, "ruleset"
	if ln.LegacyNF.RulesetFile != "" {
		b, err := s.ReadFile(ln.LegacyNF.RulesetFile)
		if err != nil {
			return nil // validate reports the file
		}
		body, key = string(b), "ruleset_file"
	}
	if strings.TrimSpace(body) == "" {
		return nil
	}
	var ifaces []string
	for _, h := range s.LegacyLinks(ln.Name) {
		ifaces = append(ifaces, h.FromIf)
	}
	err := legacynf.CheckRuleset(body, ifaces...)
	if err == nil {
		return nil
	}
	return []error{netfilter.RulesetError(s, p+"."+key, nil, err, key == "ruleset_file")}
}

// routerFlows returns the cache entries the End.AD.flow proxies of
// router node ask for together (each cache_size clipped to 1..MaxCacheSize,
// whose own errors are reported at each proxy), and the last of them in
// spec order.
func routerFlows(s *spec.Spec, node string) (int, *spec.NF) {
	sum := 0
	var last *spec.NF
	for i := range s.NFs {
		o := &s.NFs[i]
		if o.Kind != Name || o.Node != node {
			continue
		}
		c, _ := decode(s, o, "")
		if b, ok := behaviors[c.Behavior]; !ok || b != state.EndADFlow {
			continue
		}
		size := DefaultCacheSize
		if c.CacheSize != nil {
			size = min(max(*c.CacheSize, 1), MaxCacheSize)
		}
		sum += size
		last = o
	}
	return sum, last
}

// sharesRouter names the NF kinds that may run on a proxy's router.
// Their programs and the proxy's pass every packet that is not theirs on
// to the next tcx program (TC_ACT_UNSPEC) and serve disjoint packets
// (their own SIDs), so the order they were attached in does not matter:
// forward (the kernel's End, no program) and netfilter (End.AN.NF's
// anf_in: packets to its SIDs only). Not the firewall, whose rules
// classify every packet on the interface: the proxy redirects the
// packets to its SIDs before the firewall sees them or after, by attach
// order.
var sharesRouter = map[string]bool{Name: true, end.Name: true, netfilter.Name: true}

func mapsKeys() func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range behaviors {
			if !yield(k) {
				return
			}
		}
	}
}

// Compile makes the NF's SID the proxy behaviour, served by the proxy
// program (state.ProgramDatapath: the kernel routes the SID to a
// blackhole, so nothing the program does not take gets around the NF),
// and adds the proxy program with its typed config.
func (Kind) Compile(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error {
	r, errs := resolve(s, nf, "nfs.config")
	if len(errs) > 0 {
		return fmt.Errorf("proxy %s: %w", nf.Name, errors.Join(errs...))
	}
	if sid == nil || !sid.SID.IsValid() {
		return fmt.Errorf("proxy %s: no SID", nf.Name)
	}
	sid.Behavior = r.behavior
	sid.Datapath = state.ProgramDatapath
	sid.OIF, sid.NH6, sid.NH4 = "", netip.Addr{}, netip.Addr{}
	prog := Program{
		SID: sid.SID.Masked(), Behavior: r.behavior, LegacyNF: r.cfg.LegacyNF,
		IfaceOut: r.out.FromIf, IfaceIn: r.in.FromIf, Inner: r.inner,
	}
	prog.NFNext6, _ = s.PeerAddr(r.out, 6)
	if r.inner == 4 {
		prog.NFNext4, _ = s.PeerAddr(r.out, 4)
	}
	if r.behavior == state.EndAS {
		prog.Segments = slices.Clone(r.segments)
		prog.Source = r.cfg.Source
		if !prog.Source.IsValid() {
			prog.Source = node.TunSrc
		}
	}
	if r.behavior == state.EndADFlow {
		prog.CacheSize, prog.IdleTimeoutMS = r.size, r.timeout.Milliseconds()
	}
	if r.behavior == state.EndAD || r.behavior == state.EndADFlow {
		prog.OPoT = slices.ContainsFunc(s.Chains, func(ch spec.Chain) bool { return ch.OPoT && slices.Contains(ch.NFs, nf.Name) })
	}
	for _, i := range node.Interfaces {
		// SRv6 packets for the SID come from routers and hosts, never
		// from a legacy NF.
		if peer := s.Node(i.Peer.Node); i.Name != prog.IfaceIn && (peer == nil || peer.Role != spec.RoleLegacyNF) {
			prog.SRSide = append(prog.SRSide, i.Name)
		}
	}
	slices.Sort(prog.SRSide)
	ifs := append(slices.Clone(prog.SRSide), prog.IfaceIn)
	slices.Sort(ifs)
	raw, err := json.Marshal(prog)
	if err != nil {
		return fmt.Errorf("encode proxy config: %w", err)
	}
	node.Programs = append(node.Programs, state.Program{Kind: Name, NF: nf.Name, Interfaces: ifs, Config: raw})
	return nil
}

// Decode reads a proxy program's typed config.
func Decode(p state.Program) (Program, error) {
	var prog Program
	if p.Kind != Name || p.NF == "" {
		return prog, fmt.Errorf("program %q of nf %q: %w", p.Kind, p.NF, ErrBadConfig)
	}
	if err := json.Unmarshal(p.Config, &prog); err != nil {
		return prog, fmt.Errorf("decode proxy %s config: %w: %w", p.NF, ErrBadConfig, err)
	}
	switch {
	case !prog.SID.IsValid() || !prog.Behavior.IsProxy() || prog.IfaceOut == "" || prog.IfaceIn == "" || !prog.NFNext6.IsValid():
		return prog, fmt.Errorf("proxy %s: %w", p.NF, ErrBadConfig)
	case NeedsTail(prog.Behavior) && prog.Inner != 4 && prog.Inner != 6:
		return prog, fmt.Errorf("proxy %s: inner %d: %w", p.NF, prog.Inner, ErrBadConfig)
	case prog.Inner == 4 && !prog.NFNext4.IsValid():
		return prog, fmt.Errorf("proxy %s: no ipv4 next hop: %w", p.NF, ErrBadConfig)
	case prog.Behavior == state.EndAS && (len(prog.Segments) == 0 || !prog.Source.IsValid()):
		return prog, fmt.Errorf("proxy %s: end.as without segments or source: %w", p.NF, ErrBadConfig)
	}
	return prog, nil
}
