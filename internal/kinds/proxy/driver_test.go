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
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// TestApplySwapsOtherBuild: a proxy link that runs another build's code
// under srchain's pin (what an upgraded srchain finds) is reported by
// Check and gets this build's program from Apply; the driver used to
// leave any live link alone, so an upgrade kept the old proxy code.
func TestApplySwapsOtherBuild(t *testing.T) {
	a, _ := kindtest.Pair(t, "p")
	t.Cleanup(func() { _ = os.RemoveAll(kind.PinDir(a)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// An SR-facing interface besides eth0 (the NF's link); a veth, as
	// this kernel has no dummy links.
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
	raw, err := json.Marshal(Program{
		SID: netip.MustParsePrefix("fd00:5::a/128"), Behavior: state.EndAM, LegacyNF: "lnf",
		IfaceOut: "eth0", IfaceIn: "eth0", NFNext6: kindtest.AddrB.Addr(), SRSide: []string{"sr0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := state.Program{Kind: Name, NF: "am", Config: raw}
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
