package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
)

// TestReadPinnedEndCounters: the read-only reader (what a Prometheus
// scrape uses) returns what the loaded End reports, and creates nothing
// when nothing is pinned.
func TestReadPinnedEndCounters(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("srct-c-%d", os.Getpid()), "end")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(dir)) })
	if _, err := ReadPinnedEndCounters(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read with nothing pinned: %v, want not exist", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reader created %s", dir)
	}

	e, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, sid := range []netip.Addr{sidEnd, sidEndX} {
		if err := e.SetSID(sid, BehaviorEnd, 0, netip.Addr{}); err != nil {
			t.Fatal(err)
		}
	}
	// Counts as the program would leave them, on CPU 0.
	ncpu := ebpf.MustPossibleCPU()
	pc := make([]bpfrt.PacketCount, ncpu)
	pc[0] = bpfrt.PacketCount{Packets: 7, Bytes: 700}
	if err := e.objs.SidCounters.Update(e.slots[sidEndX], pc, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	u := make([]uint64, ncpu)
	u[0] = 3
	if err := e.objs.DropCounters.Update(uint32(drop.Max-1), u, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if err := e.objs.FibCounters.Update(uint32(0), u, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}

	got, err := ReadPinnedEndCounters(dir)
	if err != nil {
		t.Fatal(err)
	}
	sids, _ := e.SIDCounts()
	drops, _ := e.DropCounts()
	fib, _ := e.FIBCounts()
	if !reflect.DeepEqual(got.SIDs, sids) || got.Drops != drops || !reflect.DeepEqual(got.FIB, fib) {
		t.Errorf("read-only counters %+v\nloaded End reports sids %v drops %v fib %v", got, sids, drops, fib)
	}
	if got.SIDs[sidEndX].Packets != 7 || got.Drops[drop.Max-1] != 3 || got.FIB["success"] != 3 {
		t.Errorf("read-only counters %+v: want 7 packets on %s, 3 drops, 3 fib successes", got, sidEndX)
	}
}
