package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	_ "github.com/srchain/srchain/internal/kinds/end"      // kind forward, for TestSRUnawareNeedsProxy
	_ "github.com/srchain/srchain/internal/kinds/firewall" // for TestSharedRouter
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

func example(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "proxy-testbed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func load(t *testing.T, text string) (*spec.Spec, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec.Load(p)
}

// edit replaces old (which must occur) with new in the example.
func edit(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("example lacks %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

const natCfg = "config: {legacy_nf: nat, behavior: end.ad}"

func TestCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
		absent         []string // errors that must not be there (a cascade)
	}{
		{"no config", natCfg, "config: {}", []string{"nfs[2].config: behavior is required", "nfs[2].config: legacy_nf is required"}, nil},
		{"unknown key", natCfg, "config: {legacy_nf: nat, behavior: end.ad, colour: red}", []string{`nfs[2].config."colour": unknown proxy config key "colour"`}, nil},
		{"bad behaviour", natCfg, "config: {legacy_nf: nat, behavior: end.ax}", []string{`nfs[2].config.behavior: behavior must be one of end.ad, end.ad-flow, end.am, end.am-nat, end.as, got "end.ax"`}, nil},
		{"unknown node", natCfg, "config: {legacy_nf: nat9, behavior: end.ad}", []string{`nfs[2].config.legacy_nf: unknown node "nat9"`}, nil},
		{"router as legacy", natCfg, "config: {legacy_nf: egress, behavior: end.ad}", []string{`nfs[2].config.legacy_nf: node "egress" is a router, not a legacy-nf`}, nil},
		{"segments on ad", natCfg, `config: {legacy_nf: nat, behavior: end.ad, segments: ["fc00:3::9"]}`, []string{"nfs[2].config.segments: segments are pushed by end.as only"}, nil},
		{"cache on ad", natCfg, "config: {legacy_nf: nat, behavior: end.ad, cache_size: 10}", []string{"nfs[2].config.cache_size: cache_size is a setting of end.ad-flow"}, nil},
		{"cache size", natCfg, "config: {legacy_nf: nat, behavior: end.ad-flow, cache_size: 0}", []string{"nfs[2].config.cache_size: cache_size must be 1..1048576, got 0"}, nil},
		{"idle timeout", natCfg, "config: {legacy_nf: nat, behavior: end.ad-flow, idle_timeout: forever}", []string{`nfs[2].config.idle_timeout: idle_timeout "forever": want a duration`}, nil},
		{"inner on am", "config: {legacy_nf: mon, behavior: end.am}", "config: {legacy_nf: mon, behavior: end.am, inner: ipv6}", []string{"nfs[4].config.inner: inner is a setting of end.as, end.ad and end.ad-flow"}, nil},
		{"inner mismatch", natCfg, "config: {legacy_nf: nat, behavior: end.ad, inner: ipv6}", []string{`nfs[2].config.inner: inner ipv6, but chain "nat4" carries IPv4`}, nil},
		{"same iface-in", natCfg, "config: {legacy_nf: fw, behavior: end.ad-flow}", []string{`nfs[2].config: proxy "fw-out" already takes what comes back on eth3 of "proxy"`}, nil},
		{"sr_aware true", "    sr_aware: false\n    config: {legacy_nf: nat", "    sr_aware: true\n    config: {legacy_nf: nat", []string{"nfs[2].sr_aware: a proxy fronts an SR-unaware NF"}, nil},
		{"end.x", "    node: proxy\n    sr_aware: false\n    config: {legacy_nf: nat", "    node: proxy\n    behavior: End.X\n    interface: eth1\n    sr_aware: false\n    config: {legacy_nf: nat", []string{"nfs[2].behavior: a proxy's SID behaviour is config.behavior"}, nil},
		{"args", "    nfs: [nat]\n", "    nfs: [nat]\n    args: {nat: 7}\n", []string{`chains[2].args.nat: proxy "nat" takes no ARGS`}, nil},
		{"insert mode", "    nfs: [svc]\n", "    nfs: [svc]\n    mode: insert\n    egress_behavior: \"\"\n", []string{`chains[3].nfs[0]: end.as cannot serve insert mode chain "svc6"`}, nil},
		{"two proxies in a row", "    nfs: [nat]\n", "    nfs: [nat, fw-out]\n", []string{`chains[2].nfs[1]: proxy "fw-out" follows proxy "nat" on the same router "proxy"`}, nil},
		{"to_nf", "to_nf: eth3, from_nf: eth2", "to_nf: eth9, from_nf: eth2", []string{`nfs[1].config.to_nf: router "proxy" has no link to legacy NF "fw" on interface "eth9"`}, nil},
		{"ebpf ingress", "  - {name: proxy, role: router, locator: \"fc00:2::/64\"}", "  - {name: proxy, role: router, locator: \"fc00:2::/64\", ingress: ebpf}", []string{`nfs[0].node: router "proxy" has ingress: ebpf`}, nil},
		{"opot through end.as", "    nfs: [svc]\n", "    nfs: [svc]\n    opot: true\n", []string{`chains[3].opot: chain "svc6" crosses proxy "svc" (end.as), which cannot carry a proof of transit`}, nil},
		{"legacy ruleset", "          meta l4proto udp counter masquerade\n", "          meta l4proto udp counter masqueradex\n", []string{"proxy.yaml:60:0: nodes[6].legacy_nf.ruleset: ruleset line 3: nft: Error"}, nil},
		{"source multicast", "behavior: end.as}", `behavior: end.as, source: "ff02::1"}`, []string{`nfs[3].config.source: source: bad value: source "ff02::1" is not a unicast IPv6 address`}, nil},
		{"source unspecified", "behavior: end.as}", `behavior: end.as, source: "::"}`, []string{`nfs[3].config.source: source: bad value: source "::" is not a unicast IPv6 address`}, nil},
		{"each bad segment", "behavior: end.as}", `behavior: end.as, segments: [not-an-ip, "fc00:3::9", "fe80::1"]}`,
			[]string{`proxy.yaml:131:59: nfs[3].config.segments[0]: segment "not-an-ip" is not`, `proxy.yaml:131:83: nfs[3].config.segments[2]: segment "fe80::1" is not`},
			[]string{"segments[1]", "end.as needs segments"}},
		{"long segment clipped", "behavior: end.as}", "behavior: end.as, segments: [" + strings.Repeat("A", 5000) + "]}", []string{`(5000 bytes) is not a unicast IPv6 address`}, []string{strings.Repeat("A", 200)}},
		{"cache size not an integer", natCfg, "config: {legacy_nf: nat, behavior: end.ad-flow, cache_size: 4096.9}", []string{`nfs[2].config.cache_size: cache_size: bad value: expected an integer, got "4096.9"`}, nil},
		{"every ad-flow setting on ad", natCfg, "config: {legacy_nf: nat, behavior: end.ad, cache_size: 10, idle_timeout: 5s}",
			[]string{"nfs[2].config.cache_size: cache_size is a setting of end.ad-flow", "nfs[2].config.idle_timeout: idle_timeout is a setting of end.ad-flow"}, nil},
		{"kind typo", "  - name: nat\n    kind: proxy", "  - name: nat\n    kind: proxi", []string{`nfs[2].kind: unknown NF kind "proxi"`}, []string{"also runs NF"}},
		{"end.am link mtu", "  - mtu: 1600\n    endpoints:\n      - {node: proxy, interface: eth6", "  - mtu: 1280\n    endpoints:\n      - {node: proxy, interface: eth6",
			[]string{`chain "mon6" reaches legacy NF "mon" through end.am with its SR header: it needs 1360`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, edit(t, example(t), tc.old, tc.new))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(err.Error(), a) {
					t.Errorf("error has %q:\n%v", a, err)
				}
			}
		})
	}
}

// TestLegacyRulesetInterfaces: a legacy NF's ruleset may name its own
// interfaces with iif/oif, which nft resolves when it loads a rule: the
// check runs where they exist.
func TestLegacyRulesetInterfaces(t *testing.T) {
	testutil.RequireTool(t, "nft")
	testutil.RequireRoot(t)
	text := edit(t, example(t), `iifname "eth0" ct state new counter accept`, `iif "eth0" ct state new counter accept`)
	if _, err := load(t, text); err != nil {
		t.Fatalf("iif of the legacy NF's own interface refused: %v", err)
	}
	text = edit(t, example(t), `iifname "eth0" ct state new counter accept`, `iif "eth9" ct state new counter accept`)
	if _, err := load(t, text); err == nil || !strings.Contains(err.Error(), "Interface does not exist") {
		t.Fatalf("iif of an interface the NF does not have: %v, want nft's refusal", err)
	}
}

// TestLegacyNodeErrors: the role legacy-nf and its legacy_nf section.
func TestLegacyNodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"return missing", "      return: eth1                 # default routes leave on the outside arm\n", "", []string{`nodes[5].legacy_nf.return: legacy NF "fw" has two links: return must name the one toward its proxy's IFACE-IN (eth0 or eth1)`}},
		{"return unknown", "      return: eth1  ", "      return: eth7  ", []string{`nodes[5].legacy_nf.return: legacy NF "fw" has no link on interface "eth7"`}},
		{"locator", "  - name: nat\n    role: legacy-nf\n", "  - name: nat\n    role: legacy-nf\n    locator: \"fc00:9::/64\"\n", []string{"nodes[6].locator: a legacy NF has no locator"}},
		{"legacy_nf on router", "  - {name: egress, role: router, locator: \"fc00:3::/64\"}", "  - {name: egress, role: router, locator: \"fc00:3::/64\", legacy_nf: {}}", []string{`nodes[3].legacy_nf: legacy_nf configures a node with role "legacy-nf", not a router`}},
		{"rate", "rate_kbit: 100000, burst_bytes: 65536", "rate_kbit: 0, burst_bytes: 100", []string{"nodes[7].legacy_nf.rate_limit[0].rate_kbit: rate_kbit must be 1..100000000, got 0", "nodes[7].legacy_nf.rate_limit[0].burst_bytes: burst_bytes must be 1600..67108864"}},
		{"rate iface", "{interface: eth0, rate_kbit", "{interface: eth5, rate_kbit", []string{`nodes[7].legacy_nf.rate_limit[0].interface: legacy NF "svc" has no link on interface "eth5"`}},
		{"route", `{dst: "10.0.1.0/24", interface: eth0}`, `{dst: "10.0.1.1/24", interface: eth0}`, []string{"nodes[5].legacy_nf.routes[0].dst: dst 10.0.1.1/24 has host bits set"}},
		{"linked to host", "      - {node: egress, interface: eth1, addresses: [\"fc00:a4::1/64\", \"10.0.4.1/24\"]}\n      - {node: sink,", "      - {node: egress, interface: eth1, addresses: [\"fc00:a4::1/64\", \"10.0.4.1/24\"]}\n      - {node: sink,", nil},
		{"probe from legacy", "{name: web, from: src,", "{name: web, from: fw,", []string{`traffic[0].from: node "fw" is a legacy NF`}},
		{"file and text", "      ruleset: |\n        chain postrouting", "      ruleset_file: nat.nft\n      ruleset: |\n        chain postrouting", []string{"nodes[6].legacy_nf.ruleset_file: give ruleset or ruleset_file, not both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, edit(t, example(t), tc.old, tc.new))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func compileExample(t *testing.T, text string) *state.Network {
	t.Helper()
	s, err := load(t, text)
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return net
}

func node(t *testing.T, net *state.Network, name string) state.Node {
	t.Helper()
	for _, n := range net.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return state.Node{}
}

func programOf(t *testing.T, n state.Node, nf string) Program {
	t.Helper()
	for _, p := range n.Programs {
		if p.Kind == Name && p.NF == nf {
			prog, err := Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			return prog
		}
	}
	t.Fatalf("no proxy program for %s", nf)
	return Program{}
}

func TestCompile(t *testing.T) {
	net := compileExample(t, example(t))
	px := node(t, net, "proxy")
	want := map[string]state.Behavior{"fw-out": state.EndAD, "fw-in": state.EndAD, "nat": state.EndAD, "svc": state.EndAS, "mon": state.EndAM}
	for _, s := range px.SIDs {
		if b, ok := want[s.NF]; ok {
			if s.Behavior != b || s.Datapath != state.ProgramDatapath {
				t.Errorf("sid of %s: %s %s, want %s program", s.NF, s.Behavior, s.Datapath, b)
			}
			delete(want, s.NF)
		}
	}
	if len(want) > 0 {
		t.Errorf("no SID for %v", want)
	}
	out := programOf(t, px, "fw-out")
	if out.IfaceOut != "eth2" || out.IfaceIn != "eth3" || out.NFNext4 != netip.MustParseAddr("10.0.5.2") || out.NFNext6 != netip.MustParseAddr("fc00:a5::2") || out.Inner != 4 {
		t.Errorf("fw-out: %+v", out)
	}
	if got := strings.Join(out.SRSide, ","); got != "eth0,eth1" {
		t.Errorf("fw-out sr side %s", got)
	}
	in := programOf(t, px, "fw-in")
	if in.IfaceOut != "eth3" || in.IfaceIn != "eth2" || in.NFNext4 != netip.MustParseAddr("10.0.6.2") {
		t.Errorf("fw-in: %+v", in)
	}
	svc := programOf(t, px, "svc")
	egress := node(t, net, "egress")
	var svcTail netip.Addr
	for _, s := range egress.SIDs {
		if s.Behavior == state.EndDT6 {
			svcTail = s.SID.Addr()
			break
		}
	}
	if len(svc.Segments) != 1 || svc.Segments[0] != svcTail || svc.Source != px.TunSrc || svc.Inner != 6 {
		t.Errorf("svc (End.AS) segments %v source %s inner %d, want [%s] %s 6", svc.Segments, svc.Source, svc.Inner, svcTail, px.TunSrc)
	}
	if mon := programOf(t, px, "mon"); mon.Inner != 0 || mon.Behavior != state.EndAM {
		t.Errorf("mon: %+v", mon)
	}
	// The legacy NF: default routes to the proxy on its return arm, the
	// inside route, forwarding, no seg6, its program.
	fw := node(t, net, "fw")
	routes := map[string]string{}
	for _, r := range fw.Routes {
		routes[r.Dst.String()] = r.Via.String() + " " + r.Dev
	}
	for dst, via := range map[string]string{"::/0": "fc00:a6::1 eth1", "0.0.0.0/0": "10.0.6.1 eth1", "10.0.1.0/24": "10.0.5.1 eth0"} {
		if routes[dst] != via {
			t.Errorf("fw route %s via %q, want %q", dst, routes[dst], via)
		}
	}
	sys := map[string]string{}
	for _, s := range fw.Sysctls {
		sys[s.Key] = s.Value
	}
	if sys["net.ipv4.ip_forward"] != "1" || sys["net.ipv6.conf.all.forwarding"] != "1" || sys["net.ipv4.conf.eth0.rp_filter"] != "0" {
		t.Errorf("fw sysctls %v", sys)
	}
	if _, ok := sys["net.ipv6.conf.all.seg6_enabled"]; ok {
		t.Error("a legacy NF has seg6_enabled")
	}
	if len(fw.Programs) != 1 || fw.Programs[0].Kind != state.ProgramLegacyNF {
		t.Fatalf("fw programs %+v", fw.Programs)
	}
	var cfg state.LegacyNFConfig
	if err := json.Unmarshal(fw.Programs[0].Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cfg.Ruleset, "ct state established,related accept") || strings.Join(cfg.Capture, ",") != "eth0,eth1" {
		t.Errorf("fw config %+v", cfg)
	}
	var svcCfg state.LegacyNFConfig
	if err := json.Unmarshal(node(t, net, "svc").Programs[0].Config, &svcCfg); err != nil {
		t.Fatal(err)
	}
	if len(svcCfg.RateLimits) != 1 || svcCfg.RateLimits[0] != (state.RateLimit{Interface: "eth0", RateKbit: 100000, BurstBytes: 65536, LatencyMS: 50}) {
		t.Errorf("svc rate limits %+v", svcCfg.RateLimits)
	}
}

// TestCompileFlowAndExplicitAS: end.ad-flow cache settings and an
// explicit End.AS list and source; deterministic bytes.
func TestCompileFlowAndExplicitAS(t *testing.T) {
	s := edit(t, example(t), natCfg, "config: {legacy_nf: nat, behavior: end.ad-flow, cache_size: 100000, idle_timeout: 1500ms}")
	s = edit(t, s, "config: {legacy_nf: svc, behavior: end.as}", `config: {legacy_nf: svc, behavior: end.as, segments: ["fc00:3::77", "fc00:3::3:0"], source: "fc00:a3::1"}`)
	a := compileExample(t, s)
	b := compileExample(t, s)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Error("two compiles differ")
	}
	px := node(t, a, "proxy")
	nat := programOf(t, px, "nat")
	if nat.Behavior != state.EndADFlow || nat.CacheSize != 100000 || nat.IdleTimeoutMS != 1500 || nat.Inner != 4 {
		t.Errorf("nat: %+v", nat)
	}
	svc := programOf(t, px, "svc")
	if len(svc.Segments) != 2 || svc.Segments[0] != netip.MustParseAddr("fc00:3::77") || svc.Source != netip.MustParseAddr("fc00:a3::1") {
		t.Errorf("svc: %+v", svc)
	}
	// Default cache settings.
	s = edit(t, example(t), natCfg, "config: {legacy_nf: nat, behavior: end.ad-flow}")
	nat = programOf(t, node(t, compileExample(t, s), "proxy"), "nat")
	if nat.CacheSize != DefaultCacheSize || nat.IdleTimeoutMS != DefaultIdleTimeout.Milliseconds() {
		t.Errorf("default cache: %+v", nat)
	}
}

// TestCompileOPoT: an End.AD / End.AD.flow proxy on a chain with opot
// carries the proof; End.AM needs nothing; the others stay without.
func TestCompileOPoT(t *testing.T) {
	s := edit(t, example(t), "    nfs: [fw-out]\n", "    nfs: [fw-out]\n    opot: true\n")
	s = edit(t, s, "    nfs: [mon]\n", "    nfs: [mon]\n    opot: true\n")
	px := node(t, compileExample(t, s), "proxy")
	for nf, want := range map[string]bool{"fw-out": true, "fw-in": false, "nat": false, "mon": false} {
		if got := programOf(t, px, nf).OPoT; got != want {
			t.Errorf("%s: opot %v, want %v", nf, got, want)
		}
	}
	s = edit(t, s, "config: {legacy_nf: mon, behavior: end.am}", "config: {legacy_nf: mon, behavior: end.am-nat}")
	if _, err := load(t, s); err == nil || !strings.Contains(err.Error(), `chains[4].opot: chain "mon6" crosses proxy "mon" (end.am-nat)`) {
		t.Errorf("end.am-nat with opot: %v", err)
	}
}

// TestASChainsDiffer: one End.AS SID pushes one list; two chains that
// continue differently after it need an explicit list.
func TestASChainsDiffer(t *testing.T) {
	s := edit(t, example(t), "    nfs: [mon]\n", "    nfs: [svc]\n    egress: ingress\n")
	s = edit(t, s, "  - name: mon6                     # IPv6 UDP through the monitor (End.AM)\n    ingress: ingress\n    egress: egress\n", "  - name: mon6\n    ingress: egress\n")
	s = edit(t, s, `match: {dst: ["fc00:a4::/64"], proto: udp}`, `match: {dst: ["fc00:a1::/64"], proto: udp}`)
	s = edit(t, s, "  - {name: mon, from: src, to: \"fc00:a4::2\", proto: udp, dport: 9000, expect: mon6}\n", "")
	_, err := load(t, s)
	if err == nil || !strings.Contains(err.Error(), `end.as "svc" pushes one segment list, but chains "svc6" and "mon6" continue differently after it`) {
		t.Fatalf("err %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Program{SID: netip.MustParsePrefix("fc00:2::1:0/112"), Behavior: state.EndAD, IfaceOut: "eth2", IfaceIn: "eth3", NFNext6: netip.MustParseAddr("fc00:a5::2"), NFNext4: netip.MustParseAddr("10.0.5.2"), Inner: 4}
	raw := func(p Program) state.Program {
		b, _ := json.Marshal(p)
		return state.Program{Kind: Name, NF: "x", Config: b}
	}
	if _, err := Decode(raw(good)); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Program){
		"behaviour": func(p *Program) { p.Behavior = state.End },
		"no inner":  func(p *Program) { p.Inner = 0 },
		"no nh4":    func(p *Program) { p.NFNext4 = netip.Addr{} },
		"as empty":  func(p *Program) { p.Behavior = state.EndAS },
		"no iface":  func(p *Program) { p.IfaceIn = "" },
	} {
		p := good
		mut(&p)
		if _, err := Decode(raw(p)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestSRUnawareNeedsProxy: sr_aware: false on another kind is refused by
// validate, naming the kinds that serve legacy NFs.
func TestSRUnawareNeedsProxy(t *testing.T) {
	s := edit(t, example(t), "  - name: mon\n    kind: proxy\n    node: proxy\n    sr_aware: false\n    config: {legacy_nf: mon, behavior: end.am}\n",
		"  - name: mon\n    kind: proxy\n    node: proxy\n    sr_aware: false\n    config: {legacy_nf: mon, behavior: end.am}\n  - {name: plain, kind: forward, node: egress, sr_aware: false}\n")
	_, err := load(t, s)
	if err == nil || !strings.Contains(err.Error(), `nfs[5].sr_aware: kind "forward" serves SR-aware NFs only; an SR-unaware NF (sr_aware: false) sits behind an SR proxy (kinds: proxy)`) {
		t.Fatalf("err %v", err)
	}
}

// TestSharedRouter: an End.AN.NF (kind netfilter) may share the proxy's
// router (both pass what is not theirs to the next tcx program and serve
// their own SIDs only); a firewall, whose rules see every packet, may not.
func TestSharedRouter(t *testing.T) {
	const nfs = "nfs:\n"
	for _, tc := range []struct {
		name, nf, want string
	}{
		{"netfilter", "  - name: anf\n    kind: netfilter\n    node: proxy\n    config:\n      ruleset: |\n        chain forward {\n          type filter hook forward priority filter; policy accept;\n        }\n", ""},
		{"firewall", "  - name: sera\n    kind: firewall\n    node: proxy\n    config: {mode: basic, policy: accept}\n", `nfs[1].node: router "proxy" also runs NF "sera" of kind firewall`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, edit(t, example(t), nfs, nfs+tc.nf))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error lacks %q:\n%v", tc.want, err)
			}
		})
	}
}

// A router's End.AD.flow proxies share one flow table: their caches
// together have the bound of one, reported once, at the last of them.
func TestRouterFlowTable(t *testing.T) {
	text := func(a, b int) string {
		s := edit(t, example(t), "config: {legacy_nf: fw, behavior: end.ad}", fmt.Sprintf("config: {legacy_nf: fw, behavior: end.ad-flow, cache_size: %d}", a))
		return edit(t, s, natCfg, fmt.Sprintf("config: {legacy_nf: nat, behavior: end.ad-flow, cache_size: %d}", b))
	}
	if _, err := load(t, text(MaxCacheSize-100, 100)); err != nil {
		t.Fatalf("caches summing to the bound refused: %v", err)
	}
	_, err := load(t, text(MaxCacheSize-100, 101))
	want := fmt.Sprintf(`nfs[2].config.cache_size: the end.ad-flow proxies of router "proxy" cache %d flows together, at most %d`, MaxCacheSize+1, MaxCacheSize)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "flows together") != 1 {
		t.Fatalf("caches over the bound: %v, want once %q", err, want)
	}
}
