package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/netns"
)

// The kernel's BPF run-time statistics (kernel.bpf_stats_enabled, here
// through BPF_ENABLE_STATS while a run with Options.BPFStats lasts): for
// every program, how often it ran and for how long, helpers and the
// programs it tail-calls included. A round's difference of the DUT's
// programs shows which of them takes the time: a diagnostic, not a
// performance figure (docs/benchmarks.md "Method"). Timing each run
// costs two clock reads, so rates measured with it on are lower than
// without.

// ProgCost is one DUT program's work in a round.
type ProgCost struct {
	Name string `json:"name"`
	Runs uint64 `json:"runs"`
	Ns   uint64 `json:"ns"`
}

// NsPerRun is the program's mean time per run.
func (c ProgCost) NsPerRun() float64 {
	if c.Runs == 0 {
		return 0
	}
	return float64(c.Ns) / float64(c.Runs)
}

// enableBPFStats turns the statistics on until the closer is closed.
func enableBPFStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable bpf stats: %w", err)
	}
	return c, nil
}

// progStat is one program's counters at a snapshot.
type progStat struct {
	name     string
	runs, ns uint64
}

// dutProgStats reads the counters of the programs attached to the
// interfaces of the DUT's namespace: tcx ingress and egress and XDP. A
// pipeline's stages run inside its dispatcher, whose time includes them.
func dutProgStats(ns *netns.NS) (map[ebpf.ProgramID]progStat, error) {
	links, err := ns.Netlink().LinkList()
	if err != nil {
		return nil, fmt.Errorf("read dut programs: %w", err)
	}
	var ids []ebpf.ProgramID
	err = ns.Do(func() error {
		for _, l := range links {
			a := l.Attrs()
			if a.Xdp != nil && a.Xdp.ProgId != 0 {
				ids = append(ids, ebpf.ProgramID(a.Xdp.ProgId))
			}
			for _, list := range []func(int) ([]bpfrt.TCXAttachment, error){bpfrt.TCXIngress, bpfrt.TCXEgress} {
				atts, err := list(a.Index)
				if err != nil {
					return err
				}
				for _, at := range atts {
					ids = append(ids, at.Program)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read dut programs: %w", err)
	}
	out := map[ebpf.ProgramID]progStat{}
	for _, id := range ids {
		if _, ok := out[id]; ok {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // detached meanwhile
		}
		info, err := p.Info()
		var ps *ebpf.ProgramStats
		if err == nil {
			ps, err = p.Stats()
		}
		p.Close()
		if err != nil {
			return nil, fmt.Errorf("read program %d: %w", id, err)
		}
		out[id] = progStat{name: info.Name, runs: ps.RunCount, ns: uint64(ps.Runtime.Nanoseconds())}
	}
	return out, nil
}

// progCosts is the work of the programs in both snapshots between them,
// by name (a program attached to two interfaces counts once), busiest
// first.
func progCosts(a, b map[ebpf.ProgramID]progStat) []ProgCost {
	by := map[string]*ProgCost{}
	for id, sb := range b {
		sa, ok := a[id]
		if !ok || sb.runs < sa.runs || sb.ns < sa.ns {
			continue
		}
		c := by[sb.name]
		if c == nil {
			c = &ProgCost{Name: sb.name}
			by[sb.name] = c
		}
		c.Runs += sb.runs - sa.runs
		c.Ns += sb.ns - sa.ns
	}
	var out []ProgCost
	for _, c := range by {
		if c.Runs > 0 {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(x, y ProgCost) int {
		return cmp.Or(cmp.Compare(y.Ns, x.Ns), cmp.Compare(x.Name, y.Name))
	})
	return out
}
