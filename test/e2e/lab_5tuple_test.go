package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/trace"
)

// TestLab5Tuple narrows the quickstart's chains to 5-tuple classifiers
// (policy rules with ipproto/dport pointing at the chain's table): only
// the matching flows are steered; other protocols and ports to the same
// destination cross the same routers without an SRH.
func TestLab5Tuple(t *testing.T) {
	requireRoot(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart.yaml"))
	if err != nil {
		t.Fatalf("read quickstart example: %v", err)
	}
	src := string(b)
	for _, r := range [][2]string{
		{`match: {dst: ["10.0.4.0/24"]}`, `match: {dst: ["10.0.4.0/24"], proto: udp, dport: "5000-5001"}`},
		{`match: {dst: ["fc00:a4::/64"]}`, `match: {dst: ["fc00:a4::/64"], proto: tcp, dport: 80}`},
	} {
		if !strings.Contains(src, r[0]) {
			t.Fatalf("quickstart has no %s; update this test", r[0])
		}
		src = strings.Replace(src, r[0], r[1], 1)
	}
	// The example's own probes assume prefix classifiers.
	src = src[:strings.Index(src, "traffic:")]
	s, err := spec.Check([]byte(src), "quickstart-5tuple.yaml")
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	net.Name = labName("t")
	opts := up(t, net)
	pr, err := lab.NewProber(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	v4, v6 := netip.MustParseAddr("10.0.4.2"), netip.MustParseAddr("fc00:a4::2")
	for _, c := range []struct {
		p       lab.Probe
		steered bool
	}{
		{lab.Probe{Name: "udp4-5001", To: v4, Proto: "udp", DPort: 5001, Expect: "web4"}, true},
		{lab.Probe{Name: "udp4-5000", To: v4, Proto: "udp", DPort: 5000, Expect: "web4"}, true},
		{lab.Probe{Name: "udp4-5002", To: v4, Proto: "udp", DPort: 5002, Expect: lab.ExpectNone}, false},
		{lab.Probe{Name: "icmp4", To: v4, Proto: "icmp", Expect: lab.ExpectNone}, false},
		{lab.Probe{Name: "tcp6-80", To: v6, Proto: "tcp", DPort: 80, Expect: "web6"}, true},
		{lab.Probe{Name: "tcp6-81", To: v6, Proto: "tcp", DPort: 81, Expect: lab.ExpectNone}, false},
		{lab.Probe{Name: "udp6-80", To: v6, Proto: "udp", DPort: 80, Expect: lab.ExpectNone}, false},
	} {
		c.p.From = "h1"
		res, out := run(t, pr, c.p)
		if !res.OK || trace.AnySRH(res.Hops) != c.steered {
			t.Errorf("probe %s (steered=%v):\n%s", c.p.Name, c.steered, out)
		}
	}
}
