package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/testutil"
)

// FlowOffset points at the low 32 bits of the inner IPv6 source address
// for every frame shape and size, which is what the generator rewrites.
func TestFlowOffset(t *testing.T) {
	src := InnerSrc6.As16()
	for _, tc := range []struct {
		name string
		spec FrameSpec
	}{
		{"plain", FrameSpec{}},
		{"encap 1", FrameSpec{Encap: []netip.Addr{SID(1)}}},
		{"encap 2", proxyFrame(0x1a2)},
		{"encap 5", FrameSpec{Encap: sids(1, 2, 3, 4, 0)}},
		{"insert", FrameSpec{Insert: sids(1, 2)}},
	} {
		off, err := FlowOffset(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, size := range []int{0, 192, 576, 1500} {
			fr, err := BuildFrame(tc.spec, size, 0, testEP)
			if err != nil {
				t.Fatalf("%s size %d: %v", tc.name, size, err)
			}
			if off+4 > len(fr) || !bytes.Equal(fr[off-12:off+4], src[:]) {
				t.Errorf("%s size %d: offset %d does not hold the low bits of %v", tc.name, size, off, InnerSrc6)
			}
		}
	}
	if _, err := FlowOffset(FrameSpec{Encap: sids(1), Inner4: true}); !errors.Is(err, ErrFrame) {
		t.Errorf("inner ipv4: err %v, want ErrFrame", err)
	}
}

// The proxy scenario: per-packet flows on the per-flow cases only, at the
// counts the issue asks for, every other case on one flow; names are
// unique; the baseline and the SR cases' frames are what the DUT serves.
func TestProxyScenario(t *testing.T) {
	sc, err := Lookup("proxy")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Baseline != "nf-plain" {
		t.Errorf("baseline %q, want nf-plain", sc.Baseline)
	}
	seen := map[string]bool{}
	flows := map[string]int{}
	for _, c := range sc.Cases {
		if seen[c.Name] {
			t.Errorf("duplicate case %s", c.Name)
		}
		seen[c.Name] = true
		flows[c.Name] = c.Flows
		if c.Flows > 1 {
			if _, err := FlowOffset(c.Frame); err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
		}
		if c.Setup == nil && c.Name != CasePlain.Name {
			t.Errorf("%s: no setup", c.Name)
		}
	}
	if sc.Ceiling != "nf-xdp-fwd" {
		t.Errorf("ceiling %q, want nf-xdp-fwd", sc.Ceiling)
	}
	for _, name := range []string{"nf-plain", "nf-xdp-fwd", "workaround", "end.as", "end.ad", "end.am", "end.ad-xdp"} {
		if !seen[name] {
			t.Errorf("case %s missing", name)
		}
	}
	want := map[string]int{"end.ad-flow": 1, "end.ad-flow-1k": 1000, "end.ad-flow-100k": 100000, "end.ad": 0, "nf-plain": 0, "nf-plain-100k": 100000}
	for name, n := range want {
		if got, ok := flows[name]; !ok || got != n {
			t.Errorf("%s: flows %d (present %v), want %d", name, got, ok, n)
		}
	}
	if got := nfName("srcb-42-3-d"); got != "srcb-42-3-n" {
		t.Errorf("nf namespace %q", got)
	}
}

// A per-packet flow case builds one template per size whatever --flows
// says, so it never runs out of templates; other cases keep --flows.
func TestCaseFlowsOneTemplate(t *testing.T) {
	o := DefaultOptions()
	o.Flows, o.IMIX = 5, true
	c := proxyCase("x", "", 5, 0x1a5, proxyTC, 100000)
	fr, err := BuildTemplates(c.Frame, caseProfile(c, o, 0), testEP)
	if err != nil || len(fr) != len(imixSeq) {
		t.Fatalf("templates %d, err %v; want %d", len(fr), err, len(imixSeq))
	}
	fr, err = BuildTemplates(CaseNFPlain.Frame, caseProfile(CaseNFPlain, o, 0), testEP)
	if err != nil || len(fr) != 5*len(imixSeq) {
		t.Fatalf("plain case: templates %d, err %v; want %d", len(fr), err, 5*len(imixSeq))
	}
}

// TestProxyOPoTLine runs end.ad-tlv and end.ad-opot (also with the
// generator's one template, identical packets) through a real line:
// every frame comes back from the NF and reaches the sink, which with
// OPoT means the proxy found each frame's kept TLV on the way back (a
// miss drops it); and the frame keeps its size (the TLV rides in the
// restored header, nothing is added).
func TestProxyOPoTLine(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	identical := CaseProxyADOPoT
	identical.Name, identical.Flows = "end.ad-opot identical frames", 0 // a batch of identical packets in flight: queued TLVs
	for i, c := range []Case{CaseProxyADTLV, CaseProxyADOPoT, identical} {
		t.Run(c.Name, func(t *testing.T) {
			l, err := NewLine(ctx, fmt.Sprintf("sobp%d-%d", os.Getpid(), i))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d := &DUT{NS: l.DUT}
			defer d.close()
			if err := c.Setup(ctx, d); err != nil {
				t.Fatal(err)
			}
			sent, sink := sendLine(ctx, t, l, c, 3000)
			if sink.Packets < sent || sink.Packets > sent+opotNoise || sent < 100 {
				t.Fatalf("sent %d, sink got %d", sent, sink.Packets)
			}
			fr, err := BuildFrame(c.Frame, 0, 0, testEP)
			if err != nil {
				t.Fatal(err)
			}
			extra := sink.Packets - sent
			if want := uint64(len(fr)) * sent; sink.Bytes < want || sink.Bytes > want+extra*opotNoiseBytes {
				t.Errorf("sink bytes %d, want %d (%d frames of %d)", sink.Bytes, want, sent, len(fr))
			}
		})
	}
}
