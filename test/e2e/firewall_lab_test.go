package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/firewall"
	fwkind "github.com/srchain/srchain/internal/kinds/firewall"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/spec"
)

// TestFirewallLab deploys examples/sera-firewall.yaml and proves by the
// traces of every node: allowed flows arrive through the IDS, denied ones
// arrive nowhere, skip-next flows bypass the IDS (it sees nothing), the
// ARGS of the firewall SID chosen at the ingress change the action with
// the firewall's rules untouched, and the mode switches at run time. It
// runs twice: with the firewall and the Ends at tc, and with `datapath:
// xdp` on nfv and ids, where nfv's XDP pipeline runs the firewall in
// front of its End (issue 13): the same packets must be dropped, skipped
// and answered.
func TestFirewallLab(t *testing.T) {
	fwNeedRoot(t)
	t.Run("tc", func(t *testing.T) { firewallLab(t, "") })
	t.Run("xdp", func(t *testing.T) { firewallLab(t, spec.DatapathXDP) })
}

func firewallLab(t *testing.T, dp string) {
	var lb *exampleLab
	if dp == spec.DatapathXDP {
		lb = deployExample(t, "sera-firewall.yaml", dp, "nfv", "ids")
		checkSERAPipeline(t, lb)
	} else {
		lb = deployExample(t, "sera-firewall.yaml", dp)
	}
	s, net, opts, pr := lb.s, lb.net, lb.opts, lb.pr
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	d1, d2 := s.Traffic[0].To, s.Traffic[1].To
	probe := func(name string, to string, dport int) lab.ProbeResult {
		t.Helper()
		p := lab.Probe{Name: name, From: "ingress", Proto: "udp", DPort: dport, Expect: "d1"}
		if to == "d1" {
			p.To = d1
		} else {
			p.To, p.Expect = d2, "d2"
		}
		res, err := pr.Run(ctx, p)
		if err != nil {
			t.Fatalf("probe %s: %v", name, err)
		}
		return res
	}
	seen := func(res lab.ProbeResult, node string) bool {
		for _, h := range res.Hops {
			if h.Node == node && h.Arrive != nil {
				return true
			}
		}
		return false
	}
	path := func(res lab.ProbeResult) string {
		var b strings.Builder
		pr.Print(&b, res, false)
		return b.String()
	}
	expect := func(res lab.ProbeResult, delivered, viaIDS bool) {
		t.Helper()
		if res.Delivered != delivered || seen(res, "ids") != viaIDS {
			t.Errorf("%s: delivered=%v via ids=%v, want %v %v\n%s", res.Probe.Name, res.Delivered, seen(res, "ids"), delivered, viaIDS, path(res))
		}
	}

	for _, dst := range []string{"d1", "d2"} {
		// Allowed (policy accept): firewall SID End, then the IDS.
		expect(probe("allowed-"+dst, dst, 5000), true, true)
		// Denied: udp/9 is dropped at the firewall.
		res := probe("denied-"+dst, dst, 9)
		expect(res, false, false)
		if seen(res, "egress") {
			t.Errorf("denied-%s reached the egress", dst)
		}
		// skip-next: trusted traffic bypasses the IDS.
		expect(probe("skip-"+dst, dst, 7001), true, false)
		// eval-args with ARGS 0 (go-next): through the IDS.
		expect(probe("args0-"+dst, dst, 7002), true, true)
	}

	// The edge changes the ARGS of the firewall SID for one destination;
	// the firewall's rules stay as they are.
	ing, err := lab.Open(net.Name, "ingress", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ing.Close()
	setArgs := func(args int) {
		t.Helper()
		segs := fmt.Sprintf("fc00:2::f1:%x,fc00:4::1d5,fc00:3::d6", args)
		if out, err := ing.Run(ctx, "ip", "-6", "route", "replace", d1.String()+"/128", "encap", "seg6", "mode", "encap", "segs", segs, "dev", "eth12"); err != nil {
			t.Fatalf("set args %d: %v %s", args, err, out)
		}
	}
	setArgs(1) // skip-next
	expect(probe("args1-skip", "d1", 7002), true, false)
	setArgs(3) // drop
	expect(probe("args3-drop", "d1", 7002), false, false)
	setArgs(4) // accept: the SID's End, then the IDS
	expect(probe("args4-accept", "d1", 7002), true, true)
	// Unknown ARGS: dropped, and the ingress gets an ICMPv6 Parameter
	// Problem from the SID pointing at it (segment[2] of the SRH: offset
	// 40 + 8 + 2*16).
	var icmpFD int
	if err := ing.Do(func() error {
		var err error
		if icmpFD, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6); err != nil {
			return err
		}
		return unix.SetsockoptTimeval(icmpFD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(icmpFD)
	setArgs(9)
	expect(probe("args9-unknown", "d1", 7002), false, false)
	gotPP := false
	buf := make([]byte, 2048)
	for i := 0; i < 20 && !gotPP; i++ {
		n, from, err := unix.Recvfrom(icmpFD, buf, 0)
		if err != nil {
			break
		}
		sa, _ := from.(*unix.SockaddrInet6)
		if n >= 8 && buf[0] == 4 && buf[1] == 0 && sa != nil && netip.AddrFrom16(sa.Addr) == netip.MustParseAddr("fc00:2::f1:9") {
			if ptr := binary.BigEndian.Uint32(buf[4:]); ptr != 80 {
				t.Errorf("parameter problem pointer %d, want 80", ptr)
			}
			gotPP = true
		}
	}
	if !gotPP {
		t.Error("no ICMPv6 parameter problem from fc00:2::f1:9 at the ingress")
	}
	setArgs(0)

	// Counters and the run-time mode switch, through the pins the CLI uses.
	nfvNS, err := lab.Open(net.Name, "nfv", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer nfvNS.Close()
	pinned, err := firewall.OpenPinned(fwkind.PinDir(nfvNS, "sera"))
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	rc, err := pinned.RuleCounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := pinned.DropCounts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rule counters %+v, drops %v", rc, dc.NonZero())
	if len(rc) != 4 || rc[0].Packets < 2 || rc[1].Packets < 2 || rc[2].Packets < 6 {
		t.Errorf("rule counters %+v", rc)
	}
	if dc.NonZero()["fw-args-unknown"] < 1 || dc.NonZero()["fw-rule"] < 3 {
		t.Errorf("drop counters %v", dc.NonZero())
	}
	// Advanced mode: -p/--dport see the outer packet, which for the encap
	// chain is IPv6-in-IPv6, so the udp/9 rule no longer applies to d1.
	if err := pinned.SetMode(firewall.Advanced); err != nil {
		t.Fatal(err)
	}
	expect(probe("advanced-d1-9", "d1", 9), true, true)
	// Insert mode keeps UDP right behind the SRH: still dropped.
	expect(probe("advanced-d2-9", "d2", 9), false, false)
	if err := pinned.SetMode(firewall.Basic); err != nil {
		t.Fatal(err)
	}
	expect(probe("basic-again-d1-9", "d1", 9), false, false)
	if dp == spec.DatapathXDP {
		// The firewall really ran at XDP: its stage decided (dropped or
		// handed on) packets, and nfv's End redirected at XDP.
		st := lb.pipelineCounters(t, "nfv")
		if st["stage/firewall/drop"] == 0 || st["stage/firewall/next"] == 0 || st["stage/end/redirect"] == 0 {
			t.Errorf("nfv pipeline counters %v: want firewall drops, firewall hand-ons and End redirects", st)
		}
		lb.xdpForwards(t, "nfv", "sid/fc00:2::", "ingress", "fc00:d1::2")
		lb.xdpForwards(t, "ids", "sid/fc00:4::", "ingress", "fc00:d1::2")
	}
}

// checkSERAPipeline: with `datapath: xdp`, nfv runs the dispatcher with
// the firewall and End stages, ids the End stage, and both keep their tc
// programs behind (what XDP hands to the stack).
func checkSERAPipeline(t *testing.T, lb *exampleLab) {
	t.Helper()
	sts, err := lab.Status(t.Context(), lb.net.Name, lb.opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"nfv": "xdp pipeline: firewall -> end", "ids": "xdp pipeline: end"}
	for _, st := range sts {
		if !st.OK() {
			t.Errorf("node %s: %v", st.Node, st.Problems)
		}
		note, ok := want[st.Node]
		if !ok {
			continue
		}
		if !slices.Equal(st.Notes, []string{note}) {
			t.Errorf("%s notes %v, want [%s]", st.Node, st.Notes, note)
		}
		for ifn, p := range st.Programs {
			if len(p) < 2 || p[0] != "xdp:"+pipeline.ProgName || !slices.Contains(p, "srchain_end") {
				t.Errorf("%s %s programs %v, want xdp:%s first, srchain_end at tc", st.Node, ifn, p, pipeline.ProgName)
			}
			if st.Node == "nfv" && !slices.Contains(p, fwkind.ProgName) {
				t.Errorf("nfv %s programs %v, want the tc firewall %s too", ifn, p, fwkind.ProgName)
			}
		}
	}
}

// pipelineCounters reads node's XDP pipeline counters (stage/NAME/OUTCOME).
func (l *exampleLab) pipelineCounters(t *testing.T, node string) map[string]uint64 {
	t.Helper()
	ns, err := lab.Open(l.net.Name, node, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	m, err := pipeline.OpenMaps(pipeline.NodeDir(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}
