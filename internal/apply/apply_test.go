package apply

import (
	"context"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

func TestWireSegments(t *testing.T) {
	a, b := netip.MustParseAddr("fc00::a"), netip.MustParseAddr("fc00::b")
	got := wireSegments(&state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{a, b}})
	if len(got) != 2 || got[0].String() != "fc00::b" || got[1].String() != "fc00::a" {
		t.Fatalf("encap wire order = %v, want [fc00::b fc00::a]", got)
	}
	got = wireSegments(&state.SREncap{Mode: state.ModeInsert, Segments: []netip.Addr{a, b}})
	if len(got) != 3 || got[0].String() != "::" || got[2].String() != "fc00::a" {
		t.Fatalf("inline wire order = %v, want [:: fc00::b fc00::a]", got)
	}
	back := TravelSegments(&netlink.SEG6Encap{Mode: 0, Segments: got})
	if len(back) != 2 || back[0] != a || back[1] != b {
		t.Fatalf("TravelSegments = %v", back)
	}
}

func TestParseTunSrc(t *testing.T) {
	a, err := parseTunSrc("tunsrc addr fc00:1::1\n")
	if err != nil || a.String() != "fc00:1::1" {
		t.Fatalf("parseTunSrc = %v, %v", a, err)
	}
	if _, err := parseTunSrc("garbage"); err == nil {
		t.Fatal("parseTunSrc accepted garbage")
	}
}

func TestBadState(t *testing.T) {
	noIf := func(string) (int, error) { return 0, nil }
	cases := []state.LocalSID{
		{SID: netip.MustParsePrefix("fc00::1/128"), Behavior: state.EndX},
		{SID: netip.MustParsePrefix("fc00::1/128"), Behavior: state.EndDX4},
		{SID: netip.MustParsePrefix("fc00::1/128"), Behavior: "End.Bogus"},
		{SID: netip.MustParsePrefix("10.0.0.1/32"), Behavior: state.End},
	}
	for _, c := range cases {
		if _, err := SIDRoute(c, 1, noIf); !errors.Is(err, ErrBadState) {
			t.Errorf("SIDRoute(%v) error = %v, want ErrBadState", c, err)
		}
	}
	_, err := RouteFor(state.Route{Dst: netip.MustParsePrefix("10.0.0.0/8"),
		Encap: &state.SREncap{Mode: state.ModeInsert, Segments: []netip.Addr{netip.MustParseAddr("fc00::1")}}}, noIf)
	if !errors.Is(err, ErrBadState) {
		t.Errorf("inline ipv4 route error = %v, want ErrBadState", err)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

// pair makes two namespaces joined by a veth (eth0 in both) and removes
// them when the test ends.
func pair(t *testing.T) (*netns.NS, *netns.NS) {
	t.Helper()
	requireRoot(t)
	var nss []*netns.NS
	for _, s := range []string{"a", "b"} {
		name := fmt.Sprintf("srct-l%d%s", os.Getpid(), s)
		_ = netns.Delete(name)
		ns, err := netns.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ns.Delete(); err != nil {
				t.Error(err)
			}
		})
		nss = append(nss, ns)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: "eth0", Namespace: netlink.NsFd(nss[0].Handle())},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(nss[1].Handle()),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	return nss[0], nss[1]
}

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ad(s string) netip.Addr  { return netip.MustParseAddr(s) }

// richNode uses every kind of state Apply handles.
func richNode() state.Node {
	return state.Node{
		Name: "r1",
		Sysctls: []state.Sysctl{
			{Key: "net.ipv6.conf.all.forwarding", Value: "1"},
			{Key: "net.ipv4.ip_forward", Value: "1"},
			{Key: "net.ipv6.conf.all.seg6_enabled", Value: "1"},
			{Key: "net.ipv6.conf.eth0.seg6_enabled", Value: "1"},
		},
		TunSrc:     ad("fc00:1::1"),
		Interfaces: []state.Interface{{Name: "eth0", MTU: 1400, Addrs: []netip.Prefix{p("fc00:12::1/64"), p("10.0.12.1/24")}}},
		Loopback:   []netip.Prefix{p("fc00:1::1/128")},
		Routes: []state.Route{
			{Dst: p("fc00:2::/64"), Via: ad("fc00:12::2")},
			{Dst: p("10.0.2.0/24"), Dev: "eth0", Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f1"), ad("fc00:2::d4")}}},
			{Dst: p("fc00:99::/64"), Dev: "eth0", Encap: &state.SREncap{Mode: state.ModeInsert, Segments: []netip.Addr{ad("fc00:2::f1")}}},
			{Table: 100, Dst: p("10.0.3.0/24"), Dev: "eth0", Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f2")}}},
		},
		Rules: []state.Rule{
			{Priority: 100, Family: 4, Dst: p("10.0.3.0/24"), IPProto: 17, DPort: state.PortRange{From: 5000, To: 5001}, Table: 100},
			{Priority: 101, Family: 6, Src: p("fc00:a1::/64"), Dst: p("fc00:99::/64"), IPProto: 6, SPort: state.PortRange{From: 1000, To: 2000}, DPort: state.PortRange{From: 80}, IIF: "eth0", Table: 101},
		},
		SIDs: []state.LocalSID{
			{SID: p("fc00:1::e/128"), Behavior: state.End, Datapath: state.Kernel},
			{SID: p("fc00:1::e1/128"), Behavior: state.EndX, NH6: ad("fc00:12::2"), OIF: "eth0", Datapath: state.Kernel},
			{SID: p("fc00:1::d4/128"), Behavior: state.EndDX4, NH4: ad("10.0.12.2"), Datapath: state.Kernel},
			{SID: p("fc00:1::d6/128"), Behavior: state.EndDX6, NH6: ad("fc00:12::2"), Datapath: state.Kernel},
			{SID: p("fc00:1::f1:0/112"), Behavior: state.EndDT6, Table: 254, Datapath: state.Kernel},
		},
	}
}

// snapshot describes what Apply may touch, as iproute2 prints it.
func snapshot(t *testing.T, ns *netns.NS) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, argv := range [][]string{
		{"ip", "-d", "link", "show"},
		{"ip", "addr", "show"},
		{"ip", "-4", "route", "show", "table", "all"},
		{"ip", "-6", "route", "show", "table", "all"},
		{"ip", "-4", "rule"},
		{"ip", "-6", "rule"},
		{"ip", "sr", "tunsrc", "show"},
		{"sysctl", "net.ipv6.conf.all.forwarding", "net.ipv4.ip_forward", "net.ipv6.conf.all.seg6_enabled", "net.ipv6.conf.eth0.seg6_enabled"},
	} {
		out, err := ns.Run(ctx, argv[0], argv[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(out)
	}
	// Bringing a link up the first time attaches its default qdisc
	// (noop -> noqueue); setting it down again does not detach it.
	return qdisc.ReplaceAllString(b.String(), "qdisc")
}

var qdisc = regexp.MustCompile(`qdisc \S+`)

func TestApplyIdempotent(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := richNode()
	pending, err := Check(ctx, a, node)
	if err != nil || len(pending) == 0 {
		t.Fatalf("check before apply = %v, %v; want pending changes", pending, err)
	}
	res, err := ApplyWith(ctx, a, node, Options{})
	if err != nil {
		t.Fatalf("first apply: %v", err)
	}
	if pending, err := Check(ctx, a, node); err != nil || len(pending) != 0 {
		t.Errorf("check after apply = %v, %v; want nothing pending", pending, err)
	}
	if res.Changes == 0 {
		t.Fatal("first apply made no changes")
	}
	out, _ := a.Run(ctx, "ip", "-6", "route", "show")
	for _, want := range []string{"mode inline", "End.X nh6 fc00:12::2 oif eth0", "End.DX4 nh4 10.0.12.2", "End.DX6 nh6 fc00:12::2", "End.DT6 table main", "fc00:1::e "} {
		if !strings.Contains(out, want) {
			t.Errorf("ipv6 routes lack %q:\n%s", want, out)
		}
	}
	out4, _ := a.Run(ctx, "ip", "-4", "route", "show", "table", "all")
	if !strings.Contains(out4, "segs 2 [ fc00:2::f1 fc00:2::d4 ]") || !strings.Contains(out4, "table 100") {
		t.Errorf("ipv4 routes wrong (want travel order fc00:2::f1 first):\n%s", out4)
	}
	rules, _ := a.Run(ctx, "ip", "-4", "rule")
	if !strings.Contains(rules, "ipproto udp dport 5000-5001 lookup 100") {
		t.Errorf("rule missing:\n%s", rules)
	}
	rules6, _ := a.Run(ctx, "ip", "-6", "rule")
	if !strings.Contains(rules6, "from fc00:a1::/64 to fc00:99::/64 iif eth0 ipproto tcp sport 1000-2000 dport 80 lookup 101") {
		t.Errorf("ipv6 rule missing:\n%s", rules6)
	}
	before := snapshot(t, a)
	res, err = ApplyWith(ctx, a, node, Options{})
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if res.Changes != 0 {
		t.Errorf("second apply made %d changes, want 0", res.Changes)
	}
	if after := snapshot(t, a); after != before {
		t.Errorf("second apply changed the node:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestApplyUndoOnError(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := snapshot(t, a)
	node := richNode()
	node.Programs = []state.Program{{Kind: "ok"}, {Kind: "boom"}}
	undone := false
	drivers := map[string]ProgramDriver{
		"ok": DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
			return func() error { undone = true; return nil }, nil
		}),
		"boom": DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
			return nil, errors.New("injected failure")
		}),
	}
	_, err := ApplyWith(ctx, a, node, Options{Drivers: drivers})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("apply error = %v, want the injected failure", err)
	}
	if !undone {
		t.Error("program undo not called")
	}
	if after := snapshot(t, a); after != before {
		t.Errorf("failed apply left changes:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// A failure in the middle (a route through an interface that does not
	// exist) also restores a node that already had part of the state.
	partial := richNode()
	partial.Routes = partial.Routes[:1]
	partial.SIDs, partial.Rules = nil, nil
	if err := Apply(ctx, a, partial); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, a)
	bad := richNode()
	bad.SIDs = append(bad.SIDs, state.LocalSID{SID: p("fc00:1::e9/128"), Behavior: state.EndX, NH6: ad("fc00:12::2"), OIF: "nosuch0"})
	if err := Apply(ctx, a, bad); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("apply error = %v, want ErrNoInterface", err)
	}
	if after := snapshot(t, a); after != before {
		t.Errorf("failed apply left changes:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	dx6 := richNode()
	dx6.SIDs = append(dx6.SIDs, state.LocalSID{SID: p("fc00:1::d7/128"), Behavior: state.EndDX6, NH6: ad("fc00:12::1"), Datapath: state.Kernel})
	if err := Apply(ctx, a, dx6); !errors.Is(err, ErrBadState) {
		t.Errorf("End.DX6 to a local next hop: %v, want ErrBadState", err)
	}
	if after := snapshot(t, a); after != before {
		t.Errorf("refused apply left changes")
	}

	if err := Apply(ctx, a, state.Node{Name: "x", Programs: []state.Program{{Kind: "nosuchkind"}}}); !errors.Is(err, ErrNoDriver) {
		t.Errorf("unknown program kind error = %v, want ErrNoDriver", err)
	}
}

func TestApplyEndProgram(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = os.RemoveAll(PinDir(a)) })
	node := state.Node{
		Name:       "r2",
		Interfaces: []state.Interface{{Name: "eth0", Addrs: []netip.Prefix{p("fc00:12::2/64")}}},
		SIDs: []state.LocalSID{
			{SID: p("fc00:2::f1/128"), Behavior: state.End, Datapath: state.EBPF},
			{SID: p("fc00:2::f2/128"), Behavior: state.EndX, NH6: ad("fc00:12::1"), OIF: "eth0", Datapath: state.EBPF},
		},
		Programs: []state.Program{{Kind: "end", Interfaces: []string{"eth0"}}},
	}
	attached := func() string {
		names, err := IngressPrograms(a, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(names, ",")
	}

	// An injected failure after the program driver detaches it again.
	failing := node
	failing.Programs = append(slices.Clone(node.Programs), state.Program{Kind: "boom"})
	drivers := registered()
	drivers["boom"] = DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
		return nil, errors.New("injected failure")
	})
	if _, err := ApplyWith(ctx, a, failing, Options{Drivers: drivers}); err == nil {
		t.Fatal("apply with failing driver succeeded")
	}
	if got := attached(); got != "" {
		t.Errorf("end program left attached after a failed apply: %q", got)
	}
	if _, err := os.Stat(PinDir(a)); err == nil {
		t.Errorf("pin dir %s left after a failed apply", PinDir(a))
	}

	res, err := ApplyWith(ctx, a, node, Options{})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.Changes == 0 {
		t.Fatal("no changes")
	}
	if got := attached(); got != "srchain_end" {
		t.Errorf("ingress programs = %q, want srchain_end", got)
	}
	res, err = ApplyWith(ctx, a, node, Options{})
	if err != nil || res.Changes != 0 {
		t.Errorf("re-apply: %d changes, %v; want 0, nil", res.Changes, err)
	}
}

// TestApplyReplace: a route to the same destination with other contents is
// replaced, and a failed apply puts the old one back.
func TestApplyReplace(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := state.Node{Name: "r1", Interfaces: []state.Interface{{Name: "eth0", Addrs: []netip.Prefix{p("fc00:12::1/64")}}}}
	if err := Apply(ctx, a, base); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, "ip", "-6", "route", "add", "fc00:2::/64", "via", "fc00:12::3"); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, a)
	want := base
	want.Routes = []state.Route{{Dst: p("fc00:2::/64"), Dev: "eth0", Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f1")}}}}
	want.Programs = []state.Program{{Kind: "boom"}}
	drivers := map[string]ProgramDriver{"boom": DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
		return nil, errors.New("injected failure")
	})}
	if _, err := ApplyWith(ctx, a, want, Options{Drivers: drivers}); err == nil {
		t.Fatal("apply with failing driver succeeded")
	}
	if after := snapshot(t, a); after != before {
		t.Errorf("replaced route not restored:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	want.Programs = nil
	res, err := ApplyWith(ctx, a, want, Options{})
	if err != nil || res.Changes != 1 {
		t.Fatalf("apply = %d changes, %v; want 1 replace", res.Changes, err)
	}
	out, _ := a.Run(ctx, "ip", "-6", "route", "show", "fc00:2::/64")
	if !strings.Contains(out, "encap seg6") || strings.Contains(out, "fc00:12::3") {
		t.Errorf("route not replaced:\n%s", out)
	}
}

// TestApplyReplaceMetric: an existing route to the destination with a
// metric other than the kernel's default is replaced in place (one route,
// same metric, ours), a failed apply puts it back exactly, and a route like
// ours that a lower-metric route shadows is not taken as applied.
func TestApplyReplaceMetric(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := state.Node{Name: "r1", Interfaces: []state.Interface{{Name: "eth0", Addrs: []netip.Prefix{p("fc00:12::1/64"), p("10.0.12.1/24")}}}}
	if err := Apply(ctx, a, base); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"ip", "-6", "route", "add", "fc00:2::/64", "via", "fc00:12::3", "metric", "100"},
		{"ip", "-4", "route", "add", "10.0.2.0/24", "via", "10.0.12.3", "metric", "100"},
	} {
		if out, err := a.Run(ctx, argv[0], argv[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	before := snapshot(t, a)
	enc := &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f1")}}
	want := base
	want.Routes = []state.Route{{Dst: p("fc00:2::/64"), Dev: "eth0", Encap: enc}, {Dst: p("10.0.2.0/24"), Dev: "eth0", Encap: enc}}
	want.Programs = []state.Program{{Kind: "boom"}}
	drivers := map[string]ProgramDriver{"boom": DriverFunc(func(*netns.NS, state.Node, state.Program) (func() error, error) {
		return nil, errors.New("injected failure")
	})}
	if _, err := ApplyWith(ctx, a, want, Options{Drivers: drivers}); err == nil || strings.Contains(err.Error(), "roll back") {
		t.Fatalf("apply with failing driver = %v, want the injected failure and a clean roll back", err)
	}
	if after := snapshot(t, a); after != before {
		t.Errorf("replaced routes not restored:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	want.Programs = nil
	res, err := ApplyWith(ctx, a, want, Options{})
	if err != nil || res.Changes != 2 {
		t.Fatalf("apply = %d changes, %v; want 2 replaces", res.Changes, err)
	}
	for _, fam := range []string{"-6", "-4"} {
		dst := map[string]string{"-6": "fc00:2::/64", "-4": "10.0.2.0/24"}[fam]
		out, _ := a.Run(ctx, "ip", fam, "route", "show", dst)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 1 || !strings.Contains(out, "encap seg6") || !strings.Contains(out, "metric 100") {
			t.Errorf("%s: want one seg6 route with metric 100, got:\n%s", dst, out)
		}
	}
	if res, err := ApplyWith(ctx, a, want, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want none", res.Changes, err)
	}

	// Our route, shadowed by a lower metric: not applied.
	if out, err := a.Run(ctx, "ip", "-6", "route", "add", "fc00:2::/64", "via", "fc00:12::3", "metric", "50"); err != nil {
		t.Fatalf("add shadowing route: %v\n%s", err, out)
	}
	if pending, err := Check(ctx, a, want); err != nil || len(pending) != 1 {
		t.Errorf("check with a shadowing route = %v, %v; want one pending replace", pending, err)
	}
	if res, err := ApplyWith(ctx, a, want, Options{}); err != nil || res.Changes != 1 {
		t.Errorf("apply over a shadowing route = %d changes, %v; want 1", res.Changes, err)
	}
	out, _ := a.Run(ctx, "ip", "-6", "route", "get", "fc00:2::1")
	if !strings.Contains(out, "encap seg6") {
		t.Errorf("traffic does not follow srchain's route:\n%s", out)
	}
}
