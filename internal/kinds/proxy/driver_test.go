package proxy

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/kinds/kindtest"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/proxydp"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestApplySwapsOtherBuild: a proxy link that runs another build's code
// under srchain's pin (what an upgraded srchain finds) is reported by
// Check and gets this build's program from Apply; the driver used to
// leave any live link alone, so an upgrade kept the old proxy code.
func TestApplySwapsOtherBuild(t *testing.T) {
	a, sr0 := proxyNS(t, "p")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := amProgram(t)
	node := state.Node{Name: "a", Programs: []state.Program{p}}
	var d driver
	if undo, err := d.Apply(ctx, a, node, p); err != nil || undo == nil {
		t.Fatalf("first apply: undo %v, %v", undo != nil, err)
	}
	eth0, err := a.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	other := testutil.OtherBuild(t, ebpf.SchedCLS, "other_build")
	for _, lp := range []string{linkPin(PinDir(a), sr0.Attrs().Index, false), linkPin(PinDir(a), eth0.Attrs().Index, true)} {
		l, err := link.LoadPinnedLink(lp, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = l.Update(other)
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ifn := range []string{"sr0", "eth0"} {
		if got := kindtest.TCXNames(t, a, ifn, false); !slices.Equal(got, []string{"other_build"}) {
			t.Fatalf("%s runs %v after the update, want other_build", ifn, got)
		}
	}
	drift, err := d.Check(ctx, a, node, p)
	want := []string{
		"proxy am: program srchain_proxy_sr on sr0 runs another build's code",
		"proxy am: program srchain_proxy_nf on eth0 runs another build's code",
	}
	if err != nil || !slices.Equal(drift, want) {
		t.Fatalf("check with another build's links = %q, %v; want %q", drift, err, want)
	}
	undo, err := d.Apply(ctx, a, node, p)
	if err != nil || undo == nil {
		t.Fatalf("apply over another build: undo %v, %v; want the links swapped", undo != nil, err)
	}
	// Its undo (a later step of the apply failing) keeps the SID and
	// this build's programs: it used to take the NF's SID out of the
	// table, though the SID was there before.
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	for ifn, want := range map[string]string{"sr0": SRProgName, "eth0": NFProgName} {
		if got := kindtest.TCXNames(t, a, ifn, false); !slices.Equal(got, []string{want}) {
			t.Errorf("%s runs %v after apply, want %s alone", ifn, got, want)
		}
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Errorf("check after the swap = %q, %v", drift, err)
	}
	if undo, err := d.Apply(ctx, a, node, p); err != nil || undo != nil {
		t.Errorf("re-apply: undo %v, %v; want nothing to do", undo != nil, err)
	}

	// Another next hop for the NF: a change of the SID table alone is a
	// change (it used to count as none), and its undo puts the old
	// entry back.
	raw2 := strings.Replace(string(p.Config), kindtest.AddrB.Addr().String(), "fd00:ab::3", 1)
	p2 := state.Program{Kind: Name, NF: "am", Config: []byte(raw2)}
	node2 := state.Node{Name: "a", Programs: []state.Program{p2}}
	undo, err = d.Apply(ctx, a, node2, p2)
	if err != nil || undo == nil {
		t.Fatalf("apply another next hop: undo %v, %v; want a change", undo != nil, err)
	}
	if drift, err := d.Check(ctx, a, node2, p2); err != nil || len(drift) != 0 {
		t.Errorf("check after the new next hop = %q, %v", drift, err)
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if drift, err := d.Check(ctx, a, node, p); err != nil || len(drift) != 0 {
		t.Errorf("check of the old next hop after the undo = %q, %v", drift, err)
	}
	if err := d.Remove(ctx, a, node, p); err != nil {
		t.Fatal(err)
	}
	for _, ifn := range []string{"sr0", "eth0"} {
		if got := kindtest.TCXNames(t, a, ifn, false); len(got) != 0 {
			t.Errorf("%s runs %v after remove, want nothing", ifn, got)
		}
	}
}

// proxyNS is a namespace for the driver (pins removed with the test)
// with an SR-facing interface sr0 besides eth0 (the NF's link); a veth,
// as this kernel has no dummy links.
// amProgram is an End.AM proxy NF "am" on proxyNS's node: one-armed
// on eth0, SR side sr0.
func amProgram(t *testing.T) state.Program {
	t.Helper()
	raw, err := json.Marshal(Program{
		SID: netip.MustParsePrefix("fd00:5::a/128"), Behavior: state.EndAM, LegacyNF: "lnf",
		IfaceOut: "eth0", IfaceIn: "eth0", NFNext6: kindtest.AddrB.Addr(), SRSide: []string{"sr0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return state.Program{Kind: Name, NF: "am", Config: raw}
}

func proxyNS(t *testing.T, tag string) (*netns.NS, netlink.Link) {
	t.Helper()
	a, _ := kindtest.Pair(t, tag)
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	if err := a.Netlink().LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sr0"}, PeerName: "sr0p"}); err != nil {
		t.Fatal(err)
	}
	sr0, err := a.Netlink().LinkByName("sr0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Netlink().LinkSetUp(sr0); err != nil {
		t.Fatal(err)
	}
	return a, sr0
}

// opotProxyNode is a node with an End.AD proxy carrying the proof and
// an OPoT program whose transit entry on the proxy SID is done in the
// proxy (inProxy: InEnd, no receive stage) or by a stage on eth0.
func opotProxyNode(t *testing.T, inProxy bool) state.Node {
	t.Helper()
	sid := netip.MustParseAddr("fd00:5::d")
	raw, err := json.Marshal(Program{
		SID: netip.PrefixFrom(sid, 128), Behavior: state.EndAD, LegacyNF: "lnf", Inner: 6, OPoT: true,
		IfaceOut: "eth0", IfaceIn: "eth0", NFNext6: kindtest.AddrB.Addr(), SRSide: []string{"sr0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := state.OPoTConfig{Chains: []state.OPoTChain{{
		Name: "c", Profile: 1, Role: state.OPoTTransit, Hop: 1, K: 3, SID: sid, Last: netip.MustParseAddr("fd00:9::c"), InEnd: inProxy,
	}}}
	if !inProxy {
		cfg.Ingress = []string{"eth0"}
	}
	oc, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return state.Node{
		Name: "a",
		Programs: []state.Program{
			{Kind: state.ProgramOPoT, Interfaces: []string{"eth0"}, Config: oc},
			{Kind: Name, NF: "ad", Config: raw},
		},
		Secrets: []state.Secret{kindtest.OPoTTransitSecret(t, "c")},
	}
}

// TestApplyOPoTInProxy: the node's proxy reads the OPoT driver's pinned
// maps when a transit entry on one of its SIDs is done in the proxy
// (InEnd), which Check verifies; when it no longer is, Apply swaps the
// links for programs that do not read them, and Check against the node
// that asks for it reports them again. A re-apply changes nothing.
func TestApplyOPoTInProxy(t *testing.T) {
	a, _ := proxyNS(t, "q")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	with, without := opotProxyNode(t, true), opotProxyNode(t, false)
	unread := []string{
		"proxy ad: program srchain_proxy_sr on sr0 does not read the node's opot maps (the transit in the proxy)",
		"proxy ad: program srchain_proxy_nf on eth0 does not read the node's opot maps (the transit in the proxy)",
	}
	stale := []string{
		"proxy ad: program srchain_proxy_sr on sr0 reads opot maps the node's proxies no longer use",
		"proxy ad: program srchain_proxy_nf on eth0 reads opot maps the node's proxies no longer use",
	}
	var d driver
	for i, st := range []struct {
		apply      state.Node
		change     bool
		with, wout []string
	}{
		{without, true, unread, nil},
		{with, true, nil, stale},
		{with, false, nil, stale},
		{without, true, unread, nil},
	} {
		if _, err := (opotdp.Driver{}).Apply(ctx, a, st.apply, st.apply.Programs[0]); err != nil {
			t.Fatalf("step %d: opot: %v", i, err)
		}
		undo, err := d.Apply(ctx, a, st.apply, st.apply.Programs[1])
		if err != nil || (undo != nil) != st.change {
			t.Fatalf("step %d: apply: change %v, %v; want %v", i, undo != nil, err, st.change)
		}
		for _, c := range []struct {
			node state.Node
			want []string
		}{{with, st.with}, {without, st.wout}} {
			if drift, err := d.Check(ctx, a, c.node, c.node.Programs[1]); err != nil || !slices.Equal(drift, c.want) {
				t.Errorf("step %d: check = %q, %v; want %q", i, drift, err, c.want)
			}
		}
	}

	// An apply that takes the transit out of the proxy, undone (a later
	// step failed): the OPoT driver puts its mark back and the proxy the
	// programs that read the maps, so the chain is not left without a
	// transit (the swap used to be kept).
	for i, n := range []state.Node{with, without} {
		ou, err := (opotdp.Driver{}).Apply(ctx, a, n, n.Programs[0])
		if err != nil {
			t.Fatal(err)
		}
		pu, err := d.Apply(ctx, a, n, n.Programs[1])
		if err != nil || pu == nil {
			t.Fatalf("undo step %d: apply: change %v, %v", i, pu != nil, err)
		}
		if i == 0 {
			continue
		}
		if err := pu(); err != nil {
			t.Fatal(err)
		}
		if ou != nil {
			if err := ou(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if drift, err := d.Check(ctx, a, with, with.Programs[1]); err != nil || len(drift) != 0 {
		t.Errorf("check after the undo = %q, %v; want the maps read again", drift, err)
	}
}

// TestApplyXDPStage: on a node that runs the proxy at XDP (the
// compiler's Program.XDP), Apply pins the proxy's pipeline stage for the
// pipeline driver and names the SR-side interfaces it serves; Check
// reports a missing stage; Apply at tc takes the stage away; the undo of
// the apply that pinned it unpins it, and Remove of the last proxy NF
// does too.
func TestApplyXDPStage(t *testing.T) {
	a, sr0 := proxyNS(t, "x")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tc := amProgram(t)
	x := tc
	x.XDP = true
	node := func(p state.Program) state.Node { return state.Node{Name: "a", Programs: []state.Program{p}} }
	pdir := pipeline.Dir(kind.PinDir(a))
	var d driver
	if undo, err := d.Apply(ctx, a, node(tc), tc); err != nil || undo == nil {
		t.Fatalf("apply at tc: undo %v, %v", undo != nil, err)
	}
	if pipeline.StagePinned(pdir, pipeline.Proxy) {
		t.Fatal("apply at tc pinned the xdp stage")
	}
	if drift, err := d.Check(ctx, a, node(x), x); err != nil || !slices.Contains(drift, "proxy am: program srchain_proxy_xdp not pinned as the xdp pipeline's proxy stage (or an older build's)") {
		t.Errorf("check at xdp before the apply = %q, %v; want the stage missing", drift, err)
	}
	undo, err := d.Apply(ctx, a, node(x), x)
	if err != nil || undo == nil {
		t.Fatalf("apply at xdp: undo %v, %v; want a change", undo != nil, err)
	}
	stage, err := ebpf.LoadPinnedProgram(pipeline.StagePin(pdir, pipeline.Proxy), nil)
	if err != nil {
		t.Fatalf("the stage is not pinned: %v", err)
	}
	info, err := stage.Info()
	stage.Close()
	if err != nil || info.Name != StageProgName {
		t.Errorf("pinned stage %q (%v), want %s", info.Name, err, StageProgName)
	}
	dp, err := proxydp.OpenPinnedMaps(PinDir(a))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dp.SRSide()
	dp.Close()
	if err != nil || !slices.Equal(got, []int{sr0.Attrs().Index}) {
		t.Errorf("sr side %v (%v), want [%d] (sr0)", got, err, sr0.Attrs().Index)
	}
	if drift, err := d.Check(ctx, a, node(x), x); err != nil || len(drift) != 0 {
		t.Errorf("check after the apply at xdp = %q, %v", drift, err)
	}
	if u, err := d.Apply(ctx, a, node(x), x); err != nil || u != nil {
		t.Errorf("re-apply at xdp: undo %v, %v; want nothing to do", u != nil, err)
	}
	if drift, err := d.Check(ctx, a, node(tc), tc); err != nil || !slices.Equal(drift, []string{"proxy am: program srchain_proxy_xdp pinned as the xdp pipeline's proxy stage, which the node runs at tc"}) {
		t.Errorf("check at tc with the stage pinned = %q, %v", drift, err)
	}
	// The undo of the apply that pinned the stage unpins it.
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if pipeline.StagePinned(pdir, pipeline.Proxy) {
		t.Error("the undo left the stage pinned")
	}
	if _, err := d.Apply(ctx, a, node(x), x); err != nil {
		t.Fatal(err)
	}
	// Back to tc: the stage leaves.
	if u, err := d.Apply(ctx, a, node(tc), tc); err != nil || u == nil || pipeline.StagePinned(pdir, pipeline.Proxy) {
		t.Errorf("apply at tc after xdp: undo %v, %v, stage pinned %v; want it unpinned, a change", u != nil, err, pipeline.StagePinned(pdir, pipeline.Proxy))
	}
	if _, err := d.Apply(ctx, a, node(x), x); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(ctx, a, node(x), x); err != nil {
		t.Fatal(err)
	}
	if pipeline.StagePinned(pdir, pipeline.Proxy) {
		t.Error("remove of the last proxy NF left the stage pinned")
	}
}
