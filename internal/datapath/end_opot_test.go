package datapath

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/srv6"
)

// opotEnv is a testEnv whose End does the OPoT transit (EndOptions.OPoT)
// of a chain of k = 4 over travel: the End's SID, a routed next SID, the
// egress SID. The node is the chain's first transit (hop 1).
type opotEnv struct {
	*testEnv
	objs   *opotdp.Objects
	f      opot.Field
	nodes  []opot.NodeParams
	travel []netip.Addr
}

const opotTestID = 7

func newOPoTEnv(t *testing.T) *opotEnv {
	t.Helper()
	requireRoot(t)
	objs, err := opotdp.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	e := &opotEnv{objs: objs, travel: []netip.Addr{sidEnd, routed, routed2}}
	var seed [32]byte
	seed[0] = 11
	p, err := opot.GenerateFrom(rand.NewChaCha8(seed), 4)
	if err != nil {
		t.Fatal(err)
	}
	e.f = p.Field()
	for j := range 4 {
		n, err := p.Node(j)
		if err != nil {
			t.Fatal(err)
		}
		e.nodes = append(e.nodes, n)
	}
	if err := opotdp.PutChain(e.objs, opotTestID, 0, e.nodes[1], sidEnd, e.travel[len(e.travel)-1]); err != nil {
		t.Fatal(err)
	}
	e.testEnv = newTestEnvWith(t, EndOptions{OPoT: opotdp.EndMapsOf(e.objs)})
	return e
}

// frame is the chain's packet as it reaches the End (DA = sidEnd), with
// proof m, hop limit hl, over travel (the chain's or another's).
func (e *opotEnv) frame(t *testing.T, travel []netip.Addr, hl uint8, m opot.Meta) []byte {
	t.Helper()
	inner := srv6.UDP6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1000, 2000, []byte("opot in the end"))
	l3, err := srv6.Encap(srcAddr, travel, inner, m.SRv6TLV())
	if err != nil {
		t.Fatal(err)
	}
	l3[7] = hl
	return ether(l3)
}

// tlvAt is the offset of the OPoT TLV in a frame over three segments.
const tlvAt = 14 + 40 + 8 + 3*16

// TestEndOPoTTransit: srchain's End (tc and XDP) loaded with the OPoT
// maps updates the proof of a chain entry marked in-End exactly as the
// model's transit (opot.Transit), and otherwise does what it does
// without OPoT: the output frame is the one an End whose entry is not
// marked gives, with the TLV's RND and CML replaced by the model's. A
// packet the tc End hands to the kernel (hop limit 1) leaves with its
// proof updated; one the XDP End hands to tc is untouched (tc updates
// it); so does a broadcast frame (the kernel's End forwards it), not one
// for another host's MAC; another chain's packet and an unmarked entry's
// are untouched, and so are malformed proofs, which get what an End
// without OPoT gives them.
func TestEndOPoTTransit(t *testing.T) {
	e := newOPoTEnv(t)
	in, err := opot.Init(e.f, e.nodes[0], 0, (5<<opot.RandBits)|3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := opot.Transit(e.f, e.nodes[1], in)
	if err != nil {
		t.Fatal(err)
	}
	last := e.travel[len(e.travel)-1]
	withTLV := func(frame []byte, m opot.Meta) []byte {
		out := bytes.Clone(frame)
		copy(out[tlvAt:], m.AppendTo(nil))
		return out
	}
	type result struct {
		ret uint32
		out []byte
	}
	runBoth := func(hl uint8, travel []netip.Addr) (tc, xdp result) {
		f := e.frame(t, travel, hl, in)
		tc.ret, tc.out = e.run(t, f, false)
		xdp.ret, xdp.out = e.run(t, f, true)
		tc.out, xdp.out = tc.out[:len(f)], xdp.out[:len(f)]
		return tc, xdp
	}

	// Not marked in-End: the End leaves the proof to the stage.
	plainTC, plainXDP := runBoth(64, e.travel)
	if plainTC.ret != tcActRedirect || plainXDP.ret != xdpRedirect {
		t.Fatalf("unmarked: verdicts tc %d xdp %d, want redirects", plainTC.ret, plainXDP.ret)
	}
	for name, r := range map[string]result{"tc": plainTC, "xdp": plainXDP} {
		if got, err := opot.ParseTLV(r.out[tlvAt:]); err != nil || got != in {
			t.Fatalf("%s, unmarked entry: proof %+v (%v), want it untouched %+v", name, got, err, in)
		}
	}
	if err := opotdp.SetInEnd(e.objs, last); err != nil {
		t.Fatal(err)
	}
	gotTC, gotXDP := runBoth(64, e.travel)
	if gotTC.ret != tcActRedirect || !bytes.Equal(gotTC.out, withTLV(plainTC.out, want)) {
		t.Errorf("tc: verdict %d\n got %x\nwant %x", gotTC.ret, gotTC.out, withTLV(plainTC.out, want))
	}
	if gotXDP.ret != xdpRedirect || !bytes.Equal(gotXDP.out, withTLV(plainXDP.out, want)) {
		t.Errorf("xdp: verdict %d\n got %x\nwant %x", gotXDP.ret, gotXDP.out, withTLV(plainXDP.out, want))
	}

	// In the XDP pipeline, a packet whose proof the OPoT stage in front
	// updated (PIPE_DONE_OPOT in its metadata: the stage read the entry
	// before the OPoT driver marked it) is not updated again; with the
	// metadata of a packet the stage left alone, it is.
	for _, c := range []struct {
		done uint16
		want opot.Meta
	}{{pipeDoneOPoT, in}, {0, want}} {
		ret, out := e.runXDPMeta(t, e.frame(t, e.travel, 64, in), c.done)
		if got, err := opot.ParseTLV(out[tlvAt:]); ret != xdpRedirect || err != nil || got != c.want {
			t.Errorf("xdp, metadata done %#x: verdict %d, proof %+v (%v); want %+v", c.done, ret, got, err, c.want)
		}
	}

	// Hop limit 1: the kernel's End decides (Time Exceeded); tc updates
	// the proof first, XDP hands the packet to tc untouched.
	f := e.frame(t, e.travel, 1, in)
	passTC, passXDP := runBoth(1, e.travel)
	if passTC.ret != tcActOK || !bytes.Equal(passTC.out, withTLV(f, want)) {
		t.Errorf("tc, hop limit 1: verdict %d, want %d and the frame with the updated proof", passTC.ret, tcActOK)
	}
	if passXDP.ret != xdpPass || !bytes.Equal(passXDP.out, f) {
		t.Errorf("xdp, hop limit 1: verdict %d, want %d and the frame untouched", passXDP.ret, xdpPass)
	}

	// Layer 2: a broadcast frame is the kernel's End's to forward, with
	// its proof updated; one for another host's MAC is dropped by the
	// kernel, untouched.
	bcast, other2 := e.frame(t, e.travel, 64, in), e.frame(t, e.travel, 64, in)
	copy(bcast, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(other2, []byte{0x02, 0, 0, 0, 0, 0x99})
	if ret, out := e.run(t, bcast, false); ret != tcActOK || !bytes.Equal(out[:len(f)], withTLV(bcast, want)) {
		t.Errorf("tc, broadcast frame: verdict %d, want %d and the proof updated", ret, tcActOK)
	}
	if ret, out := e.run(t, other2, false); ret != tcActOK || !bytes.Equal(out[:len(f)], other2) {
		t.Errorf("tc, another host's frame: verdict %d, want %d and the frame untouched", ret, tcActOK)
	}

	// Another chain (other egress SID) through the same SID: untouched.
	other := []netip.Addr{sidEnd, routed, netip.MustParseAddr("fc00:2::7")}
	oTC, oXDP := runBoth(64, other)
	for name, r := range map[string]result{"tc": oTC, "xdp": oXDP} {
		if got, err := opot.ParseTLV(r.out[tlvAt:]); err != nil || got != in {
			t.Errorf("%s, another chain: proof %+v (%v), want it untouched", name, got, err)
		}
	}

	// Malformed proofs of the chain: no TLV, slot 7, a reserved byte
	// set, two OPoT TLVs, a TLV length that does not tile the SRH. The
	// End updates none of them (the verifier drops and counts them) and
	// otherwise does what an End without OPoT does with them, at tc and
	// XDP (layer 3 on: the two namespaces' MACs differ).
	plain := newTestEnv(t)
	inner := srv6.UDP6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1000, 2000, []byte("opot in the end"))
	encap := func(tlvs ...srv6.TLV) []byte {
		l3, err := srv6.Encap(srcAddr, e.travel, inner, tlvs...)
		if err != nil {
			t.Fatal(err)
		}
		return ether(l3)
	}
	setAt := func(off int, v byte) []byte {
		f := e.frame(t, e.travel, 64, in)
		f[off] = v
		return f
	}
	for name, f := range map[string][]byte{
		"no tlv":     encap(),
		"slot 7":     setAt(tlvAt+2, 7),
		"reserved":   setAt(tlvAt+3, 1),
		"two tlvs":   encap(in.SRv6TLV(), in.SRv6TLV()),
		"bad length": setAt(tlvAt+1, 20),
	} {
		for _, xdp := range []bool{false, true} {
			wantRet, wantOut := plain.run(t, f, xdp)
			ret, out := e.run(t, f, xdp)
			if ret != wantRet || !bytes.Equal(out[14:len(f)], wantOut[14:len(f)]) {
				t.Errorf("%s (xdp %v): verdict %d, want %d; the End with OPoT changed what the plain End gives", name, xdp, ret, wantRet)
			}
		}
	}

	// The updated proof verifies at the end of the chain.
	m, err := opot.Transit(e.f, e.nodes[2], want)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opot.Verify(e.f, e.nodes[3], m); err != nil {
		t.Errorf("the End's proof, after the second transit, does not verify: %v", err)
	}
}

// TestEndOPoTCases runs every End test case through an End loaded with
// the OPoT maps (cfg_opot on): on packets of no OPoT chain it must do
// exactly what the End without them does.
func TestEndOPoTCases(t *testing.T) {
	e := newOPoTEnv(t)
	for _, xdp := range []bool{false, true} {
		for _, tc := range endTestCases(t, e.testEnv) {
			t.Run(tc.name, func(t *testing.T) { e.check(t, tc, xdp) })
		}
	}
}

// pipeDoneOPoT is PIPE_DONE_OPOT (bpf/lib/pipeline.h).
const pipeDoneOPoT = 0x2

// runXDPMeta runs the XDP End on frame behind pipeline metadata (struct
// pipe_meta: cookie, generation, done) as the dispatcher writes it, and
// returns the frame it gives without the metadata.
func (e *opotEnv) runXDPMeta(t *testing.T, frame []byte, done uint16) (uint32, []byte) {
	t.Helper()
	meta := binary.LittleEndian.AppendUint32(nil, 1)
	meta = binary.LittleEndian.AppendUint16(meta, 0)
	meta = binary.LittleEndian.AppendUint16(meta, done)
	in := append(meta, frame...)
	opts := &ebpf.RunOptions{
		Data:    in,
		DataOut: make([]byte, len(in)+256),
		Context: xdpCtx{Data: uint32(len(meta)), DataEnd: uint32(len(in)), IngressIfindex: uint32(e.in)},
	}
	var ret uint32
	if err := e.ns.Do(func() (err error) {
		ret, err = e.end.XDPProgram().Run(opts)
		return err
	}); err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut[len(meta) : len(meta)+len(frame)]
}
