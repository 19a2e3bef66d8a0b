package opotdp

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// bypassCase is one packet to (or near) the chain's egress SID and what
// the verifier must do with it.
type bypassCase struct {
	name  string
	frame []byte
	drop  bool // dropped as opot-bypass; else untouched
}

// bypassFrames builds issue 34's bypass shapes, each carrying the TLV of
// a packet whose proof verifies (so only the shape is wrong), and
// packets near the SID that are not its: egress SID fd00:6::1:0/112
// (LOC+FUNCT 112 bits, ARGS 16).
func bypassFrames(t *testing.T, travel []netip.Addr, tlv srv6.TLV) []bypassCase {
	t.Helper()
	egress := travel[len(travel)-1]
	withArgs := netip.MustParseAddr("fd00:6::1:7")
	dst := netip.MustParseAddr("2001:db8::2")
	inner := srv6.UDP6(netip.MustParseAddr("2001:db8::1"), dst, 1000, 2000, []byte("opot"))
	ether := func(l3 []byte) []byte { return srv6.Ether(macA, macB, srv6.EtherTypeIPv6, l3) }
	plain := func(da netip.Addr) []byte {
		l3, err := srv6.EncapWith(srv6.EncapOptions{HopLimit: 64, ReducedSRH: true}, outerSrc, []netip.Addr{da}, inner)
		if err != nil {
			t.Fatal(err)
		}
		return ether(l3)
	}
	const seg0 = ethLen + 40 + 8
	// at: the legitimate last hop (DA = segment[0] = the egress SID, SL 0),
	// then edited.
	at := func(edit func(f []byte)) []byte {
		f := frame(t, travel, len(travel)-1, tlv)
		edit(f)
		return f
	}
	setDA := func(f []byte, a netip.Addr) { b := a.As16(); copy(f[ethLen+24:], b[:]) }
	setSeg0 := func(f []byte, a netip.Addr) { b := a.As16(); copy(f[seg0:], b[:]) }
	var random [16]byte
	rng := rand.New(rand.NewPCG(34, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	short := frame(t, travel, len(travel)-1, tlv)
	return []bypassCase{
		{"no srh", plain(egress), true},
		{"no srh, args", plain(withArgs), true},
		{"sl 0, segment[0] the destination", at(func(f []byte) { setSeg0(f, dst) }), true},
		{"sl 0, segment[0] random", at(func(f []byte) { setSeg0(f, netip.AddrFrom16(random)) }), true},
		{"da and segment[0] with args", at(func(f []byte) { setDA(f, withArgs); setSeg0(f, withArgs) }), true},
		{"da with args", at(func(f []byte) { setDA(f, withArgs) }), true},
		{"segment[0] with args", at(func(f []byte) { setSeg0(f, withArgs) }), true},
		{"sl 1", at(func(f []byte) { f[ethLen+40+3] = 1 }), true},
		{"srh cut short", short[:ethLen+40+8+8], true},
		// Not the chain's egress SID: another function, another
		// locator; left to whoever serves them.
		{"other function", plain(netip.MustParseAddr("fd00:6::2:0")), false},
		{"other locator", plain(netip.MustParseAddr("fd00:7::1:0")), false},
	}
}

// TestEgressBypass: at tc and at XDP, the verifier takes every packet to
// its chain's egress SID prefix (LOC+FUNCT, any ARGS): the shapes the
// kernel's decap route would deliver without a proof (no SRH; SL 0 with
// segment[0] rewritten; the SID with ARGS bits; SL > 0; a short SRH) are
// dropped as opot-bypass, counted per chain and reported on the ring,
// although each carries a TLV that verifies; packets to other SIDs pass
// untouched; the legitimate packet verifies afterwards, and at tc leaves
// with OPOT_MARK_VERIFIED, the mark the driver's rule asks of packets to
// the prefix (a dropped one never gets it).
func TestEgressBypass(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := opot.GenerateFrom(rand.NewChaCha8([32]byte{34}), 3)
	if err != nil {
		t.Fatal(err)
	}
	f := p.Field()
	travel := []netip.Addr{netip.MustParseAddr("fd00:2::1:0"), netip.MustParseAddr("fd00:6::1:0")}
	const id, slot = 7, 0
	params := make([]opot.NodeParams, 3)
	for j := range params {
		if params[j], err = p.Node(j); err != nil {
			t.Fatal(err)
		}
	}
	for _, xdp := range []bool{false, true} {
		name := "tc"
		if xdp {
			name = "xdp"
		}
		t.Run(name, func(t *testing.T) {
			v := newNode(t, id, slot, params[2], travel[1], travel[1])
			if err := PutEgress(&v.objs, netip.MustParsePrefix("fd00:6::1:0/112"), travel[1]); err != nil {
				t.Fatal(err)
			}
			rd, err := ringbuf.NewReader(v.objs.OpotEvents)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			seq := uint64(1)
			legit := func() srv6.TLV {
				m, err := opot.Init(f, params[0], slot, seq<<opot.RandBits|3)
				if err != nil {
					t.Fatal(err)
				}
				if m, err = opot.Transit(f, params[1], m); err != nil {
					t.Fatal(err)
				}
				seq++
				return m.SRv6TLV()
			}
			verify := func(in []byte) (uint32, []byte, uint32) {
				t.Helper()
				out := make([]byte, len(in)+256)
				if xdp {
					opts := &ebpf.RunOptions{Data: in, DataOut: out}
					ret, err := v.objs.SrchainOpotXdp.Run(opts)
					if err != nil {
						t.Fatal(err)
					}
					if ret == xdpPass {
						ret = tcActNext
					} else if ret == xdpDrop {
						ret = tcActShot
					}
					return ret, opts.DataOut, 0
				}
				var ctxOut testutil.SKB
				opts := &ebpf.RunOptions{Data: in, DataOut: out, Context: testutil.SKB{}, ContextOut: &ctxOut}
				ret, err := v.objs.SrchainOpotVerify.Run(opts)
				if err != nil {
					t.Fatal(err)
				}
				return ret, opts.DataOut, ctxOut.Mark
			}
			dropped := uint64(0)
			for _, c := range bypassFrames(t, travel, legit()) {
				ret, out, mark := verify(c.frame)
				switch {
				case c.drop && ret != tcActShot:
					t.Errorf("%s: verdict %d, want drop", c.name, ret)
				case !c.drop && (ret != tcActNext || !bytes.Equal(out[:len(c.frame)], c.frame) || mark != 0):
					t.Errorf("%s: verdict %d, changed %v, mark %#x: want untouched", c.name, ret, !bytes.Equal(out[:len(c.frame)], c.frame), mark)
				case mark&MarkVerified != 0:
					t.Errorf("%s: marked verified", c.name)
				}
				if !c.drop {
					continue
				}
				dropped++
				if n := stats(t, v.objs.OpotStats, id, drop.OPoTBypass); n != dropped {
					t.Errorf("%s: opot-bypass count %d, want %d", c.name, n, dropped)
				}
				rd.SetDeadline(time.Now().Add(time.Second))
				rec, err := rd.Read()
				if err != nil {
					t.Fatalf("%s: no event: %v", c.name, err)
				}
				ev, err := ParseEvent(rec.RawSample)
				if err != nil || ev.Profile != id || ev.Reason != drop.OPoTBypass {
					t.Errorf("%s: event %+v (%v), want opot-bypass of profile %d", c.name, ev, err, id)
				}
			}
			// No other verdict moved: the shapes were judged by shape,
			// before their (valid) proofs.
			for _, r := range []drop.Reason{drop.None, drop.OPoTVerify, drop.OPoTNoTLV, drop.OPoTReplay} {
				if n := stats(t, v.objs.OpotStats, id, r); n != 0 {
					t.Errorf("%s count %d, want 0", r, n)
				}
			}
			// The legitimate packet still verifies, marked at tc.
			in := frame(t, travel, 1, legit())
			ret, out, mark := verify(in)
			if ret != tcActNext || !bytes.Equal(out[:len(in)], in) {
				t.Fatalf("legitimate packet: verdict %d", ret)
			}
			if !xdp && mark&MarkVerified == 0 {
				t.Fatalf("legitimate packet: mark %#x, want %#x set", mark, MarkVerified)
			}
			if n := stats(t, v.objs.OpotStats, id, drop.None); n != 1 {
				t.Fatalf("verified count %d, want 1", n)
			}
			rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
			if _, err := rd.Read(); err == nil {
				t.Fatalf("an event for the legitimate packet")
			}
		})
	}
}
