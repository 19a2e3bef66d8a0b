package bench

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/testutil"
)

// progCosts takes the difference of the programs in both snapshots,
// sums a program's instances by name, leaves out a program that started
// or was replaced in between (counters lower than before) or did not
// run, and sorts the busiest first.
func TestProgCosts(t *testing.T) {
	a := map[ebpf.ProgramID]progStat{
		1: {name: "srchain_end", runs: 100, ns: 10_000},
		2: {name: "srchain_end", runs: 5, ns: 500},
		3: {name: "srchain_opot_transit", runs: 100, ns: 7_000},
		4: {name: "idle", runs: 9, ns: 90},
		5: {name: "reloaded", runs: 50, ns: 900},
	}
	b := map[ebpf.ProgramID]progStat{
		1: {name: "srchain_end", runs: 1100, ns: 310_000},
		2: {name: "srchain_end", runs: 105, ns: 30_500},
		3: {name: "srchain_opot_transit", runs: 1100, ns: 79_000},
		4: {name: "idle", runs: 9, ns: 90},
		5: {name: "reloaded", runs: 10, ns: 100},
		6: {name: "new", runs: 10, ns: 100},
	}
	want := []ProgCost{
		{Name: "srchain_end", Runs: 1100, Ns: 330_000},
		{Name: "srchain_opot_transit", Runs: 1000, Ns: 72_000},
	}
	got := progCosts(a, b)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("progCosts = %+v, want %+v", got, want)
	}
	if got[0].NsPerRun() != 300 || (ProgCost{}).NsPerRun() != 0 {
		t.Errorf("NsPerRun: %v, %v", got[0].NsPerRun(), (ProgCost{}).NsPerRun())
	}
	r := Round{DUTTx: 1000, BPF: got}
	if n := r.BPFNsPerPacket(); n != 402 {
		t.Errorf("BPFNsPerPacket = %v, want 402", n)
	}
	if n := (Round{BPF: got}).BPFNsPerPacket(); n != 0 {
		t.Errorf("no packets: BPFNsPerPacket = %v, want 0", n)
	}
}

// dutProgStats finds the programs attached in the DUT's namespace and
// their counters move with the traffic: the transit stage and the End
// behind it each run once per frame sent.
func TestDUTProgStats(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := enableBPFStats()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := NewLine(ctx, fmt.Sprintf("sobs%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := &DUT{NS: l.DUT}
	defer d.close()
	if _, err := setupOPoTTransitWith(ctx, d, 3, true); err != nil {
		t.Fatal(err)
	}
	a, err := dutProgStats(l.DUT)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := sendLine(ctx, t, l, CaseOPoTStageEBPFEnd, 3000)
	b, err := dutProgStats(l.DUT)
	if err != nil {
		t.Fatal(err)
	}
	costs := progCosts(a, b)
	for _, name := range []string{"srchain_opot_transit", "srchain_end"} {
		i := slices.IndexFunc(costs, func(c ProgCost) bool { return c.Name == name })
		if i < 0 || costs[i].Runs < sent || costs[i].Ns == 0 {
			t.Errorf("%s: want >= %d runs taking time, got %+v", name, sent, costs)
		}
	}
}
