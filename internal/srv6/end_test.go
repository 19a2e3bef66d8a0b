package srv6

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/srchain/srchain/internal/drop"
)

func TestMutateEnd(t *testing.T) {
	in := UDP6(hostA, hostB, 1, 2, []byte("x"))
	pkt, _ := Encap(tunSrc, chain, in)
	// Walk the whole list: DA follows the travel order, SL and hop limit count down.
	for i := 1; i < len(chain); i++ {
		out, err := MutateEnd(pkt)
		if err != nil {
			t.Fatalf("hop %d: %v", i, err)
		}
		p, err := Decode(out, false)
		if err != nil {
			t.Fatal(err)
		}
		if p.Outer.Dst != chain[i] || int(p.SRH.SegmentsLeft) != len(chain)-1-i || int(p.Outer.HopLimit) != 64-i {
			t.Fatalf("hop %d: outer %+v sl %d", i, p.Outer, p.SRH.SegmentsLeft)
		}
		// Only DA, SL and hop limit change.
		diff := 0
		for j := range out {
			if out[j] != pkt[j] {
				diff++
			}
		}
		if diff > 1+1+16 {
			t.Fatalf("hop %d: %d bytes changed", i, diff)
		}
		pkt = out
	}
	orig := slices.Clone(pkt)
	if _, err := MutateEnd(pkt); !errors.Is(err, ErrSLZero) || Reason(err) != drop.SRHSLZero {
		t.Fatalf("at SL 0: %v", err)
	}
	mustEq(t, "input untouched", pkt, orig)
}

func TestMutateEndDrops(t *testing.T) {
	good, _ := Encap(tunSrc, chain, UDP6(hostA, hostB, 1, 2, []byte("x")))
	const srh = IPv6HeaderLen
	tests := []struct {
		name   string
		pkt    func() []byte
		want   error
		reason drop.Reason
	}{
		{"hop limit 1", func() []byte { b := slices.Clone(good); b[7] = 1; return b }, ErrHopLimit, drop.HopLimit},
		{"hop limit 0", func() []byte { b := slices.Clone(good); b[7] = 0; return b }, ErrHopLimit, drop.HopLimit},
		{"sl 0", func() []byte { b := slices.Clone(good); b[srh+3] = 0; return b }, ErrSLZero, drop.SRHSLZero},
		{"sl over last entry + 1", func() []byte { b := slices.Clone(good); b[srh+3] = 4; return b }, ErrSLOverLast, drop.SRHSLOverLast},
		{"bad type", func() []byte { b := slices.Clone(good); b[srh+2] = 0; return b }, ErrBadRoutingType, drop.SRHBadType},
		{"bad hdr len", func() []byte { b := slices.Clone(good); b[srh+4] = 5; return b }, ErrBadHdrLen, drop.SRHBadLen},
		{"too many segs", func() []byte { b := slices.Clone(good); b[srh+4] = 16; return b }, ErrTooManySegments, drop.SRHTooManySegs},
		{"bad tlv", func() []byte {
			// The TLV's length byte claims 255 bytes in an 8-byte area.
			b, _ := Encap(tunSrc, chain, UDP6(hostA, hostB, 1, 2, []byte("x")), TLV{Type: 0x80, Value: make([]byte, 6)})
			b[srh+8+48+1] = 0xff
			return b
		}, ErrBadTLV, drop.TLVBad},
		{"srh truncated", func() []byte { b := slices.Clone(good)[:srh+30]; b[5] = 30; return b }, ErrTruncated, drop.SRHTruncated},
		{"payload length beyond packet", func() []byte { b := slices.Clone(good); b[4] = 0xff; return b }, ErrTruncated, drop.PktTruncated},
		{"ipv6 truncated", func() []byte { return good[:39] }, ErrTruncated, drop.PktTruncated},
		{"no srh", func() []byte { return UDP6(hostA, hostB, 1, 2, nil) }, ErrNotSRv6, drop.NoSRH},
		{"srh behind too many dest opts", func() []byte {
			b := slices.Clone(good[:IPv6HeaderLen])
			nh := b[6]
			b[6] = ProtoDestOpts
			// MaxExtHeaders + 1 Destination Options headers: the SRH is out
			// of the walk's reach, as in the eBPF srh_locate.
			for range MaxExtHeaders {
				b = append(b, ProtoDestOpts, 0, 1, 4, 0, 0, 0, 0)
			}
			b = append(b, nh, 0, 1, 4, 0, 0, 0, 0)
			b = append(b, good[IPv6HeaderLen:]...)
			b[5] += 8 * (MaxExtHeaders + 1)
			return b
		}, ErrNotSRv6, drop.NoSRH},
		{"ext header cut", func() []byte {
			b := slices.Clone(good[:IPv6HeaderLen+1])
			b[6], b[4], b[5] = ProtoDestOpts, 0, 1
			return b
		}, ErrTruncated, drop.PktTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MutateEnd(tt.pkt())
			if !errors.Is(err, tt.want) || Reason(err) != tt.reason {
				t.Fatalf("err = %v (reason %v), want %v (%v)", err, Reason(err), tt.want, tt.reason)
			}
		})
	}
}

func TestMutateEndBehindExtHeaders(t *testing.T) {
	good, _ := Encap(tunSrc, chain, UDP6(hostA, hostB, 1, 2, nil))
	b := slices.Clone(good[:IPv6HeaderLen])
	b[6] = ProtoHopByHop
	b = append(b, ProtoDestOpts, 0, 1, 4, 0, 0, 0, 0, ProtoRouting, 0, 1, 4, 0, 0, 0, 0)
	b = append(b, good[IPv6HeaderLen:]...)
	b[5] += 16
	out, err := MutateEnd(b)
	if err != nil {
		t.Fatal(err)
	}
	if out[IPv6HeaderLen+16+3] != 1 || out[7] != 63 {
		t.Fatalf("sl %d hop limit %d", out[IPv6HeaderLen+16+3], out[7])
	}
}

func TestReason(t *testing.T) {
	if Reason(nil) != drop.None || Reason(errors.New("x")) != drop.Unsupported {
		t.Fatal("nil / unknown")
	}
}

func TestMutateEndCSID(t *testing.T) {
	block := netip.MustParsePrefix("fc00::/48")
	c1, _ := CSIDContainer(block, 2, 3)
	c2, _ := CSIDContainer(block, 5)
	pkt, _ := Encap(tunSrc, []netip.Addr{c1, c2}, UDP6(hostA, hostB, 1, 2, nil))
	// Shift, shift out (End to c2), then the last container: argument
	// zero and SL 0 -> the End drop.
	wantDA := []string{"fc00:0:0:3::", "fc00:0:0:5::"}
	for i, w := range wantDA {
		out, err := MutateEndCSID(pkt, 48, 16)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		h, _ := ParseIPv6(out)
		if h.Dst != netip.MustParseAddr(w) || h.HopLimit != pkt[7]-1 {
			t.Fatalf("step %d: %+v", i, h)
		}
		pkt = out
	}
	if _, err := MutateEndCSID(pkt, 48, 16); !errors.Is(err, ErrSLZero) {
		t.Fatalf("last: %v", err)
	}
	if _, err := MutateEndCSID(pkt[:30], 48, 16); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short: %v", err)
	}
	if _, err := MutateEndCSID(UDP6(hostA, c1, 1, 2, nil)[:45], 48, 16); !errors.Is(err, ErrTruncated) || Reason(err) != drop.PktTruncated {
		t.Fatalf("payload length: %v", err)
	}
}
