package lab

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/trace"
)

// featuresPath is what the compile features spec's `web` probe (chain web:
// fw on r2, ids on r3, End.DX4 on r4) looks like in the traces: r2's End.X
// sends the packet to r4, which forwards it to r3 (ids' SID is active) and
// decapsulates it when it comes back. skip leaves out the frames of r3.
func featuresPath(skipIDS bool) []trace.Event {
	t0 := time.Unix(0, 0)
	ad := netip.MustParseAddr
	dst := ad("10.0.6.2")
	fw, ids, dx4 := ad("fc00:2::1:0"), ad("fc00:3::1:0"), ad("fc00:4::1:0")
	var out []trace.Event
	add := func(node string, dir trace.Direction, srh bool, da netip.Addr, sl uint8) {
		out = append(out, trace.Event{Node: node, Dir: dir, Time: t0.Add(time.Duration(len(out)) * time.Millisecond),
			HasSRH: srh, Encapsulated: srh, OuterDst: da, SL: sl, InnerDst: dst, Proto: srv6.ProtoTCP, DstPort: 80})
	}
	add("h1", trace.Out, false, dst, 0)
	add("r1", trace.In, false, dst, 0)
	add("r1", trace.Out, true, fw, 2)
	add("r2", trace.In, true, fw, 2)
	add("r2", trace.Out, true, ids, 1)
	add("r4", trace.In, true, ids, 1)
	if skipIDS {
		// A broken r4 that decapsulates with ids' SID active.
		add("r4", trace.Out, false, dst, 0)
	} else {
		add("r4", trace.Out, true, ids, 1)
		add("r3", trace.In, true, ids, 1)
		add("r3", trace.Out, true, dx4, 0)
		add("r4", trace.In, true, dx4, 0)
		add("r4", trace.Out, false, dst, 0)
	}
	add("h2", trace.In, false, dst, 0)
	return out
}

// TestProbeFeaturesWeb: the node that decapsulates is on the path line,
// and an NF SID only counts as crossed at the node that owns it.
func TestProbeFeaturesWeb(t *testing.T) {
	s, err := spec.Load("../compile/testdata/features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	p := &Prober{net: net}
	pr := Probe{Name: "web", From: "h1", To: netip.MustParseAddr("10.0.6.2"), Proto: "tcp", DPort: 80, Expect: "web"}
	m := trace.Match{Dst: pr.To, Proto: srv6.ProtoTCP, DstPort: 80}

	res := ProbeResult{Probe: pr, Hops: trace.Path(featuresPath(false), m)}
	p.judge(&res)
	sum := p.Summary(res)
	if !res.OK {
		t.Errorf("web probe failed: %s", sum)
	}
	for _, want := range []string{"r2 SL=2 DA=fc00:2::1:0 [End.X fw]", "r4 SL=1 DA=fc00:3::1:0 -> r3 SL=1 DA=fc00:3::1:0 [End ids]",
		"r3 SL=1 DA=fc00:3::1:0 [End ids] -> r4 SL=0 DA=fc00:4::1:0 [End.DX4] -> h2"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}

	res = ProbeResult{Probe: pr, Hops: trace.Path(featuresPath(true), m)}
	p.judge(&res)
	if res.OK || !strings.Contains(res.Why, "want NF SIDs") {
		t.Errorf("probe that never reached r3 judged OK=%v (%s):\n%s", res.OK, res.Why, p.Summary(res))
	}
}
