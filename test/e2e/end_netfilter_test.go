package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/srv6"
)

// TestEndNetfilterStackForward shows the netfilter bypass of the fast
// path and that EndOptions.StackForward closes it: an nftables forward
// rule on the endpoint that drops the rewritten packets (new DA
// fc00:2::5) stops them on the kernel End line and on a StackForward
// line, while the default srchain line (tc redirect) forwards them.
func TestEndNetfilterStackForward(t *testing.T) {
	endRequireRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	type line struct {
		name string
		*endLine
		end       *datapath.End
		wantDrops bool
	}
	kern := &line{name: "kernel", endLine: newEndLine(t, "nk"), wantDrops: true}
	if _, err := kern.e.Run(ctx, "ip", "-6", "route", "add", endSID.String()+"/128", "encap", "seg6local", "action", "End", "dev", endIf("e0")); err != nil {
		t.Fatal(err)
	}
	lines := []*line{kern}
	for _, l := range []struct {
		tag   string
		stack bool
	}{{"nf", false}, {"ns", true}} {
		ln := &line{name: map[bool]string{false: "srchain fast path", true: "srchain stack-forward"}[l.stack], endLine: newEndLine(t, l.tag), wantDrops: l.stack}
		end, err := datapath.LoadEnd(datapath.EndOptions{StackForward: l.stack})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { end.Close() })
		ln.end = end
		if err := ln.e.Do(func() error { return end.Attach(ln.eIn) }); err != nil {
			t.Fatal(err)
		}
		if err := end.SetSID(endSID, datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, ln)
	}
	pkt := endPkt(t, endSID, 64, endSRH(endSID, endNext, endNext2), "netfilter")
	frame := srv6.Ether(endMACs.eIn, endMACs.sIf, srv6.EtherTypeIPv6, pkt)

	send := func(l *line) int {
		t.Helper()
		l.drain()
		if err := l.send(frame); err != nil {
			t.Fatal(err)
		}
		return len(l.receive(time.Now().Add(endTimeout)))
	}
	for _, l := range lines {
		if n := send(l); n != 1 {
			t.Fatalf("%s: without rules %d frames arrived, want 1", l.name, n)
		}
		if _, err := l.e.Run(ctx, "nft", "add table ip6 srct; add chain ip6 srct fchain { type filter hook forward priority 0; policy accept; }; add rule ip6 srct fchain ip6 daddr "+endNext.String()+" counter drop"); err != nil {
			t.Fatal(err)
		}
		n := send(l)
		switch {
		case l.wantDrops && n != 0:
			t.Errorf("%s: forward rule did not apply: %d frames arrived", l.name, n)
		case !l.wantDrops && n != 1:
			t.Errorf("%s: %d frames arrived, want 1 (the fast path bypasses netfilter)", l.name, n)
		}
		if l.end != nil {
			fib, err := l.end.FIBCounts()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: fib %v", l.name, fib)
		}
	}
}
