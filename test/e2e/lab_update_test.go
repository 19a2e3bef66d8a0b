package e2e

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/lab"
)

// TestLabApplyFile: `lab apply FILE` used only the lab name from FILE and
// printed "0 changes" for an edited chain. Here FILE gains an NF that
// chain web6 now crosses and loses chain web4: r1's policy for web6 must
// carry the new SID, web4's policy must give way to the plain route and
// its End.DX4 SID on r3 must go, the nodes nothing changed for must see 0
// changes, the record must hold the new state (status OK, `lab apply
// NAME` changes nothing) and the probe must take the new path.
func TestLabApplyFile(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	file := renamedSpec(t, "quickstart.yaml", "u")
	name := labName("u")
	dir := t.TempDir()
	cleanupCLILab(t, name, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, srchainBin, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := cli("lab", "up", "--state-dir", dir, file); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := string(b)
	for _, r := range []struct{ old, new string }{
		{"  - {name: fw, kind: forward, node: r2}", "  - {name: fw, kind: forward, node: r2}\n  - {name: fw2, kind: forward, node: r2}"},
		{"    match: {dst: [\"fc00:a4::/64\"]}\n    nfs: [fw]", "    match: {dst: [\"fc00:a4::/64\"]}\n    nfs: [fw, fw2]"},
		{"  - name: web4                               # IPv4 in IPv6, decap End.DX4 at r3\n    ingress: r1\n    egress: r3\n    match: {dst: [\"10.0.4.0/24\"]}\n    nfs: [fw]\n", ""},
		{"  - {name: v4, from: h1, to: \"10.0.4.2\", proto: icmp, expect: web4}\n", ""},
	} {
		if !strings.Contains(edited, r.old) {
			t.Fatalf("quickstart.yaml no longer holds %q", r.old)
		}
		edited = strings.Replace(edited, r.old, r.new, 1)
	}
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := lab.Options{StateDir: dir}
	r3, err := lab.Open(name, "r3", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()

	out, err := cli("lab", "apply", "--state-dir", dir, file)
	if err != nil {
		t.Fatalf("lab apply FILE: %v\n%s", err, out)
	}
	for _, want := range []string{"h1: 0 changes", "h2: 0 changes"} {
		if !strings.Contains(out, want) {
			t.Errorf("lab apply FILE output lacks %q:\n%s", want, out)
		}
	}
	for _, node := range []string{"r1", "r2", "r3"} {
		if strings.Contains(out, node+": 0 changes") {
			t.Errorf("lab apply FILE did not change %s:\n%s", node, out)
		}
	}
	r1, err := lab.Open(name, "r1", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if got, _ := r1.Run(ctx, "ip", "-6", "route", "show", "fc00:a4::/64"); strings.Count(got, "fc00:2::") != 2 {
		t.Errorf("r1 web6 policy does not cross both NFs: %s", got)
	}
	if got, _ := r1.Run(ctx, "ip", "-4", "route", "show", "10.0.4.0/24"); strings.Contains(got, "seg6") || !strings.Contains(got, "via") {
		t.Errorf("r1 still steers 10.0.4.0/24 after web4 was removed: %s", got)
	}
	if got, _ := r3.Run(ctx, "ip", "-6", "route", "show", "table", "all"); strings.Contains(got, "End.DX4") {
		t.Errorf("r3 keeps web4's End.DX4 SID:\n%s", got)
	}
	// Removing web4 renumbers web6's egress SID (fc00:3::2:0 becomes
	// fc00:3::1:0): the old one must be gone.
	if got, _ := r3.Run(ctx, "ip", "-6", "route", "show", "fc00:3::2:0/112"); got != "" {
		t.Errorf("r3 keeps the old egress SID: %s", got)
	}
	if out, err := cli("lab", "status", "--state-dir", dir, name); err != nil {
		t.Errorf("lab status after apply FILE: %v\n%s", err, out)
	}
	if out, err := cli("lab", "apply", "--state-dir", dir, name); err != nil || strings.Count(out, " 0 changes") != 5 {
		t.Errorf("lab apply NAME after apply FILE: %v\n%s", err, out)
	}
	pr, err := lab.NewProber(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if res, trace := run(t, pr, lab.Probe{Name: "v6", From: "h1", To: netip.MustParseAddr("fc00:a4::2"), Proto: "icmp", Expect: "web6"}); !res.OK {
		t.Errorf("probe after apply FILE:\n%s", trace)
	}
}
