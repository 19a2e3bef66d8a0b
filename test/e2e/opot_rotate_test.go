package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/lab"
)

// TestLabOPoTRotate: `lab rotate` on the OPoT testbed while h1 sends a
// steady stream through the chain, twice (to slot 1, back to slot 0).
// Every packet sent verifies at r6, none is dropped there (packets
// started with the old slot before the switch still verify), the
// packets after each rotation carry the new slot, and every member's
// keys for it changed in the lab's record. A `lab apply` of the same
// spec afterwards changes nothing (the rotated keys and slot are kept).
//
// The same with r1's headend in srchain's eBPF ingress at XDP (it reads
// the slot from the OPoT driver's chain entry, as the tc stage does).
func TestLabOPoTRotate(t *testing.T) {
	requireRoot(t)
	t.Run("kernel", func(t *testing.T) { opotRotate(t, deployExample(t, "opot-testbed.yaml", "")) })
	t.Run("ebpf-ingress", func(t *testing.T) { opotRotate(t, deploySpec(t, opotEBPFIngressSpec(t))) })
}

func opotRotate(t *testing.T, l *exampleLab) {
	l.probeAll(t)
	base, drops := l.opotCounters(t)
	if base == 0 || len(drops) != 0 {
		t.Fatalf("after the probes: %d verified, drops %v", base, drops)
	}
	var sent uint64
	for round, slot := range []uint8{1, 0} {
		before := l.opotSecrets(t, int(slot))
		n := l.streamWhile(t, func() {
			rs, err := lab.RotateOPoT(t.Context(), l.net.Name, nil, l.opts)
			if err != nil {
				t.Fatalf("round %d: rotate: %v", round, err)
			}
			if len(rs) != 1 || rs[0].Chain != "verified" || rs[0].Slot != slot {
				t.Fatalf("round %d: rotations %+v, want chain verified to slot %d", round, rs, slot)
			}
		})
		sent += n
		if !waitFor(func() bool { v, _ := l.opotCounters(t); return v >= base+sent }) {
			v, d := l.opotCounters(t)
			t.Fatalf("round %d: %d sent, %d verified, drops %v", round, sent, v-base, d)
		}
		if v, d := l.opotCounters(t); v != base+sent || len(d) != 0 {
			t.Fatalf("round %d: %d sent, %d verified, drops %v", round, sent, v-base, d)
		}
		after := l.opotSecrets(t, int(slot))
		for node, b := range before {
			if bytes.Equal(b, after[node]) || len(after[node]) == 0 {
				t.Errorf("round %d: %s's slot %d keys did not change", round, node, slot)
			}
		}
		// The packets now start with the new slot.
		if got := l.nextSlot(t); got != slot {
			t.Errorf("round %d: packet after the rotation carries slot %d, want %d", round, got, slot)
		}
		sent++
		// `lab apply FILE` with the same spec keeps the rotated keys and
		// the headend's slot.
		l.reapplySame(t)
	}
	if evs := l.opotEvents(t); len(evs) != 0 {
		t.Errorf("verifier events: %v", evs)
	}
}

// streamWhile sends UDP datagrams from h1 through the chain, in bursts
// of 10 a millisecond apart, from before do starts (100 sent) until
// after it returned (100 more), and returns how many it sent.
func (l *exampleLab) streamWhile(t *testing.T, do func()) uint64 {
	t.Helper()
	var n atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	var serr error
	go func() {
		defer close(done)
		serr = l.node(t, "h1").Do(func() error {
			// Unconnected: h8's port unreachable replies must not fail
			// the writes.
			c, err := net.ListenUDP("udp6", nil)
			if err != nil {
				return err
			}
			to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("fc00:8::2"), 9))
			defer c.Close()
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				for range 10 {
					if _, err := c.WriteToUDP([]byte("opot-rotate"), to); err != nil {
						return err
					}
					n.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}()
	waitSent := func(min uint64) {
		for n.Load() < min {
			select {
			case <-done: // the stream failed: reported below
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitSent(100)
	do()
	waitSent(n.Load() + 100)
	close(stop)
	<-done
	if serr != nil {
		t.Fatalf("stream: %v", serr)
	}
	return n.Load()
}

// nextSlot sends one datagram from h1 through the chain and returns the
// profile slot its proof carries as it arrives at r6.
func (l *exampleLab) nextSlot(t *testing.T) uint8 {
	t.Helper()
	c6 := openRing(t, l.node(t, "r6"), "eth0")
	sendUDP(t, l.node(t, "h1"), netip.MustParseAddr("fc00:8::2"), "opot-rotated")
	_, _, sid6 := l.chainSIDs(t)
	f := c6.capture(t, sid6)
	off, err := tlvOffset(f)
	if err != nil {
		t.Fatal(err)
	}
	return f[off+2]
}

// opotSecrets reads, from the lab's record, each node's parameters of
// the chain's slot.
func (l *exampleLab) opotSecrets(t *testing.T, slot int) map[string][]byte {
	t.Helper()
	rec, err := lab.Load(l.net.Name, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range rec.Network.Nodes {
		for _, s := range n.Secrets {
			if s.Name == compile.OPoTSecretName("verified", 1, slot) {
				out[n.Name] = s.Value
			}
		}
	}
	if len(out) != 4 {
		t.Fatalf("slot %d secrets on %d nodes, want 4", slot, len(out))
	}
	return out
}

// TestLabAgentsOPoTRotate: `srchain rotate` through the controller of a
// `lab up --agents` OPoT testbed, while h1 streams through the chain:
// the controller stores the new keys, waits for the members' agents,
// then switches the headend; every packet sent verifies at r6, none is
// dropped, and once r1's agent applied the switch the packets carry
// slot 1.
func TestLabAgentsOPoTRotate(t *testing.T) {
	requireRoot(t)
	if srchainBin == "" {
		t.Fatal("srchain binary not built (see the TestMain output)")
	}
	file := renamedSpec(t, "opot-testbed.yaml", "r")
	_, net := example(t, "opot-testbed.yaml", "r")
	opts := lab.Options{StateDir: t.TempDir()}
	cleanupCLILab(t, net.Name, opts.StateDir)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, srchainBin, "lab", "up", "--agents", "--state-dir", opts.StateDir, file).CombinedOutput()
	if err != nil {
		t.Fatalf("lab up --agents: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`controller (http://\S+) \(token in (\S+)\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no controller address in:\n%s", out)
	}
	server, tokenFile := string(m[1]), string(m[2])
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	cl := &controller.Client{Server: server, Token: strings.TrimSpace(string(tok))}
	l := &exampleLab{net: net, opts: opts}
	// `lab rotate` and `lab apply FILE` would write behind the
	// controller's back (its agents would put the old state back): refused.
	if _, err := lab.RotateOPoT(ctx, net.Name, nil, opts); !errors.Is(err, lab.ErrAgentsLab) {
		t.Fatalf("lab rotate on an agents lab: %v, want ErrAgentsLab", err)
	}
	if _, err := lab.Update(ctx, net, lab.UpOptions{Options: opts}); !errors.Is(err, lab.ErrAgentsLab) {
		t.Fatalf("lab apply FILE on an agents lab: %v, want ErrAgentsLab", err)
	}

	base, _ := l.opotCounters(t)
	sent := l.streamWhile(t, func() {
		out, err := exec.CommandContext(ctx, srchainBin, "rotate", "--server", server, "--token-file", tokenFile, "--wait", "60s").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "chain verified: new keys in slot 1") {
			t.Fatalf("rotate: %v\n%s", err, out)
		}
	})
	if !waitFor(func() bool { v, _ := l.opotCounters(t); return v >= base+sent }) {
		v, d := l.opotCounters(t)
		t.Fatalf("%d sent, %d verified, drops %v", sent, v-base, d)
	}
	if v, d := l.opotCounters(t); v != base+sent || len(d) != 0 {
		t.Fatalf("%d sent, %d verified, drops %v", sent, v-base, d)
	}
	// r1's agent applies the switch on its own time.
	inSync := func() bool {
		var st controller.Status
		return cl.Do(ctx, "GET", "/v1/nodes/r1/status", nil, &st) == nil && st.InSync
	}
	for !inSync() {
		select {
		case <-ctx.Done():
			t.Fatal("r1's agent never applied the switch")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := l.nextSlot(t); got != 1 {
		t.Errorf("after the rotation the packets carry slot %d, want 1", got)
	}
	if v, d := l.opotCounters(t); v != base+sent+1 || len(d) != 0 {
		t.Errorf("the last packet: %d verified (want %d), drops %v", v-base, sent+1, d)
	}
}
