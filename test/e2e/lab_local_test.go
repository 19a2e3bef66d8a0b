package e2e

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
)

// localNFSpec is the spec shared with internal/lab's probe test.
const localNFSpec = "../../internal/lab/testdata/local-nfs.yaml"

// TestLabLocalNFs deploys chains whose NFs run where no capture sees the
// packet under their SID (an NF on the ingress, consecutive NFs on one node,
// one NF twice in a row): the probes pass, the path line names every SID
// each node served, and wrong expectations still fail.
func TestLabLocalNFs(t *testing.T) {
	requireRoot(t)
	name := labName("f")
	data, err := os.ReadFile(localNFSpec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Check([]byte(strings.Replace(string(data), "name: NAME", "name: "+name, 1)), localNFSpec)
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	opts := up(t, net)
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := map[string]string{
		"v4":    "v4: h1 -> r1 [H.Encaps] [End fa] -> r2 SL=1 DA=fc00:2::1:0 [End fb] -> r3 SL=0 DA=fc00:3::1:0 [End.DX4] -> h2  OK (chain c1)",
		"v6":    "v6: h1 -> r1 [H.Encaps] -> r2 SL=2 DA=fc00:2::1:0 [End fb] [End fc] -> r3 SL=0 DA=fc00:3::2:0 [End.DT6] -> h2  OK (chain c2)",
		"udp":   "udp: h1 -> r1 [H.Insert] [End fa] -> r2 SL=2 DA=fc00:2::2:0 [End fc] [End fc] -> r3 SL=0 DA=fc00:a4::2 -> h2 SL=0 DA=fc00:a4::2  OK (chain c3)",
		"plain": "plain: h1 -> r1 -> r2 -> r3  OK (not steered)",
	}
	for _, p := range probes(s) {
		res, out := run(t, pr, p)
		if !res.OK || !strings.HasPrefix(out, want[p.Name]+"\n") {
			t.Errorf("probe %s: want\n%s\ngot\n%s", p.Name, want[p.Name], out)
		}
	}

	// Wrong expectations fail: another chain's NFs, or none at all.
	v4, v6 := netip.MustParseAddr("10.0.4.2"), netip.MustParseAddr("fc00:a4::2")
	for _, p := range []lab.Probe{
		{Name: "v4-none", From: "h1", To: v4, Proto: "icmp", Expect: lab.ExpectNone},
		{Name: "v6-c3", From: "h1", To: v6, Proto: "icmp", Expect: "c3"},
		{Name: "v6-c1", From: "h1", To: v6, Proto: "icmp", Expect: "c1"},
		{Name: "udp-c2", From: "h1", To: v6, Proto: "udp", DPort: 7, Expect: "c2"},
		{Name: "plain-c2", From: "h1", To: netip.MustParseAddr("fc00:a3::2"), Proto: "icmp", Expect: "c2"},
	} {
		res, out := run(t, pr, p)
		if res.OK || !strings.Contains(out, "FAIL") {
			t.Errorf("probe %s with a wrong expectation passed:\n%s", p.Name, out)
		}
	}
}
