package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/testutil"
)

// The opot scenario's frames are valid for real, in the Go model: the
// transit frame's TLV, after the DUT's hop and the chain's remaining
// transits, verifies at the chain's verifier (k = 3, 5, 7); the verifier
// frame verifies for every value the generator's counter writes, with a
// sequence number that grows with the counter; every goal names cases of
// the scenario.
func TestOPoTScenario(t *testing.T) {
	sc, err := Lookup("opot")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Case{}
	for _, c := range sc.Cases {
		if _, dup := names[c.Name]; dup {
			t.Errorf("duplicate case %s", c.Name)
		}
		names[c.Name] = c
	}
	for _, g := range opotGoals {
		if _, ok := names[g.Case]; !ok {
			t.Errorf("goal case %s not in the scenario", g.Case)
		}
		if _, ok := names[g.Base]; !ok {
			t.Errorf("goal baseline %s not in the scenario", g.Base)
		}
	}
	f := opot.F61
	for _, k := range []int{3, 5, 7} {
		c := CaseOPoTTransit(k)
		p, want, err := opotTransitMeta(k)
		if err != nil {
			t.Fatal(err)
		}
		m := tlvOf(t, c.Frame)
		if m != want {
			t.Fatalf("k%d: frame tlv %+v, headend's %+v", k, m, want)
		}
		for j := 1; j < k-1; j++ {
			n, err := p.Node(j)
			if err != nil {
				t.Fatal(err)
			}
			if m, err = opot.Transit(f, n, m); err != nil {
				t.Fatal(err)
			}
		}
		n, err := p.Node(k - 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := opot.Verify(f, n, m); err != nil {
			t.Errorf("k%d: the transit frame does not verify after the chain: %v", k, err)
		}
	}
	if !bytes.Equal(names["srchain-end"].Frame.TLVs[0].Value, names["opot-transit"].Frame.TLVs[0].Value) {
		t.Error("the transit's baseline sends other frames")
	}

	n, err := opotVerifyParams()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dt6", "opot-verify+dt6"} {
		c := names[name]
		if c.Flows != opotCounterFlows || c.CounterOffset != opotCounterOffset(c.Frame) {
			t.Fatalf("%s: flows %d at %d, want the counter in RND", name, c.Flows, c.CounterOffset)
		}
	}
	c := CaseOPoTVerify
	fr, err := BuildFrame(c.Frame, 0, 0, testEP)
	if err != nil {
		t.Fatal(err)
	}
	tlvOff, _ := TLVOffset(c.Frame)
	if c.CounterOffset != tlvOff+opot.OffRND+1 || fr[tlvOff+opot.OffRND] != 0 {
		t.Fatalf("counter offset %d, tlv at %d", c.CounterOffset, tlvOff)
	}
	prev := uint64(0)
	for _, v := range []uint32{1, 2, 3, 1000, 1 << 20, opotCounterFlows} {
		b := bytes.Clone(fr)
		binary.BigEndian.PutUint32(b[c.CounterOffset:], v)
		m, err := opot.ParseTLV(b[tlvOff:])
		if err != nil {
			t.Fatal(err)
		}
		r, err := opot.Verify(f, n, m)
		if err != nil {
			t.Fatalf("counter %d: %v", v, err)
		}
		if s := opot.SeqOf(r); s <= prev || s > opot.MaxSeq {
			t.Fatalf("counter %d: sequence %d after %d", v, s, prev)
		} else {
			prev = s
		}
	}
	// A frame not from the generator's counter path (bytes changed
	// elsewhere) fails: the verifier really checks.
	b := bytes.Clone(fr)
	b[tlvOff+opot.OffCML+7] ^= 1
	if m, err := opot.ParseTLV(b[tlvOff:]); err != nil {
		t.Fatal(err)
	} else if _, err := opot.Verify(f, n, m); !errors.Is(err, opot.ErrVerify) {
		t.Errorf("flipped CML: %v, want ErrVerify", err)
	}
}

func tlvOf(t *testing.T, spec FrameSpec) opot.Meta {
	t.Helper()
	fr, err := BuildFrame(spec, 0, 0, testEP)
	if err != nil {
		t.Fatal(err)
	}
	off, err := TLVOffset(spec)
	if err != nil {
		t.Fatal(err)
	}
	m, err := opot.ParseTLV(fr[off:])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Each OPoT case's DUT, set up by the bench's own helpers, handles the
// case's frames sent through the line by the generator: every frame
// reaches the sink, none is dropped, and the stage did its work: the
// verifier counted every frame as verified, the headend (the tc stage
// behind the kernel's encap, or the eBPF ingress at tc and at XDP)
// numbered every frame (its sequence counter) and carried the TLV (24
// bytes more at the sink than the kernel's encap alone, 32 with the
// route's PadN behind the kernel's encap), and the transit's
// output (by test run of the End attached at the DUT, which does it, or
// of the stage) is the Go model's hop, which the chain's verifier
// accepts; at XDP the End redirected every frame.
func TestOPoTLine(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("sobt%d", os.Getpid())
	for i, tc := range []struct {
		c     Case
		setup func(context.Context, *DUT) (*opotdp.Objects, error)
	}{
		{CaseOPoTVerify, setupOPoTVerify},
		{CaseOPoTHeadend, setupOPoTHeadend},
		{CaseOPoTIngress(false), func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTIngress(ctx, d, false) }},
		{CaseOPoTIngress(true), func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTIngress(ctx, d, true) }},
		{CaseOPoTTransit(5), func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTTransit(ctx, d, 5) }},
		{CaseOPoTTransitXDP, func(ctx context.Context, d *DUT) (*opotdp.Objects, error) { return setupOPoTTransitXDP(ctx, d, true) }},
		{CaseOPoTTransitCSID, setupOPoTTransitCSID},
		{CaseOPoTStageEBPFEnd, func(ctx context.Context, d *DUT) (*opotdp.Objects, error) {
			return setupOPoTTransitWith(ctx, d, 3, true)
		}},
	} {
		t.Run(tc.c.Name, func(t *testing.T) {
			l, err := NewLine(ctx, fmt.Sprintf("%s-%d", prefix, i))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d := &DUT{NS: l.DUT}
			defer d.close()
			o, err := tc.setup(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			sent, sink := sendLine(ctx, t, l, tc.c, 3000)
			// The sink also counts the DUT's own few link-up packets
			// (MLD reports): at most opotNoise of them.
			if sink.Packets < sent || sink.Packets > sent+opotNoise || sent < 100 {
				t.Fatalf("sent %d, sink got %d", sent, sink.Packets)
			}
			drops := statSum(t, o.OpotStats, func(idx uint32, r drop.Reason) bool { return r != drop.None })
			if drops != 0 {
				t.Errorf("stage dropped or refused %d frames", drops)
			}
			switch tc.c.Name {
			case CaseOPoTVerify.Name:
				if ok := statSum(t, o.OpotStats, func(idx uint32, r drop.Reason) bool { return r == drop.None && idx == opotID }); ok != sent {
					t.Errorf("verified %d of %d frames", ok, sent)
				}
			case CaseOPoTHeadend.Name, CaseOPoTIngress(false).Name, CaseOPoTIngress(true).Name:
				var seq uint64
				if err := o.OpotSeqs.Lookup(opotdp.Key{Index: opotID, Slot: opotSlot}.Array(), &seq); err != nil {
					t.Fatal(err)
				}
				if seq != sent {
					t.Errorf("headend numbered %d of %d frames", seq, sent)
				}
				fr, err := BuildFrame(tc.c.Frame, 0, 0, testEP)
				if err != nil {
					t.Fatal(err)
				}
				// Encap: 40 (IPv6) + 8 + 16 (SRH, 1 SID); the TLV 24, and
				// behind the kernel's encap the route's PadN 8.
				tlvs := opot.TLVLen
				if tc.c.Name == CaseOPoTHeadend.Name {
					tlvs = opot.ReservedLen
				}
				extra := sink.Packets - sent
				if want := uint64(len(fr)+40+24+tlvs) * sent; sink.Bytes < want || sink.Bytes > want+extra*opotNoiseBytes {
					t.Errorf("sink bytes %d, want %d (%d frames of %d)", sink.Bytes, want, sent, len(fr)+40+24+tlvs)
				}
			case CaseOPoTTransitXDP.Name:
				// Every frame was redirected by the XDP End (the
				// pipeline's own statistics), and the XDP pipeline and
				// the tc End (for what XDP hands to the stack) each write
				// the model's hop.
				st := dutPipeStats(t, d)
				if red := st["stage/end/redirect"]; red < sent {
					t.Errorf("the XDP End redirected %d of %d frames (%v)", red, sent, st)
				}
				checkTransitRun(t, dutXDPRun(t, d), xdpRedirect, tc.c, 3)
				checkTransitRun(t, dutEndRun(t, d), tcActRedirect, tc.c, 3)
			case CaseOPoTTransitCSID.Name:
				// The End shifted the container (RFC 9800 4.1.1) and
				// wrote the model's hop into the SRH it left alone.
				endRun, out := dutEndRun(t, d), []byte(nil)
				checkTransitRun(t, func(fr []byte) (uint32, []byte) {
					ret, o := endRun(fr)
					out = o
					return ret, o
				}, tcActRedirect, tc.c, 3)
				if da := netip.AddrFrom16([16]byte(out[14+24 : 14+40])); da != netip.MustParseAddr("fc00:d:200::") {
					t.Errorf("destination after the End %s, want fc00:d:200::", da)
				}
			case CaseOPoTStageEBPFEnd.Name:
				stage := func(fr []byte) (uint32, []byte) {
					out := make([]byte, len(fr)+256)
					ret, err := o.SrchainOpotTransit.Run(&ebpf.RunOptions{Data: fr, DataOut: out})
					if err != nil {
						t.Fatal(err)
					}
					return ret, out
				}
				checkTransitRun(t, stage, tcActUnspec, tc.c, 3)
			default:
				checkTransitRun(t, dutEndRun(t, d), tcActRedirect, tc.c, 5)
			}
		})
	}
}

// tc verdicts of the End and the transit stage (linux/pkt_cls.h).
const (
	tcActRedirect = 7
	tcActUnspec   = 0xffffffff // the next tcx program
)

// dutEndRun returns a test run of the srchain End attached at the DUT's
// ingress, as if the frame were received there (addressed to its MAC).
func dutEndRun(t *testing.T, d *DUT) func([]byte) (uint32, []byte) {
	t.Helper()
	idx, err := d.Index(ifDUTIn)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.NS.Netlink().LinkByIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	mac := l.Attrs().HardwareAddr
	var prog *ebpf.Program
	err = d.NS.Do(func() error {
		atts, err := bpfrt.TCXIngress(idx)
		if err != nil {
			return err
		}
		for _, a := range atts {
			p, err := ebpf.NewProgramFromID(a.Program)
			if err != nil {
				return err
			}
			if info, err := p.Info(); err == nil && info.Name == "srchain_end" {
				prog = p
				return nil
			}
			p.Close()
		}
		return errors.New("no srchain_end at the DUT's tcx ingress")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return dutRun(t, d, prog, mac, testutil.SKB{IngressIfindex: uint32(idx), Ifindex: uint32(idx)})
}

// dutRun returns a test run of prog in the DUT's namespace with context
// ctx, on a copy of the frame addressed to mac.
func dutRun(t *testing.T, d *DUT, prog *ebpf.Program, mac net.HardwareAddr, ctx any) func([]byte) (uint32, []byte) {
	return func(fr []byte) (uint32, []byte) {
		fr = bytes.Clone(fr)
		copy(fr, mac)
		out := make([]byte, len(fr)+256)
		var ret uint32
		err := d.NS.Do(func() (err error) {
			ret, err = prog.Run(&ebpf.RunOptions{Data: fr, DataOut: out, Context: ctx})
			return err
		})
		if err != nil {
			t.Fatalf("test run of %s: %v", prog, err)
		}
		return ret, out
	}
}

// xdpRedirect is XDP_REDIRECT.
const xdpRedirect = 4

// dutXDPRun returns a test run of the XDP program (the pipeline's
// dispatcher) on the DUT's ingress, as if the frame arrived there.
func dutXDPRun(t *testing.T, d *DUT) func([]byte) (uint32, []byte) {
	t.Helper()
	prog, idx, mac := dutXDP(t, d)
	return func(fr []byte) (uint32, []byte) {
		// An XDP test run's context must give the frame's length.
		ret, out := dutRun(t, d, prog, mac, xdpMD{DataEnd: uint32(len(fr)), IngressIfindex: uint32(idx)})(fr)
		// The output starts with the metadata the dispatcher wrote
		// (struct pipe_meta, lib/pipeline.h); the End keeps the
		// frame's length.
		const pipeMetaLen = 8
		return ret, out[pipeMetaLen : pipeMetaLen+len(fr)]
	}
}

// dutXDP is the XDP program on the DUT's ingress (closed with the test),
// the interface's index and MAC.
func dutXDP(t *testing.T, d *DUT) (*ebpf.Program, int, net.HardwareAddr) {
	t.Helper()
	idx, err := d.Index(ifDUTIn)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.NS.Netlink().LinkByIndex(idx)
	if err != nil || l.Attrs().Xdp == nil || l.Attrs().Xdp.ProgId == 0 {
		t.Fatalf("no XDP program on the DUT's ingress (%v)", err)
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(l.Attrs().Xdp.ProgId))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog, idx, l.Attrs().HardwareAddr
}

// xdpMD is struct xdp_md; test runs may set ingress_ifindex.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// dutPipeStats reads the statistics of the XDP pipeline whose dispatcher
// runs on the DUT's ingress.
func dutPipeStats(t *testing.T, d *DUT) map[string]uint64 {
	t.Helper()
	prog, _, _ := dutXDP(t, d)
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if mi, err := m.Info(); err == nil && mi.Name == "pipe_stats" {
			st, err := (&pipeline.Maps{StatsMap: m}).Stats()
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	t.Fatal("the dispatcher has no pipe_stats map")
	return nil
}

// opotNoise bounds the DUT's own packets the sink may count during a
// line test, opotNoiseBytes their size.
const opotNoise, opotNoiseBytes = 8, 200

// sendLine sends c's frames through l at a low rate for a moment and
// returns what the generator sent and the sink saw.
func sendLine(ctx context.Context, t *testing.T, l *Line, c Case, pps float64) (uint64, SinkCount) {
	t.Helper()
	s, err := NewSink(l)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := NewGenerator(l)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	frames, err := BuildTemplates(c.Frame, caseProfile(c, DefaultOptions(), 0), Endpoints{Src: l.GenMAC, Dst: l.InMAC})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetTemplates(frames); err != nil {
		t.Fatal(err)
	}
	off, err := counterOffset(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetFlows(c.Flows, off); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := g.Blast(bctx, nil, pps, -1, nil); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blast: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // frames in flight
	sent, err := g.Sent()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := s.Count()
	if err != nil {
		t.Fatal(err)
	}
	return sent, sc
}

func statSum(t *testing.T, m *ebpf.Map, keep func(idx uint32, r drop.Reason) bool) uint64 {
	t.Helper()
	var (
		k   uint32
		per []uint64
		sum uint64
	)
	it := m.Iterate()
	for it.Next(&k, &per) {
		if keep(k/uint32(drop.Max), drop.Reason(k%uint32(drop.Max))) {
			for _, v := range per {
				sum += v
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// checkTransitRun runs the DUT's transit (run, which must give verdict)
// on the case's frame and checks the TLV it writes is the model's hop,
// and that the rest of the chain verifies it.
func checkTransitRun(t *testing.T, run func([]byte) (uint32, []byte), verdict uint32, c Case, k int) {
	t.Helper()
	fr, err := BuildFrame(c.Frame, 0, 0, testEP)
	if err != nil {
		t.Fatal(err)
	}
	ret, out := run(fr)
	if ret != verdict {
		t.Fatalf("transit test run: verdict %d, want %d", ret, verdict)
	}
	off, _ := TLVOffset(c.Frame)
	got, err := opot.ParseTLV(out[off:])
	if err != nil {
		t.Fatal(err)
	}
	p, m, err := opotTransitMeta(k)
	if err != nil {
		t.Fatal(err)
	}
	f := opot.F61
	n1, _ := p.Node(1)
	if m, err = opot.Transit(f, n1, m); err != nil || got != m {
		t.Fatalf("transit wrote %+v, model %+v (%v)", got, m, err)
	}
	for j := 2; j < k-1; j++ {
		n, _ := p.Node(j)
		m, _ = opot.Transit(f, n, m)
	}
	nv, _ := p.Node(k - 1)
	if _, err := opot.Verify(f, nv, m); err != nil {
		t.Errorf("the DUT's hop does not verify at the end of the chain: %v", err)
	}
}
