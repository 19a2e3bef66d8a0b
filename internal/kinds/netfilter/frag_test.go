package netfilter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// frag4 splits an IPv4 packet (no options) into pieces of at most size
// payload bytes (a multiple of 8), as ip_do_fragment does: same ID,
// offsets in 8-byte units, MF on all but the last, header checksum fixed.
func frag4(pkt []byte, size int) [][]byte {
	hl := int(pkt[0]&0x0f) * 4
	payload := pkt[hl:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		h := append([]byte(nil), pkt[:hl]...)
		fo := uint16(off / 8)
		if end < len(payload) {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(h[2:], uint16(hl+end-off))
		binary.BigEndian.PutUint16(h[6:], fo)
		binary.BigEndian.PutUint16(h[10:], 0)
		binary.BigEndian.PutUint16(h[10:], srv6.Checksum(h))
		out = append(out, append(h, payload[off:end]...))
	}
	return out
}

// frag6 splits an IPv6 packet (no extension headers) into pieces of at
// most size fragmentable bytes (a multiple of 8), each with a Fragment
// header (RFC 8200 4.5) behind the fixed header; M on all but the last.
func frag6(pkt []byte, size int, id uint32) [][]byte {
	payload := pkt[40:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		h := append([]byte(nil), pkt[:40]...)
		h[6] = srv6.ProtoFragment
		binary.BigEndian.PutUint16(h[4:], uint16(8+end-off))
		fh := make([]byte, 8)
		fh[0] = pkt[6]
		fo := uint16(off)
		if end < len(payload) {
			fo |= 1
		}
		binary.BigEndian.PutUint16(fh[2:], fo)
		binary.BigEndian.PutUint32(fh[4:], id)
		out = append(out, append(append(h, fh...), payload[off:end]...))
	}
	return out
}

// TestBPFFragments runs fragmented inner datagrams through End.AN.NF's
// restore. With conntrack the kernel reassembles the inner datagram
// behind srchain_anf_in (one mark, so one stash slot) and fragments it
// again before srcanf0: every piece must be restored with the slot's
// outer header, and only the last piece consumes the slot (before,
// the first did and the others were dropped as anf-stale, issue 34
// item 4). Without conntrack each fragment has its own slot. IPv4 and
// IPv6, encap and insert mode, also after SNAT rewrote the pieces; each
// restored piece is checked byte for byte against ModelOut, the slot's
// state against MoreFragments.
func TestBPFFragments(t *testing.T) {
	testutil.RequireRoot(t)
	ns, err := netns.Create(fmt.Sprintf("srct-anff%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Delete()
	o, err := Load(0)
	testutil.RequireKernel(t, "tc programs", err)
	defer o.Close()
	if err := o.SetSID(bSID, 16); err != nil {
		t.Fatal(err)
	}
	run := func(prog *ebpf.Program, data []byte, mark uint32) (uint32, []byte, uint32) {
		t.Helper()
		out := make([]byte, len(data)+512)
		ctxOut := testutil.SKB{}
		opts := &ebpf.RunOptions{Data: data, DataOut: out, Context: testutil.SKB{Mark: mark, IngressIfindex: 1, Ifindex: 1}, ContextOut: &ctxOut}
		var ret uint32
		if err := ns.Do(func() (err error) { ret, err = prog.Run(opts); return err }); err != nil {
			t.Fatal(err)
		}
		return ret, opts.DataOut, ctxOut.Mark
	}
	counts := func() (drop.Counts, uint64, uint64) {
		t.Helper()
		d, err := bpfrt.ReadDropCounts(o.DropCounters)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := bpfrt.SumPerCPU(o.AnfStats, StatFragKept)
		if err != nil {
			t.Fatal(err)
		}
		restored, err := bpfrt.SumPerCPU(o.AnfStats, StatRestored)
		if err != nil {
			t.Fatal(err)
		}
		return d, kept, restored
	}
	travel := []netip.Addr{bSID12, bEgr}
	big := bytes.Repeat([]byte("fragment"), 375) // 3000 bytes, as ping -s 3000
	dgram4 := srv6.UDP4(bIn4S, bIn4D, 1000, 53, big)
	dgram6 := srv6.UDP6(bIn6S, bIn6D, 1000, 53, big)
	ins6 := srv6.UDP6(bIn6S, bFinal, 1000, 53, big)
	snat4 := func(p []byte) []byte { // source 10.0.1.99, header checksum fixed
		q := append([]byte(nil), p...)
		copy(q[12:16], netip.MustParseAddr("10.0.1.99").AsSlice())
		binary.BigEndian.PutUint16(q[10:], 0)
		binary.BigEndian.PutUint16(q[10:], srv6.Checksum(q[:20]))
		return q
	}
	snat6 := func(p []byte) []byte {
		q := append([]byte(nil), p...)
		copy(q[8:24], netip.MustParseAddr("fc00:a1::99").AsSlice())
		return q
	}
	hop := func(p []byte) []byte { return set(p, 7, p[7]-1) } // the forwarding's decrement (insert mode)
	for _, tc := range []struct {
		name   string
		pieces [][]byte
		eth    uint16
		insert bool
		nat    func([]byte) []byte
	}{
		{"ipv4", frag4(dgram4, 1480), 0x0800, false, nil},
		{"ipv4 snat", frag4(dgram4, 1480), 0x0800, false, snat4},
		{"ipv4 small pieces", frag4(dgram4, 504), 0x0800, false, nil},
		{"ipv6", frag6(dgram6, 1448, 7), 0x86dd, false, nil},
		{"ipv6 snat", frag6(dgram6, 1448, 8), 0x86dd, false, snat6},
		{"ipv6 insert", frag6(ins6, 1448, 9), 0x86dd, true, hop},
		{"ipv6 insert snat", frag6(ins6, 1448, 10), 0x86dd, true, func(p []byte) []byte { return snat6(hop(p)) }},
	} {
		if len(tc.pieces) < 3 {
			t.Fatalf("%s: %d pieces, want at least 3", tc.name, len(tc.pieces))
		}
		nat := tc.nat
		if nat == nil {
			nat = func(p []byte) []byte { return p }
		}
		// sr is the SR packet carrying piece i into the NF node.
		sr := func(piece []byte) []byte {
			if tc.insert {
				return insertPkt(t, piece, bSID12)
			}
			nh := srv6.ProtoIPv4
			if tc.eth == 0x86dd {
				nh = srv6.ProtoIPv6
			}
			return outer(t, bSID12, 64, nh, travel, 1, piece)
		}
		restore := func(t *testing.T, model In, piece []byte, mark uint32) {
			t.Helper()
			leave := nat(piece)
			_, kept0, rest0 := counts()
			ret, got, _ := run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, tc.eth, leave), mark)
			d, kept, rest := counts()
			if want := ModelOut(model.Stash, leave, tc.insert); !bytes.Equal(got[14:14+len(want)], want) {
				t.Errorf("restored\n got %x\nwant %x", got[14:14+len(want)], want)
			}
			if ret != tcShot || d[drop.ANFNoRoute] == 0 || rest != rest0+1 {
				t.Errorf("verdict %d, drops %v, restored %d -> %d: want restored, then anf-no-route (no route here)", ret, d.NonZero(), rest0, rest)
			}
			wantKept := kept0
			if MoreFragments(leave) {
				wantKept++
			}
			if kept != wantKept {
				t.Errorf("fragments-kept %d -> %d, want %d (more fragments: %v)", kept0, kept, wantKept, MoreFragments(leave))
			}
		}
		t.Run(tc.name+"/reassembled", func(t *testing.T) {
			// conntrack: the datagram is reassembled behind anf_in,
			// keeping the mark of one piece, and fragmented again; every
			// piece of the new fragmentation carries that mark.
			var model In
			var mark uint32
			for i, piece := range tc.pieces {
				p := sr(piece)
				model = ModelIn(p, 16)
				ret, in, m := run(o.SrchainAnfIn, frame(p), 0)
				if ret != tcOK || !bytes.Equal(in[14:14+len(model.Inner)], model.Inner) {
					t.Fatalf("anf_in piece %d: verdict %d, inner differs from the model", i, ret)
				}
				if i == 0 {
					mark = m // ip_frag_reasm keeps the head's skb fields
				}
			}
			model = ModelIn(sr(tc.pieces[0]), 16)
			for i, piece := range tc.pieces {
				if got, want := MoreFragments(piece), i < len(tc.pieces)-1; got != want {
					t.Fatalf("MoreFragments(piece %d) = %v, want %v", i, got, want)
				}
				restore(t, model, piece, mark)
			}
			// The last piece consumed the slot.
			before, _, _ := counts()
			ret, _, _ := run(o.SrchainAnfOut, srv6.Ether(bMAC, bMAC, tc.eth, nat(tc.pieces[0])), mark)
			if d, _, _ := counts(); ret != tcShot || d[drop.ANFStale] != before[drop.ANFStale]+1 {
				t.Errorf("restore after the last piece: verdict %d, anf-stale %d -> %d, want one more", ret, before[drop.ANFStale], d[drop.ANFStale])
			}
		})
		t.Run(tc.name+"/not-reassembled", func(t *testing.T) {
			// No conntrack: each fragment is its own SR packet, slot
			// and restore, with its own outer header.
			for i, piece := range tc.pieces {
				p := sr(piece)
				model := ModelIn(p, 16)
				ret, _, m := run(o.SrchainAnfIn, frame(p), 0)
				if ret != tcOK {
					t.Fatalf("anf_in piece %d: verdict %d", i, ret)
				}
				restore(t, model, piece, m)
			}
		})
	}
}

// TestModelMoreFragments pins MoreFragments on the shapes the restore
// meets: unfragmented, first / middle / last pieces, an atomic fragment,
// a Fragment header behind Hop-by-Hop and Destination Options, and
// truncated packets.
func TestModelMoreFragments(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 2000)
	p4 := frag4(srv6.UDP4(bIn4S, bIn4D, 1, 2, big), 800)
	p6 := frag6(srv6.UDP6(bIn6S, bIn6D, 1, 2, big), 800, 1)
	atomic := frag6(srv6.UDP6(bIn6S, bIn6D, 1, 2, []byte("a")), 800, 2)[0]
	// Hop-by-Hop (8 bytes) and Destination Options (8) before the Fragment header.
	opts := func(p []byte) []byte {
		q := append([]byte(nil), p[:40]...)
		q[6] = srv6.ProtoHopByHop
		hbh := []byte{srv6.ProtoDestOpts, 0, 1, 4, 0, 0, 0, 0}
		do := []byte{srv6.ProtoFragment, 0, 1, 4, 0, 0, 0, 0}
		q = append(append(append(q, hbh...), do...), p[40:]...)
		binary.BigEndian.PutUint16(q[4:], uint16(len(q)-40))
		return q
	}
	for _, tc := range []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"ipv4 unfragmented", srv6.UDP4(bIn4S, bIn4D, 1, 2, nil), false},
		{"ipv4 first", p4[0], true},
		{"ipv4 middle", p4[1], true},
		{"ipv4 last", p4[len(p4)-1], false},
		{"ipv4 DF", set(srv6.UDP4(bIn4S, bIn4D, 1, 2, nil), 6, 0x40), false},
		{"ipv6 unfragmented", srv6.UDP6(bIn6S, bIn6D, 1, 2, nil), false},
		{"ipv6 first", p6[0], true},
		{"ipv6 middle", p6[1], true},
		{"ipv6 last", p6[len(p6)-1], false},
		{"ipv6 atomic", atomic, false},
		{"ipv6 first behind options", opts(p6[0]), true},
		{"ipv6 last behind options", opts(p6[len(p6)-1]), false},
		{"ipv6 truncated", p6[0][:42], false},
		{"short", p4[0][:10], false},
	} {
		if got := MoreFragments(tc.pkt); got != tc.want {
			t.Errorf("%s: MoreFragments = %v, want %v", tc.name, got, tc.want)
		}
	}
}
