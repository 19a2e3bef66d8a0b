package lab

import (
	"net/netip"
	"os"
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
	segs := []netip.Addr{fw, ids, dx4}
	var out []trace.Event
	add := func(node string, dir trace.Direction, srh bool, da netip.Addr, sl uint8) {
		e := trace.Event{Node: node, Dir: dir, Time: t0.Add(time.Duration(len(out)) * time.Millisecond),
			HasSRH: srh, Encapsulated: srh, OuterDst: da, SL: sl, InnerDst: dst, Proto: srv6.ProtoTCP, DstPort: 80}
		if srh {
			e.Segments = segs
		}
		out = append(out, e)
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

// TestProbeLocalNFs: SIDs a node serves without a captured arrival under
// them (an NF on the ingress, consecutive NFs on one node, the same NF
// twice) count, as the lab captures them (segments left drops by more than
// one at a node); wrong expectations still fail.
func TestProbeLocalNFs(t *testing.T) {
	data, err := os.ReadFile("testdata/local-nfs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Check([]byte(strings.Replace(string(data), "name: NAME", "name: lnf", 1)), "local-nfs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	p := &Prober{net: net}
	ad := netip.MustParseAddr
	fa, fb, fc := ad("fc00:1::1:0"), ad("fc00:2::1:0"), ad("fc00:2::2:0")
	dx4, dt6 := ad("fc00:3::1:0"), ad("fc00:3::2:0")
	// path builds a probe's frames h1 -> r1 -> r2 -> r3 -> h2 with the SL
	// each router sends (-1: no SRH).
	path := func(dst netip.Addr, proto uint8, segs []netip.Addr, encap bool, sl1, sl2, sl3 int) []trace.Event {
		var out []trace.Event
		add := func(node string, dir trace.Direction, sl int) {
			e := trace.Event{Node: node, Dir: dir, Time: time.Unix(0, int64(len(out))), OuterDst: dst, InnerDst: dst,
				Proto: proto, ICMPType: 8, DstPort: 7}
			if proto == srv6.ProtoICMPv6 {
				e.ICMPType = 128
			}
			if sl >= 0 {
				e.HasSRH, e.SL, e.Segments, e.Encapsulated = true, uint8(sl), segs, encap
				e.OuterDst = segs[len(segs)-1-sl]
			}
			out = append(out, e)
		}
		add("h1", trace.Out, -1)
		add("r1", trace.In, -1)
		add("r1", trace.Out, sl1)
		add("r2", trace.In, sl1)
		add("r2", trace.Out, sl2)
		add("r3", trace.In, sl2)
		add("r3", trace.Out, sl3)
		add("h2", trace.In, sl3)
		return out
	}
	v4, v6 := ad("10.0.4.2"), ad("fc00:a4::2")
	for _, c := range []struct {
		pr     Probe
		events []trace.Event
		ok     bool
		sum    string
	}{
		{Probe{Name: "v4", To: v4, Proto: "icmp", Expect: "c1"},
			path(v4, srv6.ProtoICMP, []netip.Addr{fa, fb, dx4}, true, 1, 0, -1), true,
			"v4: h1 -> r1 [H.Encaps] [End fa] -> r2 SL=1 DA=fc00:2::1:0 [End fb] -> r3 SL=0 DA=fc00:3::1:0 [End.DX4] -> h2  OK (chain c1)"},
		{Probe{Name: "v6", To: v6, Proto: "icmp", Expect: "c2"},
			path(v6, srv6.ProtoICMPv6, []netip.Addr{fb, fc, dt6}, true, 2, 0, -1), true,
			"v6: h1 -> r1 [H.Encaps] -> r2 SL=2 DA=fc00:2::1:0 [End fb] [End fc] -> r3 SL=0 DA=fc00:3::2:0 [End.DT6] -> h2  OK (chain c2)"},
		{Probe{Name: "udp", To: v6, Proto: "udp", DPort: 7, Expect: "c3"},
			path(v6, srv6.ProtoUDP, []netip.Addr{fa, fc, fc, v6}, false, 2, 0, 0), true,
			"udp: h1 -> r1 [H.Insert] [End fa] -> r2 SL=2 DA=fc00:2::2:0 [End fc] [End fc] -> r3 SL=0 DA=fc00:a4::2 -> h2 SL=0 DA=fc00:a4::2  OK (chain c3)"},
		// Wrong expectations.
		{Probe{Name: "v6", To: v6, Proto: "icmp", Expect: "c3"},
			path(v6, srv6.ProtoICMPv6, []netip.Addr{fb, fc, dt6}, true, 2, 0, -1), false, "want NF SIDs"},
		{Probe{Name: "udp", To: v6, Proto: "udp", DPort: 7, Expect: "c2"},
			path(v6, srv6.ProtoUDP, []netip.Addr{fa, fc, fc, v6}, false, 2, 0, 0), false, "want NF SIDs"},
		{Probe{Name: "v4", To: v4, Proto: "icmp", Expect: ExpectNone},
			path(v4, srv6.ProtoICMP, []netip.Addr{fa, fb, dx4}, true, 1, 0, -1), false, "steered"},
		// fc served once where the chain needs it twice: r2 sends the
		// packet on with fc still active and r3, which does not own fc,
		// removes the SRH.
		{Probe{Name: "udp", To: v6, Proto: "udp", DPort: 7, Expect: "c3"},
			path(v6, srv6.ProtoUDP, []netip.Addr{fa, fc, fc, v6}, false, 2, 1, -1), false, "want NF SIDs"},
		// r2 owns fb and fc but decapsulates as soon as it receives the
		// packet with SL=2 (fb's SID set up as End.DX6): neither NF is
		// proven to have run, the verdict FAILs and says so.
		{Probe{Name: "v6", To: v6, Proto: "icmp", Expect: "c2"},
			path(v6, srv6.ProtoICMPv6, []netip.Addr{fb, fc, dt6}, true, 2, -1, -1), false,
			"r2 SL=2 DA=fc00:2::1:0 [End fb?] [End fc?] -> r3 -> h2  FAIL: served [], want NF SIDs [fc00:2::1:0 fc00:2::2:0] in order; not proven"},
		// The ingress sent the packet with fa still active: not served.
		{Probe{Name: "v4", To: v4, Proto: "icmp", Expect: "c1"},
			path(v4, srv6.ProtoICMP, []netip.Addr{fa, fb, dx4}, true, 2, 0, -1), false, "want NF SIDs"},
	} {
		m := trace.Match{Dst: c.pr.To}
		res := ProbeResult{Probe: c.pr, Hops: trace.Path(c.events, m)}
		p.judge(&res)
		sum := p.Summary(res)
		if res.OK != c.ok || !strings.Contains(sum, c.sum) {
			t.Errorf("%s expect %s: OK=%v, want %v; summary:\n%s\nwant it to contain\n%s", c.pr.Name, c.pr.Expect, res.OK, c.ok, sum, c.sum)
		}
	}
}
