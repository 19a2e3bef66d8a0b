package compile

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// legacyNF compiles a node with role legacy-nf (docs/proxy.md): default
// routes (IPv6 and IPv4) back to its proxy's router on the return link
// (the proxy's IFACE-IN), reverse-path filtering off (with two links a
// packet comes in on one and its source is routed out of the other) and
// the legacy-nf program with its ruleset (a file inlined), rate
// limiters and capture counters.
func (c *compiler) legacyNF(n spec.Node) error {
	sn := c.nodes[n.Name]
	ret, _, ok := c.s.LegacyReturn(n.Name)
	if !ok {
		return fmt.Errorf("compile legacy NF %s: %w: no return link to its proxy", n.Name, ErrUnroutable)
	}
	for _, fam := range []int{6, 4} {
		def := netip.MustParsePrefix("::/0")
		if fam == 4 {
			def = netip.MustParsePrefix("0.0.0.0/0")
		}
		if _, ok := c.s.PeerAddr(spec.Hop{Link: ret.Link, To: n.Name, ToIf: ret.FromIf}, fam); !ok {
			continue
		}
		if via, ok := c.s.PeerAddr(ret, fam); ok {
			sn.Routes = append(sn.Routes, state.Route{Dst: def, Via: via, Dev: ret.FromIf})
		}
	}
	if l := n.LegacyNF; l != nil {
		for _, r := range l.Routes {
			h, ok := c.s.HopOut(n.Name, r.Interface)
			via, okv := c.s.PeerAddr(h, spec.Family(r.Dst.Addr()))
			if !ok || !okv {
				return fmt.Errorf("compile legacy NF %s route %s: %w", n.Name, r.Dst, ErrUnroutable)
			}
			sn.Routes = append(sn.Routes, state.Route{Dst: r.Dst.Masked(), Via: via, Dev: r.Interface})
		}
	}
	add := func(k, v string) { sn.Sysctls = append(sn.Sysctls, state.Sysctl{Key: k, Value: v}) }
	for _, scope := range append([]string{"all", "default"}, ifNames(sn)...) {
		add("net.ipv4.conf."+scope+".rp_filter", "0")
	}
	cfg := state.LegacyNFConfig{Capture: ifNames(sn)}
	if l := n.LegacyNF; l != nil {
		cfg.Ruleset = l.Ruleset
		if l.RulesetFile != "" {
			b, err := c.s.ReadFile(l.RulesetFile)
			if err != nil {
				return fmt.Errorf("compile legacy NF %s ruleset_file: %w", n.Name, err)
			}
			cfg.Ruleset, cfg.RulesetFile = string(b), l.RulesetFile
		}
		for _, r := range l.RateLimit {
			cfg.RateLimits = append(cfg.RateLimits, state.RateLimit{Interface: r.Interface, RateKbit: r.RateKbit, BurstBytes: r.BurstBytes, LatencyMS: r.LatencyMS})
		}
		slices.SortFunc(cfg.RateLimits, func(a, b state.RateLimit) int {
			if a.Interface < b.Interface {
				return -1
			}
			if a.Interface > b.Interface {
				return 1
			}
			return 0
		})
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("compile legacy NF %s: %w", n.Name, err)
	}
	sn.Programs = append(sn.Programs, state.Program{Kind: state.ProgramLegacyNF, Interfaces: ifNames(sn), Config: b})
	return nil
}
