package opotdp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/kindtest"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

type seeded struct{ r *rand.ChaCha8 }

func (s seeded) Read(b []byte) (int, error) { return s.r.Read(b) }

// secretsFor gives node j of a fresh k-node profile for both slots of
// chain (name, profile).
func secretsFor(t *testing.T, seed byte, name string, profile, k, j int) []state.Secret {
	t.Helper()
	rng := seeded{rand.NewChaCha8([32]byte{seed})}
	var out []state.Secret
	for slot := range state.OPoTSlots {
		p, err := opot.GenerateFrom(rng, k)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Node(j)
		if err != nil {
			t.Fatal(err)
		}
		b, err := n.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, state.Secret{Name: state.OPoTSecretName(name, profile, slot), Value: b})
	}
	return out
}

// driverNode is a node that is the headend of chain a, a transit of
// chain b and the verifier of chain c, on eth0.
func driverNode(t *testing.T, mods ...func(*state.OPoTConfig)) state.Node {
	t.Helper()
	ad := netip.MustParseAddr
	cfg := state.OPoTConfig{
		Chains: []state.OPoTChain{
			{Name: "a", Profile: 1, Role: state.OPoTHeadend, Hop: 0, K: 3, SID: ad("fd00:2::1"), Last: ad("fd00:9::a")},
			{Name: "b", Profile: 2, Role: state.OPoTTransit, Hop: 1, K: 3, SID: ad("fd00:1::b"), Last: ad("fd00:9::b")},
			{Name: "c", Profile: 3, Role: state.OPoTVerifier, Hop: 2, K: 3, SID: ad("fd00:1::c"), Last: ad("fd00:1::c")},
		},
		Egress:  []string{"eth0"},
		Ingress: []string{"eth0"},
	}
	for _, m := range mods {
		m(&cfg)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := state.Node{Name: "r1", Programs: []state.Program{{Kind: state.ProgramOPoT, Interfaces: []string{"eth0"}, Config: b}}}
	n.Secrets = append(n.Secrets, secretsFor(t, 1, "a", 1, 3, 0)...)
	n.Secrets = append(n.Secrets, secretsFor(t, 2, "b", 2, 3, 1)...)
	n.Secrets = append(n.Secrets, secretsFor(t, 3, "c", 3, 3, 2)...)
	return n
}

func progNames(t *testing.T, ns *netns.NS, egress bool) []string {
	t.Helper()
	return kindtest.TCXNames(t, ns, "eth0", egress)
}

// TestDriver: Apply loads, fills and attaches the stages of the node's
// roles (headend at egress, transit and verifier at ingress); a second
// Apply changes nothing; a headend's sequence counter survives a
// re-apply with the same keys and restarts with new ones (and the undo
// puts the old parameters back); a stage detached by hand is drift that
// Check names and Apply repairs; counters name each chain; a secret that
// does not decode is an error that does not print it; Remove leaves
// nothing.
func TestDriver(t *testing.T) {
	a, _ := kindtest.Pair(t, "o")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := driverNode(t)
	p := node.Programs[0]
	var d Driver
	undo, err := d.Apply(ctx, a, node, p)
	if err != nil || undo == nil {
		t.Fatalf("first apply: undo %v, %v", undo != nil, err)
	}
	if got := progNames(t, a, false); !slices.Contains(got, "srchain_opot_transit") || !slices.Contains(got, "srchain_opot_verify") {
		t.Errorf("tcx ingress runs %v, want the transit and verifier stages", got)
	}
	if got := progNames(t, a, true); !slices.Equal(got, []string{"srchain_opot_headend"}) {
		t.Errorf("tcx egress runs %v, want the headend stage", got)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Fatalf("check after apply: %v, %v", drift, err)
	}
	if u, err := d.Apply(ctx, a, node, p); err != nil || u != nil {
		t.Fatalf("re-apply: undo %v, %v; want nothing to do", u != nil, err)
	}
	dir := PinDir(a)
	seqs, err := ebpf.LoadPinnedMap(dir+"/opot_seqs", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seqs.Close()
	chains, err := ebpf.LoadPinnedMap(dir+"/opot_chains", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer chains.Close()
	var ch Chain
	if err := chains.Lookup(&ChainKey{Last: netip.MustParseAddr("fd00:9::b").As16()}, &ch); err != nil || ch != (Chain{Profile: 2, Role: uint32(opot.RoleTransit), Idx: 1, Sid: netip.MustParseAddr("fd00:1::b").As16()}) {
		t.Fatalf("chain b entry %+v, %v", ch, err)
	}
	k := Key{Index: 0, Slot: 0}.Array()
	if err := seqs.Put(k, uint64(42)); err != nil { // packets went out
		t.Fatal(err)
	}
	// Same keys, another secret list object: the counter stays.
	again := driverNode(t)
	if _, err := d.Apply(ctx, a, again, again.Programs[0]); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	if err := seqs.Lookup(k, &seq); err != nil || seq != 42 {
		t.Fatalf("seq after re-apply with the same keys: %d, %v; want 42", seq, err)
	}
	// New keys for chain a: slot 0 restarts at 0; undo restores them.
	rotated := driverNode(t)
	copy(rotated.Secrets[0:2], secretsFor(t, 9, "a", 1, 3, 0))
	u, err := d.Apply(ctx, a, rotated, rotated.Programs[0])
	if err != nil || u == nil {
		t.Fatalf("apply new keys: undo %v, %v", u != nil, err)
	}
	if err := seqs.Lookup(k, &seq); err != nil || seq != 0 {
		t.Fatalf("seq after new keys: %d, %v; want 0", seq, err)
	}
	if drift, _ := d.Check(ctx, a, node, p); len(drift) != 2 || !strings.Contains(drift[0], "chain a: parameters of slot 0") {
		t.Errorf("check against the old keys: %q", drift)
	}
	if err := u(); err != nil {
		t.Fatal(err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Fatalf("check after undo: %v, %v", drift, err)
	}
	// A stage detached by hand.
	l, _ := a.Netlink().LinkByName("eth0")
	pin := linkPin(dir, stageTransit, bpfrt.Hook{Ifindex: l.Attrs().Index})
	pl, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Detach(); err != nil {
		t.Fatal(err)
	}
	pl.Close()
	if drift, _ := d.Check(ctx, a, node, p); !slices.Equal(drift, []string{"program opot (transit stage) not attached on eth0"}) {
		t.Errorf("check after detach: %q", drift)
	}
	if _, err := d.Apply(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	if drift, _ := d.Check(ctx, a, node, p); len(drift) != 0 {
		t.Errorf("check after repair: %q", drift)
	}
	cs, err := d.Counters(ctx, a, node, p)
	if err != nil || !slices.Contains(cs, kind.Counter{Name: "chain/c/verified"}) {
		t.Errorf("counters %v, %v; want chain/c/verified 0", cs, err)
	}
	if evs, err := d.Events(ctx, a, node, p); err != nil || len(evs) != 0 {
		t.Errorf("events %v, %v; want none", evs, err)
	}
	// Chain b's transit done in the End, in two steps (docs/opot.md
	// "Changing sides"). Apply writes its entry unmarked and keeps the
	// transit stage: the End, applied after it, does not read the maps
	// yet. Finish marks it and detaches the stage (the verifier's
	// stays). Each undo brings back what its step changed, so the
	// chain's proofs are never left to no one. Only a transit can be in
	// the End.
	inEnd := driverNode(t, func(c *state.OPoTConfig) { c.Chains[1].InEnd = true })
	u, err = d.Apply(ctx, a, inEnd, inEnd.Programs[0])
	if err != nil || u != nil {
		t.Fatalf("apply in-end: undo %v, %v; want nothing changed before Finish", u != nil, err)
	}
	bKey := &ChainKey{Last: netip.MustParseAddr("fd00:9::b").As16()}
	if got := progNames(t, a, false); !slices.Contains(got, "srchain_opot_transit") {
		t.Errorf("in-end before finish: tcx ingress runs %v, want the transit stage kept", got)
	}
	if err := chains.Lookup(bKey, &ch); err != nil || ch.Flags != 0 {
		t.Errorf("in-end before finish: chain b entry %+v, %v; want no flag yet", ch, err)
	}
	if drift, _ := d.Check(ctx, a, inEnd, inEnd.Programs[0]); !slices.Equal(drift, []string{"opot chain b: entry missing or different in opot_chains"}) {
		t.Errorf("check in-end before finish: %q", drift)
	}
	fu, err := d.Finish(ctx, a, inEnd, inEnd.Programs[0])
	if err != nil || fu == nil {
		t.Fatalf("finish in-end: undo %v, %v", fu != nil, err)
	}
	if got := progNames(t, a, false); slices.Contains(got, "srchain_opot_transit") || !slices.Contains(got, "srchain_opot_verify") {
		t.Errorf("in-end: tcx ingress runs %v, want the verifier stage alone", got)
	}
	if err := chains.Lookup(bKey, &ch); err != nil || ch.Flags != ChainInEnd {
		t.Errorf("in-end: chain b entry %+v, %v; want the in-end flag", ch, err)
	}
	if drift, err := d.Check(ctx, a, inEnd, inEnd.Programs[0]); err != nil || len(drift) != 0 {
		t.Errorf("check in-end: %q, %v", drift, err)
	}
	// Once marked, an Apply keeps the mark and needs no Finish.
	if u, err := d.Apply(ctx, a, inEnd, inEnd.Programs[0]); err != nil || u != nil {
		t.Errorf("re-apply in-end: undo %v, %v; want nothing to do", u != nil, err)
	}
	if u, err := d.Finish(ctx, a, inEnd, inEnd.Programs[0]); err != nil || u != nil {
		t.Errorf("re-finish in-end: undo %v, %v; want nothing to do", u != nil, err)
	}
	if err := fu(); err != nil {
		t.Fatal(err)
	}
	if got := progNames(t, a, false); !slices.Contains(got, "srchain_opot_transit") {
		t.Errorf("after undo: tcx ingress runs %v, want the transit stage back", got)
	}
	if err := chains.Lookup(bKey, &ch); err != nil || ch.Flags != 0 {
		t.Errorf("after undo: chain b entry %+v, %v; want no flag", ch, err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Errorf("check after the in-end undo: %q, %v", drift, err)
	}
	notTransit := driverNode(t, func(c *state.OPoTConfig) { c.Chains[2].InEnd = true })
	if _, err := d.Apply(ctx, a, notTransit, notTransit.Programs[0]); !errors.Is(err, ErrConfig) {
		t.Errorf("a verifier in the end: %v, want ErrConfig", err)
	}
	// A corrupt secret: an error naming it, never its bytes.
	bad := driverNode(t)
	bad.Secrets[2].Value = append([]byte{0xde, 0xad}, bad.Secrets[2].Value...)
	_, err = d.Apply(ctx, a, bad, bad.Programs[0])
	if err == nil || !strings.Contains(err.Error(), "opot/b/2/slot0") || strings.Contains(err.Error(), "dead") || strings.Contains(err.Error(), fmt.Sprint(bad.Secrets[2].Value[2:6])) {
		t.Errorf("corrupt secret: %v", err)
	}
	if err := d.Remove(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin dir after remove: %v", err)
	}
	if got := append(progNames(t, a, false), progNames(t, a, true)...); len(got) != 0 {
		t.Errorf("programs after remove: %v", got)
	}
}

// TestDriverFailureLeavesNothing: an Apply that fails (an interface the
// node lacks) on a fresh node leaves no pin directory.
func TestDriverFailureLeavesNothing(t *testing.T) {
	a, _ := kindtest.Pair(t, "p")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	node := driverNode(t)
	var cfg state.OPoTConfig
	if err := json.Unmarshal(node.Programs[0].Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Ingress = []string{"eth0", "eth9"}
	b, _ := json.Marshal(cfg)
	node.Programs[0].Config = b
	if _, err := (Driver{}).Apply(context.Background(), a, node, node.Programs[0]); !errors.Is(err, kind.ErrNoInterface) {
		t.Fatalf("apply with a missing interface: %v", err)
	}
	if _, err := os.Stat(PinDir(a)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin dir after a failed apply: %v", err)
	}
}

// TestDriverOldPins: maps pinned by an older build with another layout
// (opot_node_params was a hash map) are replaced, not an apply failure.
func TestDriverOldPins(t *testing.T) {
	a, _ := kindtest.Pair(t, "p")
	dir := PinDir(a)
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: "opot_node_params", Type: ebpf.Hash, KeySize: 8, ValueSize: 64, MaxEntries: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(dir + "/opot_node_params"); err != nil {
		t.Fatal(err)
	}
	old.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := driverNode(t)
	var d Driver
	if _, err := d.Apply(ctx, a, node, node.Programs[0]); err != nil {
		t.Fatalf("apply over old pins: %v", err)
	}
	m, err := ebpf.LoadPinnedMap(dir+"/opot_node_params", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Type() != ebpf.Array {
		t.Errorf("opot_node_params is a %v after apply, want an array", m.Type())
	}
	if drift, err := d.Check(ctx, a, node, node.Programs[0]); err != nil || len(drift) != 0 {
		t.Errorf("check: %v, %v", drift, err)
	}
}

// parseLinkPin reads back what linkPin writes, and nothing else.
func TestParseLinkPin(t *testing.T) {
	for _, h := range []struct {
		stage string
		hook  bpfrt.Hook
	}{{stageTransit, bpfrt.Hook{Ifindex: 7}}, {stageVerify, bpfrt.Hook{Ifindex: 12}}, {stageHeadend, bpfrt.Hook{Ifindex: 3, Egress: true}}} {
		name := strings.TrimPrefix(linkPin("/d", h.stage, h.hook), "/d/")
		st, hk, ok := parseLinkPin(name)
		if !ok || st != h.stage || hk != h.hook {
			t.Errorf("parseLinkPin(%q) = %q %+v %v", name, st, hk, ok)
		}
	}
	for _, bad := range []string{"transit_xdp_3", "transit_tcx_ingress_x", "transit_tcx_ingress_0", "other_tcx_ingress_3", "opot_chains"} {
		if _, _, ok := parseLinkPin(bad); ok {
			t.Errorf("parseLinkPin(%q) accepted", bad)
		}
	}
}

// TestDriverSwapsOtherBuild: a stage link that runs other code under the
// stage's pin (what an older srchain left attached) is swapped for this
// build's program at the next Apply, which otherwise leaves attached
// links alone.
func TestDriverSwapsOtherBuild(t *testing.T) {
	a, _ := kindtest.Pair(t, "q")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := driverNode(t)
	var d Driver
	if _, err := d.Apply(ctx, a, node, node.Programs[0]); err != nil {
		t.Fatal(err)
	}
	eth0, err := a.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.LoadPinnedLink(linkPin(PinDir(a), stageTransit, hookOf(stageTransit, eth0.Attrs().Index)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other := testutil.OtherBuild(t, ebpf.SchedCLS, "other_build")
	if err := l.Update(other); err != nil {
		t.Fatal(err)
	}
	if got := progNames(t, a, false); !slices.Contains(got, "other_build") {
		t.Fatalf("tcx ingress runs %v after the update, want other_build", got)
	}
	if _, err := d.Apply(ctx, a, node, node.Programs[0]); err != nil {
		t.Fatal(err)
	}
	if got := progNames(t, a, false); slices.Contains(got, "other_build") || !slices.Contains(got, "srchain_opot_transit") {
		t.Errorf("tcx ingress runs %v after apply, want this build's transit stage", got)
	}
	if u, err := d.Apply(ctx, a, node, node.Programs[0]); err != nil || u != nil {
		t.Errorf("re-apply: undo %v, %v; want nothing to do", u != nil, err)
	}
}

// TestDriverEgressRule: on a verifier the driver writes the egress SID
// prefix (LOC+FUNCT) into opot_egress and installs the rule that
// blackholes unmarked packets to it; the kernel's input route lookup
// honours it (a lookup without MarkVerified fails, with it finds the
// route); a rule deleted by hand is drift that Check names and Apply
// repairs; the undo of a first Apply and Remove leave no rule.
func TestDriverEgressRule(t *testing.T) {
	a, _ := kindtest.Pair(t, "e")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sid := netip.MustParseAddr("fd00:1::1:0")
	prefix := netip.MustParsePrefix("fd00:1::1:0/112")
	node := driverNode(t, func(c *state.OPoTConfig) {
		c.Chains[2].SID, c.Chains[2].Last, c.Chains[2].SIDBits = sid, sid, 112
	})
	p := node.Programs[0]
	var d Driver
	undo, err := d.Apply(ctx, a, node, p)
	if err != nil {
		t.Fatal(err)
	}
	em, err := ebpf.LoadPinnedMap(PinDir(a)+"/opot_egress", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dumpEgress(em)
	em.Close()
	if err != nil || len(got) != 1 || got[egressKeyOf(prefix)] != (ChainKey{Last: sid.As16()}) {
		t.Fatalf("opot_egress %v (%v), want %s -> chain c", got, err, prefix)
	}
	rules, err := egressRules(a)
	if err != nil || len(rules) != 1 || !rules[prefix] {
		t.Fatalf("rules %v (%v), want one to %s", rules, err, prefix)
	}
	// The input route lookup with and without the verifier's mark
	// (forwarding on, a route to the prefix as the decap route would be).
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		{"ip", "-6", "addr", "add", "fd00:e::2/64", "dev", "eth0", "nodad"},
		{"ip", "-6", "route", "add", "fd00:1::1:0/112", "dev", "eth0"},
	} {
		if _, err := a.Run(ctx, c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}
	lookup := func(mark uint32) error {
		_, err := a.Run(ctx, "ip", "-6", "route", "get", "fd00:1::1:7", "from", "fd00:e::1", "iif", "eth0", "mark", fmt.Sprintf("%#x", mark))
		return err
	}
	if err := lookup(0); err == nil {
		t.Errorf("route lookup to the egress SID without the mark succeeded, want the rule's blackhole")
	}
	if err := lookup(0x80000000); err == nil {
		t.Errorf("route lookup with another srchain mark bit succeeded, want the rule's blackhole")
	}
	if err := lookup(MarkVerified); err != nil {
		t.Errorf("route lookup with the mark: %v", err)
	}
	if err := a.Netlink().RuleDel(egressRule(prefix)); err != nil {
		t.Fatal(err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || !slices.ContainsFunc(drift, func(s string) bool { return strings.Contains(s, "opot egress rule missing") }) {
		t.Fatalf("check without the rule: %v, %v", drift, err)
	}
	if _, err := d.Apply(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Fatalf("check after repair: %v, %v", drift, err)
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if rules, err := egressRules(a); err != nil || len(rules) != 0 {
		t.Fatalf("after the undo of the first apply: rules %v (%v)", rules, err)
	}
	if _, err := d.Apply(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	if rules, err := egressRules(a); err != nil || len(rules) != 0 {
		t.Fatalf("after remove: rules %v (%v)", rules, err)
	}
}
