package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/state"
)

// TestLabCountersKernelSIDs: on the kernel datapath (quickstart's
// default) every seg6local SID counts (`count`, Linux >= 5.14), and
// `srchain lab counters` shows it: N probes per chain move the packet
// counter of r2's NF SID by at least 2N (both chains cross it) and those
// of r3's decapsulating SIDs (End.DX4 for web4, End.DT6 for web6) by at
// least N each, with no errors; the library and the CLI agree; a
// re-apply of every node still changes nothing (the library reads the
// routes back without their counters); and a SID route an older srchain
// installed without `count` is replaced once.
func TestLabCountersKernelSIDs(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	_, net := example(t, "quickstart.yaml", "kc")
	opts := up(t, net)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The SIDs to watch, by node: r2's NF SID, r3's decapsulations.
	watch := map[string]map[string]uint64{} // node -> counter name -> probes it must see
	for _, n := range net.Nodes {
		for _, s := range n.SIDs {
			name := "sid/" + s.SID.Addr().String() + "/packets"
			switch {
			case n.Name == "r2" && s.NF == "fw":
				watch[n.Name] = map[string]uint64{name: 0}
			case n.Name == "r3" && (s.Behavior == state.EndDX4 || s.Behavior == state.EndDT6):
				if watch[n.Name] == nil {
					watch[n.Name] = map[string]uint64{}
				}
				watch[n.Name][name] = 0
			}
		}
	}
	if len(watch["r2"]) != 1 || len(watch["r3"]) != 2 {
		t.Fatalf("quickstart's SIDs changed (r2 NF SID, r3 End.DX4 and End.DT6 wanted): %v", watch)
	}
	// kernel reads node's kernel SID counters through `srchain lab
	// counters --json` and requires the library to say the same.
	kernel := func(node string) map[string]uint64 {
		t.Helper()
		cli, err := exec.CommandContext(ctx, srchainBin, "lab", "--state-dir", opts.StateDir, "counters", net.Name, node, "--json").Output()
		if err != nil {
			t.Fatalf("srchain lab counters %s: %v", node, err)
		}
		var pcs []lab.ProgramCounters
		if err := json.Unmarshal(cli, &pcs); err != nil {
			t.Fatalf("lab counters --json: %v\n%s", err, cli)
		}
		lib, err := lab.Counters(ctx, net.Name, node, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, pc := range pcs {
			if pc.Error != "" {
				t.Errorf("counters of %s %s: %s", pc.Node, pc.Program, pc.Error)
			}
			if pc.Program != lab.KernelSIDs {
				continue
			}
			for _, c := range pc.Counters {
				got[c.Name] = c.Value
			}
		}
		for _, pc := range lib {
			if pc.Program != lab.KernelSIDs {
				continue
			}
			for _, c := range pc.Counters {
				// Probes are over: packet counters stand still; the
				// library read second, so it may only have more.
				if v, ok := got[c.Name]; !ok || c.Value < v {
					t.Errorf("%s %s: library %d, CLI %d (%v)", node, c.Name, c.Value, v, ok)
				}
			}
		}
		return got
	}
	before := map[string]map[string]uint64{}
	for node, names := range watch {
		before[node] = kernel(node)
		for name := range names {
			if _, ok := before[node][name]; !ok {
				t.Fatalf("lab counters shows no %s on %s: %v", name, node, before[node])
			}
		}
	}

	const n = 5
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for i := 0; i < n; i++ {
		for _, p := range []lab.Probe{
			{Name: "v4", From: "h1", To: netip.MustParseAddr("10.0.4.2"), Proto: "icmp", Expect: "web4"},
			{Name: "v6", From: "h1", To: netip.MustParseAddr("fc00:a4::2"), Proto: "icmp", Expect: "web6"},
		} {
			if res, out := run(t, pr, p); !res.OK {
				t.Fatalf("probe %s:\n%s", p.Name, out)
			}
		}
	}
	for node, names := range watch {
		after := kernel(node)
		for name := range names {
			want := uint64(n)
			if node == "r2" {
				want = 2 * n // web4 and web6 both cross fw
			}
			if d := after[name] - before[node][name]; d < want {
				t.Errorf("%s %s moved by %d after %d probes per chain, want >= %d", node, name, d, n, want)
			}
			errs := strings.TrimSuffix(name, "packets") + "errors"
			if after[errs] != before[node][errs] {
				t.Errorf("%s %s moved from %d to %d", node, errs, before[node][errs], after[errs])
			}
		}
	}
	// The table names the kernel's SIDs as the eBPF End names its own.
	out, err := exec.CommandContext(ctx, srchainBin, "lab", "--state-dir", opts.StateDir, "counters", net.Name, "r3").Output()
	if err != nil {
		t.Fatalf("srchain lab counters r3: %v", err)
	}
	t.Logf("srchain lab counters r3:\n%s", out)
	for name := range watch["r3"] {
		if !strings.Contains(string(out), lab.KernelSIDs) || !strings.Contains(string(out), name) {
			t.Errorf("lab counters r3 does not show %s %s:\n%s", lab.KernelSIDs, name, out)
		}
	}

	for _, node := range net.Nodes {
		ns, err := lab.Open(net.Name, node.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := apply.ApplyWith(ctx, ns, node, apply.Options{})
		ns.Close()
		if err != nil || res.Changes != 0 {
			t.Errorf("re-apply %s: %d changes, %v; want 0, nil", node.Name, res.Changes, err)
		}
	}

	// Upgrade: r3's End.DT6 route as an srchain before counters (and
	// before RTProto) wrote it. The next apply replaces it once, with
	// `count`; the one after changes nothing.
	for _, node := range net.Nodes {
		if node.Name != "r3" {
			continue
		}
		ns, err := lab.Open(net.Name, node.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		for _, s := range node.SIDs {
			if s.Behavior != state.EndDT6 {
				continue
			}
			if _, err := ns.Run(ctx, "ip", "-6", "route", "replace", s.SID.String(), "encap", "seg6local", "action", "End.DT6",
				"table", "254", "dev", node.Interfaces[0].Name); err != nil {
				t.Fatal(err)
			}
			for i, want := range []int{1, 0} {
				res, err := apply.ApplyWith(ctx, ns, node, apply.Options{})
				if err != nil || res.Changes != want {
					t.Errorf("apply %d of r3 after an old End.DT6 route: %d changes, %v; want %d", i+1, res.Changes, err, want)
				}
			}
			if out, err := ns.Run(ctx, "ip", "-s", "-6", "route", "show", s.SID.String()); err != nil || !strings.Contains(out, "packets 0 bytes 0 errors 0") || !strings.Contains(out, "proto 83") {
				t.Errorf("r3's End.DT6 route after the upgrade = %q, %v; want counters from zero, proto 83", out, err)
			}
		}
	}
}
