package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/flowsetup"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/trace"
)

// TestLabFlowSetup deploys examples/flow-pool.yaml (chain web6's firewall
// is a pool of fw1, fw2, fw3 on r2 and r3, r1 runs the eBPF ingress) with
// the node's flow-setup loop running, and proves per-flow setup from the
// captures: every probe passes (its first packet was reported, set up and
// sent on by the loop); 30 new UDP flows of 4 packets each all arrive, the
// packets of each flow cross exactly one instance, least-loaded puts 10
// flows on each instance, and every flow was set up once.
func TestLabFlowSetup(t *testing.T) {
	requireRoot(t)
	s, nw := example(t, "flow-pool.yaml", "fp")
	opts := up(t, nw)
	nss := map[string]*netns.NS{}
	for _, n := range nw.Nodes {
		ns, err := lab.Open(nw.Name, n.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		nss[n.Name] = ns
	}
	r1 := nodeState(t, nw, "r1")
	var cfg state.IngressConfig
	for _, p := range r1.Programs {
		if p.Kind == state.ProgramIngress {
			if err := json.Unmarshal(p.Config, &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var setups []flowsetup.Setup
	loop, err := flowsetup.Open(flowsetup.Options{NS: nss["r1"], Config: cfg, TunSrc: r1.TunSrc, Observe: func(s flowsetup.Setup) {
		mu.Lock()
		setups = append(setups, s)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("flow setup loop: %v", err)
		}
	}()

	pr, err := lab.NewProber(nw.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range probes(s) {
		if res, tr := run(t, pr, p); !res.OK {
			t.Fatalf("probe %s: %s\n%s", p.Name, res.Why, tr)
		}
	}
	mu.Lock()
	probeSetups := len(setups)
	mu.Unlock()
	if probeSetups < len(s.Traffic) {
		t.Errorf("%d flow setups for %d probes", probeSetups, len(s.Traffic))
	}

	// 30 new flows (destination ports 6000..6029), 4 packets each.
	capture, err := trace.Start(nss)
	if err != nil {
		t.Fatal(err)
	}
	defer capture.Stop()
	dst := netip.MustParseAddr("fc00:a6::2")
	const flows, per = 30, 4
	err = nss["h1"].Do(func() error {
		// Unconnected: h2's port unreachable errors must not fail a
		// later send.
		c, err := net.ListenUDP("udp6", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for f := range flows {
			for range per {
				if _, err := c.WriteToUDP([]byte("flow"), &net.UDPAddr{IP: dst.AsSlice(), Port: 6000 + f}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	arrived := func() map[uint16]int {
		out := map[uint16]int{}
		for _, e := range capture.Events() {
			if e.Node == "h2" && e.Dir == trace.In && e.InnerDst == dst && e.DstPort >= 6000 && e.DstPort < 6000+flows {
				out[e.DstPort]++
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for total(arrived()) < flows*per && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	capture.Flush(2 * time.Second)
	got := arrived()
	for f := range flows {
		if got[uint16(6000+f)] != per {
			t.Errorf("flow %d: %d of %d packets arrived", f, got[uint16(6000+f)], per)
		}
	}
	// Which instance each flow's packets crossed: their outer
	// destination on arrival at r2 or r3.
	sidNF := map[netip.Addr]string{}
	for _, n := range nw.Nodes {
		for _, sid := range n.SIDs {
			if sid.NF != "" {
				sidNF[sid.SID.Addr()] = sid.NF
			}
		}
	}
	inst := map[uint16]map[string]int{}
	for _, e := range capture.Events() {
		if (e.Node != "r2" && e.Node != "r3") || e.Dir != trace.In || e.DstPort < 6000 || e.DstPort >= 6000+flows {
			continue
		}
		nf, ok := sidNF[e.OuterDst]
		if !ok {
			continue
		}
		if inst[e.DstPort] == nil {
			inst[e.DstPort] = map[string]int{}
		}
		inst[e.DstPort][nf]++
	}
	perNF := map[string]int{}
	for f := range flows {
		m := inst[uint16(6000+f)]
		if len(m) != 1 {
			t.Errorf("flow %d crossed instances %v, want exactly one", f, m)
			continue
		}
		for nf, n := range m {
			perNF[nf]++
			if n != per {
				t.Errorf("flow %d: %d packets seen at %s, want %d", f, n, nf, per)
			}
		}
	}
	for _, nf := range []string{"fw1", "fw2", "fw3"} {
		if perNF[nf] != flows/3 {
			t.Errorf("least-loaded put %d flows on %s, want %d (all: %v)", perNF[nf], nf, flows/3, perNF)
		}
	}
	// Every report is the ingress's flow-setup outcome (lab counters).
	pcs, err := lab.Counters(context.Background(), nw.Name, "r1", opts)
	if err != nil {
		t.Fatal(err)
	}
	var reported uint64
	for _, pc := range pcs {
		for _, c := range pc.Counters {
			if pc.Program == state.ProgramIngress && c.Name == "outcome/flow-setup" {
				reported = c.Value
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if reported != uint64(len(setups)) {
		t.Errorf("ingress outcome flow-setup %d, loop handled %d reports", reported, len(setups))
	}
	newFlows := 0
	for _, st := range setups[probeSetups:] {
		if !st.Sent {
			t.Errorf("a reported packet of chain %s was not sent on", st.Chain)
		}
		if st.New {
			newFlows++
		}
	}
	if newFlows != flows {
		t.Errorf("%d flows set up, want %d", newFlows, flows)
	}
	t.Logf("%d reports for %d flows of %d packets", len(setups)-probeSetups, flows, per)
}

func total(m map[uint16]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func nodeState(t *testing.T, net *state.Network, name string) state.Node {
	t.Helper()
	for _, n := range net.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return state.Node{}
}

// TestLabFlowsCLI: a lab of a spec with an NF pool sets flows up with
// nothing else running, both ways a lab is applied: `srchain lab up`
// starts the lab's flow-setup process (`lab flows`, stopped by `lab
// down`), and under `lab up --agents` the ingress's agent runs the loop.
// The probes through the pool pass.
func TestLabFlowsCLI(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	for _, mode := range []struct{ tag, flag string }{{"z", ""}, {"v", "--agents"}} {
		t.Run("mode"+mode.flag, func(t *testing.T) {
			file := renamedSpec(t, "flow-pool.yaml", mode.tag)
			name := labName(mode.tag)
			dir := t.TempDir()
			cleanupCLILab(t, name, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			args := []string{"lab", "up", "--state-dir", dir, file}
			if mode.flag != "" {
				args = append(args, mode.flag)
			}
			out, err := exec.CommandContext(ctx, srchainBin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("lab up %s: %v\n%s", mode.flag, err, out)
			}
			rec, err := lab.Load(name, lab.Options{StateDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			flowsProc := 0
			if mode.flag == "" {
				if !strings.Contains(string(out), "per-flow setup: srchain lab flows "+name) || len(rec.Procs) != 1 {
					t.Fatalf("lab up: flows process not started (procs %v)\n%s", rec.Procs, out)
				}
				flowsProc = rec.Procs[0].PID
			}
			s, _ := example(t, "flow-pool.yaml", mode.tag)
			pr, err := lab.NewProber(name, lab.Options{StateDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range probes(s) {
				if res, tr := run(t, pr, p); !res.OK {
					t.Errorf("probe %s: %s\n%s", p.Name, res.Why, tr)
				}
			}
			pr.Close()
			if out, err := exec.CommandContext(ctx, srchainBin, "lab", "down", "--state-dir", dir, name).CombinedOutput(); err != nil {
				t.Fatalf("lab down: %v\n%s", err, out)
			}
			if flowsProc != 0 && running(flowsProc) {
				t.Errorf("lab flows process %d still runs after lab down", flowsProc)
			}
		})
	}
}
