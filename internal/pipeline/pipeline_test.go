package pipeline_test

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

type xdpCtx struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

const (
	xdpDrop = 1
	xdpPass = 2
)

var (
	sid   = netip.MustParseAddr("fc00:2::e")
	other = netip.MustParseAddr("fc00:9::1")
)

// stages loads a firewall (udp/9 dropped) and an End (SID sid) as stages
// of private pipeline maps, and the dispatcher.
func stages(t *testing.T) (*pipeline.Maps, *ebpf.Program, map[pipeline.Stage]*ebpf.Program) {
	t.Helper()
	testutil.RequireRoot(t)
	m, err := pipeline.OpenMaps("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	rules, err := firewall.Parse("-p udp --dport 9 -j DROP")
	if err != nil {
		t.Fatal(err)
	}
	fw, err := firewall.LoadCapacity(firewall.Config{Rules: rules}, firewall.Capacity{XDP: true, Pipeline: m.Replacements()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	end, err := datapath.LoadEnd(datapath.EndOptions{Pipeline: m.Replacements()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	if err := end.SetSID(sid, datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	disp, err := pipeline.LoadDispatcher(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disp.Close() })
	return m, disp, map[pipeline.Stage]*ebpf.Program{pipeline.Firewall: fw.XDPProgram(), pipeline.End: end.XDPProgram()}
}

// frame is an SRv6 packet to dst (SIDs dst, other) carrying UDP to dport.
func frame(t *testing.T, dst netip.Addr, dport uint16) []byte {
	t.Helper()
	inner := srv6.UDP6(netip.MustParseAddr("fc00:1::1"), netip.MustParseAddr("fc00:d1::1"), 1000, dport, []byte("x"))
	l3, err := srv6.Encap(netip.MustParseAddr("fc00:12::1"), []netip.Addr{dst, other}, inner)
	if err != nil {
		t.Fatal(err)
	}
	mac := []byte{2, 0, 0, 0, 0, 1}
	return srv6.Ether(mac, mac, srv6.EtherTypeIPv6, l3)
}

// run sends f through the dispatcher and returns the verdict and the
// per-stage counters it added.
func run(t *testing.T, m *pipeline.Maps, disp *ebpf.Program, f []byte) (uint32, map[string]uint64) {
	t.Helper()
	before, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(f)+64)
	ret, err := disp.Run(&ebpf.RunOptions{Data: f, DataOut: out, Context: xdpCtx{DataEnd: uint32(len(f)), IngressIfindex: 1}})
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	after, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	diff := map[string]uint64{}
	for k, v := range after {
		if v != before[k] {
			diff[k] = v - before[k]
		}
	}
	return ret, diff
}

func equal(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPipelineOrder: the dispatcher runs the firewall before the End; a
// packet the firewall drops never reaches the End, one it accepts does,
// and one that is nobody's goes to the stack after the last stage.
func TestPipelineOrder(t *testing.T) {
	m, disp, progs := stages(t)
	if err := m.Set(progs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		f     []byte
		want  uint32
		stats map[string]uint64
	}{
		{"udp/9 to the SID: the firewall drops it", frame(t, sid, 9), xdpDrop,
			map[string]uint64{"stage/firewall/drop": 1}},
		{"udp/80 to the SID: the firewall hands it to the End", frame(t, sid, 80), xdpPass,
			// The End sees it and hands it to tc: no interface MAC
			// was set (ServeXDP), so the frame is not for this host.
			map[string]uint64{"stage/firewall/next": 1, "stage/end/pass": 1}},
		{"udp/80 to another SID: every stage hands it on", frame(t, other, 80), xdpPass,
			map[string]uint64{"stage/firewall/next": 1, "stage/end/next": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stats := run(t, m, disp, tc.f)
			if got != tc.want || !equal(stats, tc.stats) {
				t.Errorf("verdict %d counters %v, want %d %v", got, stats, tc.want, tc.stats)
			}
		})
	}
}

// TestPipelineSet: Set switches the whole pipeline at once, and Active
// reports what runs; an empty pipeline hands everything to the stack.
func TestPipelineSet(t *testing.T) {
	m, disp, progs := stages(t)
	udp9 := frame(t, sid, 9)
	for _, tc := range []struct {
		name   string
		stages []pipeline.Stage
		want   uint32
		stats  map[string]uint64
	}{
		{"firewall and end", []pipeline.Stage{pipeline.Firewall, pipeline.End}, xdpDrop,
			map[string]uint64{"stage/firewall/drop": 1}},
		{"end alone", []pipeline.Stage{pipeline.End}, xdpPass,
			map[string]uint64{"stage/end/pass": 1}},
		{"firewall again", []pipeline.Stage{pipeline.Firewall, pipeline.End}, xdpDrop,
			map[string]uint64{"stage/firewall/drop": 1}},
		{"empty", nil, xdpPass,
			map[string]uint64{"stage/dispatch/pass": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := map[pipeline.Stage]*ebpf.Program{}
			for _, s := range tc.stages {
				want[s] = progs[s]
			}
			if err := m.Set(want); err != nil {
				t.Fatal(err)
			}
			active, err := m.Active()
			if err != nil {
				t.Fatal(err)
			}
			if len(active) != len(tc.stages) {
				t.Errorf("active %v, want stages %v", active, tc.stages)
			}
			for _, s := range tc.stages {
				id, _ := progs[s].Info()
				if pid, _ := id.ID(); active[s] != pid {
					t.Errorf("stage %s runs program %d, want %d", s, active[s], pid)
				}
			}
			got, stats := run(t, m, disp, udp9)
			if got != tc.want || !equal(stats, tc.stats) {
				t.Errorf("verdict %d counters %v, want %d %v", got, stats, tc.want, tc.stats)
			}
		})
	}
}

// TestStageAlone: a stage attached without the dispatcher (no pipeline
// metadata) finishes the packet itself: what it would hand on goes to
// the stack, never to another stage.
func TestStageAlone(t *testing.T) {
	m, _, progs := stages(t)
	if err := m.Set(progs); err != nil {
		t.Fatal(err)
	}
	f := frame(t, other, 80)
	out := make([]byte, len(f)+64)
	ret, err := progs[pipeline.Firewall].Run(&ebpf.RunOptions{Data: f, DataOut: out, Context: xdpCtx{DataEnd: uint32(len(f)), IngressIfindex: 1}})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ret != xdpPass || !equal(stats, map[string]uint64{"stage/firewall/next": 1}) {
		t.Errorf("verdict %d counters %v, want pass, firewall/next only", ret, stats)
	}
}
