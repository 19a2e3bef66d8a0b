package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
)

// TestLabEBPFEnd deploys the quickstart with r2's NF SID served by
// srchain's tc End program instead of a seg6local route, and proves the
// chain by traces exactly as for the kernel datapath; the program must be
// attached to every interface of r2 and survive the applier's process
// (pinned), and re-applying must change nothing.
func TestLabEBPFEnd(t *testing.T) {
	requireRoot(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart.yaml"))
	if err != nil {
		t.Fatalf("read quickstart example: %v", err)
	}
	src := strings.Replace(string(b), `{name: r2, role: router, locator: "fc00:2::/64"}`,
		`{name: r2, role: router, locator: "fc00:2::/64", datapath: ebpf}`, 1)
	if src == string(b) {
		t.Fatal("quickstart's r2 line changed; update this test")
	}
	s, err := spec.Check([]byte(src), "quickstart-ebpf.yaml")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	net.Name = labName("e")
	opts := up(t, net)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sts, err := lab.Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !st.OK() {
			t.Errorf("status %s: %v", st.Node, st.Problems)
		}
		if st.Node == "r2" {
			for _, ifn := range []string{"eth0", "eth1"} {
				if got := strings.Join(st.Programs[ifn], ","); !strings.Contains(got, "srchain_end") {
					t.Errorf("r2 %s programs = %q, want srchain_end", ifn, got)
				}
			}
		}
	}
	// The NF SID also has its seg6local route: the kernel's End is the
	// slow path for what the program hands over (issue 8).
	ns, err := lab.Open(net.Name, "r2", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if out, _ := ns.Run(ctx, "ip", "-6", "route"); !strings.Contains(out, "seg6local") {
		t.Errorf("r2 has no seg6local route for its eBPF SID (the slow path):\n%s", out)
	}
	for _, n := range net.Nodes {
		if n.Name != "r2" {
			continue
		}
		res, err := apply.ApplyWith(ctx, ns, n, apply.Options{})
		if err != nil || res.Changes != 0 {
			t.Errorf("re-apply r2: %d changes, %v", res.Changes, err)
		}
		// Status notices a SID the program's map lost.
		sid := n.SIDs[0].SID.Addr()
		for _, s := range n.SIDs {
			if s.NF != "" {
				sid = s.SID.Addr()
			}
		}
		end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: apply.PinDir(ns)})
		if err != nil {
			t.Fatal(err)
		}
		if err := end.DeleteSID(sid); err != nil {
			t.Fatal(err)
		}
		end.Close()
		missing, err := apply.CheckPrograms(ctx, ns, n)
		if err != nil || len(missing) != 1 || !strings.Contains(missing[0], sid.String()) {
			t.Errorf("check after deleting %s = %v, %v", sid, missing, err)
		}
		if _, err := apply.ApplyWith(ctx, ns, n, apply.Options{}); err != nil {
			t.Fatal(err)
		}
		if missing, err := apply.CheckPrograms(ctx, ns, n); err != nil || len(missing) != 0 {
			t.Errorf("check after re-apply = %v, %v", missing, err)
		}

		// The program leaves eth0 while its link pin stays (as after the
		// interface was recreated): status reports it, re-apply attaches
		// it again.
		l, err := ns.Netlink().LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		pl, err := link.LoadPinnedLink(filepath.Join(apply.PinDir(ns), fmt.Sprintf("tcx_ingress_%d", l.Attrs().Index)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.Detach(); err != nil {
			t.Fatal(err)
		}
		pl.Close()
		sts, err := lab.Status(ctx, net.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if st.Node == "r2" && (st.OK() || !strings.Contains(strings.Join(st.Problems, ";"), "srchain_end")) {
				t.Errorf("status of r2 with its End detached from eth0: %v", st.Problems)
			}
		}
		changes, err := lab.Reapply(ctx, net.Name, opts)
		if err != nil || changes["r2"] == 0 {
			t.Errorf("reapply = %v, %v; want r2 repaired", changes, err)
		}
		sts, _ = lab.Status(ctx, net.Name, opts)
		for _, st := range sts {
			if !st.OK() {
				t.Errorf("status %s after reapply: %v", st.Node, st.Problems)
			}
		}
	}

	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, p := range probes(s) {
		res, out := run(t, pr, p)
		t.Log(out)
		if !res.OK {
			t.Errorf("probe %s failed with the ebpf End:\n%s", p.Name, out)
		}
	}
	res, out := run(t, pr, lab.Probe{Name: "udp", From: "h1", To: netip.MustParseAddr("fc00:a4::2"), Proto: "udp", DPort: 9, Expect: "web6"})
	if !res.OK {
		t.Errorf("udp probe:\n%s", out)
	}

	// The End counted what it served: the v4, v6 and udp probes crossed
	// r2's NF SID (replies are not steered). Read through the library
	// and through the CLI, which must agree.
	var nfSID string
	for _, n := range net.Nodes {
		for _, sd := range n.SIDs {
			if n.Name == "r2" && sd.NF != "" {
				nfSID = sd.SID.Addr().String()
			}
		}
	}
	pcs, err := lab.Counters(ctx, net.Name, "r2", opts)
	if err != nil {
		t.Fatal(err)
	}
	packets := func(pcs []lab.ProgramCounters) uint64 {
		for _, pc := range pcs {
			if pc.Error != "" {
				t.Errorf("counters of %s %s: %s", pc.Node, pc.Program, pc.Error)
			}
			for _, c := range pc.Counters {
				if c.Name == "sid/"+nfSID+"/packets" {
					return c.Value
				}
			}
		}
		return 0
	}
	got := packets(pcs)
	if got < 3 {
		t.Errorf("r2 counted %d packets for %s, want >= 3 (three steered probes):\n%+v", got, nfSID, pcs)
	}
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	cli, err := exec.CommandContext(ctx, srchainBin, "lab", "--state-dir", opts.StateDir, "counters", net.Name, "r2", "--json").Output()
	if err != nil {
		t.Fatalf("srchain lab counters: %v", err)
	}
	var cpcs []lab.ProgramCounters
	if err := json.Unmarshal(cli, &cpcs); err != nil {
		t.Fatalf("lab counters --json: %v\n%s", err, cli)
	}
	if c := packets(cpcs); c != got {
		t.Errorf("CLI counted %d packets for %s, library %d", c, nfSID, got)
	}
	if _, err := lab.Counters(ctx, net.Name, "nope", opts); err == nil {
		t.Error("counters of an unknown node: no error")
	}
}
