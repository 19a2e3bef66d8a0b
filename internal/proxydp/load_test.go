package proxydp

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/testutil"
)

// TestLoad: both programs pass the verifier.
func TestLoad(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(Options{FlowCapacity: 1024})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// verifierBudget bounds the verifier's work per program (docs/datapath.md,
// "Verifier budgets"): about 1.15-1.2 times what it takes on Linux 6.18
// (73,107, 180,990, 79,463 and 98,892 with the OPoT slots). The global
// functions (proxy_sr_run, proxy_nf_run, proxy_nf_xdp_run, proxy_hdr_same,
// proxy_opot_slot_put, proxy_opot_slot_find) are verified on their own;
// their cost shows in the log of the program that calls them.
var verifierBudget = map[string]int{
	"srchain_proxy_sr":     196000, // 163,051: End's hop limit check calls proxy_time_exceeded (~89k, its ICMPv6 checksum loop; issue 34 item 5)
	"srchain_proxy_nf":     205000,
	"srchain_proxy_sr_xdp": 95000,
	"srchain_proxy_nf_xdp": 115000,
	"srchain_proxy_xdp":    115000, // both twins' entries behind one program
}

// TestVerifierStats: `make bpf-stats` style budget check.
// With cfg_opot (Options.OPoT) the OPoT transit's paths are verified
// too; without, the verifier prunes them.
func TestVerifierStats(t *testing.T) {
	for _, opot := range []bool{false, true} {
		t.Run(fmt.Sprintf("opot=%v", opot), func(t *testing.T) {
			spec, err := loadProxyProg()
			if err != nil {
				t.Fatal(err)
			}
			if opot {
				if err := spec.Variables["cfg_opot"].Set(uint32(1)); err != nil {
					t.Fatal(err)
				}
			}
			testutil.VerifierBudgets(t, spec, verifierBudget)
		})
	}
}

// TestSetSIDs: validation, stable entry indexes, removal of what is gone,
// and Installed reads back what SetSIDs wrote.
func TestSetSIDs(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(Options{FlowCapacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a := netip.MustParseAddr("fc00:1::a")
	b := netip.MustParseAddr("fc00:1::b")
	c := netip.MustParseAddr("fc00:1::c")
	segs := []netip.Addr{netip.MustParseAddr("fc00:2::1"), netip.MustParseAddr("fc00:2::2")}
	sA := SID{Addr: a, Behavior: BehaviorAS, OutIfindex: 1, InIfindex: 11, Inner: ProtoIPv4, NFNext4: netip.MustParseAddr("10.0.0.2"), Source: netip.MustParseAddr("fc00::1"), Segments: segs}
	sB := SID{Addr: b, Behavior: BehaviorAD, OutIfindex: 1, InIfindex: 12, Inner: ProtoIPv6, NFNext6: netip.MustParseAddr("fc00:99::2")}
	sC := SID{Addr: c, Behavior: BehaviorADFlow, OutIfindex: 1, InIfindex: 13, Inner: ProtoIPv6, FlowTimeout: time.Second}
	for name, bad := range map[string][]SID{
		"behavior 0":     {{Addr: a, OutIfindex: 1, InIfindex: 1}},
		"ipv4 sid":       {{Addr: netip.MustParseAddr("10.0.0.1"), Behavior: BehaviorAM, OutIfindex: 1, InIfindex: 1}},
		"no ifindex":     {{Addr: a, Behavior: BehaviorAM, OutIfindex: 1}},
		"inner 17":       {{Addr: a, Behavior: BehaviorAD, OutIfindex: 1, InIfindex: 1, Inner: 17}},
		"as no segments": {{Addr: a, Behavior: BehaviorAS, OutIfindex: 1, InIfindex: 1, Inner: 41, Source: netip.MustParseAddr("fc00::1")}},
		"as no source":   {{Addr: a, Behavior: BehaviorAS, OutIfindex: 1, InIfindex: 1, Inner: 41, Segments: segs}},
		"nf4 is ipv6":    {{Addr: a, Behavior: BehaviorAD, OutIfindex: 1, InIfindex: 1, Inner: 4, NFNext4: netip.MustParseAddr("fc00::2")}},
		"same iface-in":  {sB, {Addr: c, Behavior: BehaviorAM, OutIfindex: 1, InIfindex: 12}},
		"same sid":       {sB, sB},
		"17 as segments": {{Addr: a, Behavior: BehaviorAS, OutIfindex: 1, InIfindex: 1, Inner: 41, Source: netip.MustParseAddr("fc00::1"), Segments: make([]netip.Addr, 17)}},
	} {
		if err := p.SetSIDs(bad); !errors.Is(err, ErrBadSID) {
			t.Errorf("%s: got %v, want ErrBadSID", name, err)
		}
	}
	if err := p.SetSIDs([]SID{sA, sB}); err != nil {
		t.Fatal(err)
	}
	ib := p.sids[b]
	got, err := p.Installed()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []SID{sA, sB}) {
		t.Fatalf("installed %+v\nwant %+v", got, []SID{sA, sB})
	}
	if err := p.SetSIDs([]SID{sB, sC}); err != nil {
		t.Fatal(err)
	}
	if p.sids[b] != ib {
		t.Errorf("sid b moved from entry %d to %d", ib, p.sids[b])
	}
	got, err = p.Installed()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []SID{sB, sC}) {
		t.Fatalf("installed %+v\nwant %+v", got, []SID{sB, sC})
	}
	var v uint32
	if err := p.objs.ProxyNf.Lookup(uint32(11), &v); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("IFACE-IN of the removed sid still mapped: %v", err)
	}
	if err := p.SetSIDs(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Installed(); err != nil || len(got) != 0 {
		t.Errorf("installed after clearing: %v %v", got, err)
	}
}

// TestOpenPinnedMaps: the maps pinned by Load, opened without the
// programs, hold the SID table Load's Proxy wrote, take a new one that
// the loaded Proxy then reads, and cannot attach; a directory missing a
// pinned map (an older build's) opens, and the map is not pinned afresh.
func TestOpenPinnedMaps(t *testing.T) {
	testutil.RequireRoot(t)
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("srchain-test-proxymaps-%d", os.Getpid()))
	_ = os.RemoveAll(dir)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := Load(Options{PinPath: dir, FlowCapacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a := SID{Addr: netip.MustParseAddr("fc00:1::a"), Behavior: BehaviorAM, OutIfindex: 1, InIfindex: 11, NFNext6: netip.MustParseAddr("fc00:99::2")}
	b := SID{Addr: netip.MustParseAddr("fc00:1::b"), Behavior: BehaviorAD, OutIfindex: 1, InIfindex: 12, Inner: ProtoIPv6, NFNext6: netip.MustParseAddr("fc00:99::2"), OPoT: true}
	if err := p.SetSIDs([]SID{a}); err != nil {
		t.Fatal(err)
	}
	m, err := OpenPinnedMaps(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, err := m.Installed(); err != nil || !reflect.DeepEqual(got, []SID{a}) {
		t.Fatalf("installed through the maps: %+v, %v; want %+v", got, err, []SID{a})
	}
	if err := m.SetSIDs([]SID{a, b}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Installed(); err != nil || !reflect.DeepEqual(got, []SID{a, b}) {
		t.Fatalf("installed through the programs' maps: %+v, %v; want %+v", got, err, []SID{a, b})
	}
	if err := m.Attach(1, false, ""); err == nil {
		t.Error("attach without programs succeeded")
	}
	if err := os.Remove(filepath.Join(dir, proxyProgMapProxyStats)); err != nil {
		t.Fatal(err)
	}
	if m, err := OpenPinnedMaps(dir); err != nil {
		t.Errorf("open a pin directory with a map missing: %v", err)
	} else {
		if got, err := m.Installed(); err != nil || !reflect.DeepEqual(got, []SID{a, b}) {
			t.Errorf("installed with a map missing: %+v, %v", got, err)
		}
		m.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, proxyProgMapProxyStats)); err == nil {
		t.Error("the missing map was pinned afresh")
	}
}
