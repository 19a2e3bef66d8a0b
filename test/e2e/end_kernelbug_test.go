package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// TestEndKernelBugs pins the two places where srchain's End deliberately
// differs from the kernel's seg6local End because the kernel is wrong
// (docs/datapath.md, "Where the kernel is wrong"):
//   - a packet whose next segment is reached back out of the interface it
//     came in on: the kernel forwards it and also sends an ICMPv6
//     Redirect, which RFC 4861 8.2 forbids for a packet source-routed
//     through the router (seg6local never sets the srcrt flag
//     ip6_forward checks); srchain forwards the same bytes, no Redirect;
//   - an H-flagged HMAC TLV in an SRH behind a Destination Options
//     header: the kernel's HMAC check (seg6_hmac_validate_skb) reads the
//     transport header, i.e. the Destination Options header, as the SRH,
//     finds no HMAC and forwards unverified; srchain, which verifies no
//     HMAC, drops it (unsupported), as the kernel does when the SRH
//     comes first and it has no key.
func TestEndKernelBugs(t *testing.T) {
	endRequireRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kern := newEndLine(t, "k")
	ours := newEndLine(t, "b")
	end, err := datapath.LoadEnd(datapath.EndOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	if err := ours.e.Do(func() error { return end.Attach(ours.eIn) }); err != nil {
		t.Fatal(err)
	}
	if err := end.SetSID(endSID, datapath.BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*endLine{kern, ours} {
		for _, args := range endKernelRoutes {
			if _, err := l.e.Run(ctx, "ip", args...); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("redirect for a source-routed packet", func(t *testing.T) {
		// ndisc_send_redirect needs a usable link-local address on e0:
		// wait for its DAD to finish (a precondition, not a timing
		// assertion).
		for i := 0; ; i++ {
			out, err := kern.e.Run(ctx, "ip", "-6", "addr", "show", "dev", endIf("e0"), "scope", "link")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "inet6") && !strings.Contains(out, "tentative") {
				break
			}
			if i == 100 {
				t.Fatalf("no usable link-local address on e0: %s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The next segment is the sender itself: back out of e0.
		ip := endPkt(t, endSID, 64, endSRH(endSID, endSrc), "back")
		frame := srv6.Ether(endMACs.eIn, endMACs.sIf, srv6.EtherTypeIPv6, ip)
		fwdK, redirK := sendCollectAtSender(t, kern, frame)
		fwdB, redirB := sendCollectAtSender(t, ours, frame)
		if len(fwdK) != 1 || len(fwdB) != 1 || !bytes.Equal(fwdK[0], fwdB[0]) {
			t.Errorf("forwarded back: kernel %d frames, srchain %d, or they differ", len(fwdK), len(fwdB))
		}
		if redirK != 1 {
			t.Errorf("kernel sent %d Redirects; the documented kernel bug changed (want 1)", redirK)
		}
		if redirB != 0 {
			t.Errorf("srchain's line sent %d Redirects, want 0 (RFC 4861 8.2)", redirB)
		}
	})

	t.Run("HMAC behind destination options", func(t *testing.T) {
		s := endSRH(endSID, endNext, endNext2)
		s.Flags = 0x08
		s.TLVs = []srv6.TLV{srv6.HMACTLV{KeyID: 7, HMAC: bytes.Repeat([]byte{0xab}, 32)}.TLV()}
		ip := insertExt(endPkt(t, endSID, 64, s, "hmac"), srv6.ProtoDestOpts, optsHdr(srv6.ProtoRouting, 1, 4))
		frame := srv6.Ether(endMACs.eIn, endMACs.sIf, srv6.EtherTypeIPv6, ip)
		before, err := end.DropCounts()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*endLine{kern, ours} {
			l.drain()
			if err := l.send(frame); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(endTimeout)
		gotK, gotB := kern.receive(deadline), ours.receive(deadline)
		after, err := end.DropCounts()
		if err != nil {
			t.Fatal(err)
		}
		if len(gotK) != 1 {
			t.Errorf("kernel delivered %d frames; the documented kernel bug changed (want 1: HMAC not checked)", len(gotK))
		}
		if len(gotB) != 0 || after[drop.Unsupported]-before[drop.Unsupported] != 1 {
			t.Errorf("srchain delivered %d frames, unsupported drops += %d; want 0 and 1", len(gotB), after[drop.Unsupported]-before[drop.Unsupported])
		}
	})
}

// sendCollectAtSender sends frame on l and returns the frames that come
// back to the sender from endSrc to endSrc (forwarded back), and how many
// ICMPv6 Redirects (type 137) arrive.
func sendCollectAtSender(t *testing.T, l *endLine, frame []byte) ([][]byte, int) {
	t.Helper()
	l.drainSender()
	if err := l.send(frame); err != nil {
		t.Fatal(err)
	}
	src := endSrc.As16()
	var fwd [][]byte
	redirects := 0
	buf := make([]byte, 65536)
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		n, from, err := unix.Recvfrom(l.tx, buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := buf[:n]
		if len(f) < 14+40+1 || f[12] != 0x86 || f[13] != 0xdd {
			continue
		}
		switch {
		case f[14+6] == 58 && f[14+40] == 137:
			redirects++
		case string(f[14+8:14+24]) == string(src[:]) && string(f[14+24:14+40]) == string(src[:]):
			fwd = append(fwd, append([]byte(nil), f...))
		}
	}
	return fwd, redirects
}
