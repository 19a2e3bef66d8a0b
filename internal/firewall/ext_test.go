package firewall

import (
	"encoding/binary"
	"testing"

	"net/netip"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// withExt inserts an extension header of type typ (body: the bytes after
// next header and length, 6 + 8k long) right after l3's IPv6 header.
func withExt(l3 []byte, typ uint8, body []byte) []byte {
	ext := append([]byte{l3[6], byte((len(body)+2)/8 - 1)}, body...)
	if typ == protoFrag {
		ext[1] = 0 // reserved
	}
	out := append(append(append([]byte(nil), l3[:40]...), ext...), l3[40:]...)
	out[6] = typ
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	return out
}

// frag is a fragment header body: offset in 8-byte units, more flag.
func frag(offset uint16, more bool) []byte {
	b := make([]byte, 6)
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[0:], v)
	binary.BigEndian.PutUint32(b[2:], 0x1234)
	return b
}

// TestBPFExtHeaders: port rules see through Hop-by-Hop, Destination
// Options, Routing and Fragment headers, outer and inner; non-first
// fragments have a protocol and no ports (ip6tables' ipv6_find_hdr), and
// the tcp match alone ("-p tcp -m tcp", xt_tcpudp) never matches them.
func TestBPFExtHeaders(t *testing.T) {
	needRoot(t)
	fw, eg := mustAddr("fc00:2::f1:0"), mustAddr("fc00:3::d6")
	tcp := srv6.TCP6(mustAddr("fc00:1::1"), mustAddr("fc00:d2::1"), 4000, 22, 0x02, nil)
	opts := make([]byte, 6) // PadN of 4 after... all-zero: Pad1 x6
	encap := func(inner []byte) []byte {
		return must(srv6.Encap(mustAddr("fc00:12::1"), []netip.Addr{fw, eg}, inner))
	}
	cases := []struct {
		name          string
		pkt           []byte
		dport, anyTCP bool // dropped by "-p tcp --dport 22", by "-p tcp"
		advDport      bool // advanced mode, "-p tcp --dport 22"
	}{
		{"plain", tcp, true, true, true},
		{"atomic fragment", withExt(tcp, protoFrag, frag(0, false)), true, true, true},
		{"first fragment", withExt(tcp, protoFrag, frag(0, true)), true, true, true},
		{"non-first fragment", withExt(tcp, protoFrag, frag(8, false)), false, true, false},
		{"hbh+dstopts", withExt(withExt(tcp, protoDstOpts, opts), srv6.ProtoHopByHop, opts), true, true, true},
		{"dstopts+fragment", withExt(withExt(tcp, protoFrag, frag(0, false)), protoDstOpts, opts), true, true, true},
		{"encap inner dstopts", encap(withExt(tcp, protoDstOpts, opts)), true, true, false},
		{"encap inner fragment", encap(withExt(tcp, protoFrag, frag(0, false))), true, true, false},
		{"encap inner non-first", encap(withExt(tcp, protoFrag, frag(3, true))), false, true, false},
		{"insert dstopts", must(srv6.Insert(withExt(tcp, protoDstOpts, opts), []netip.Addr{fw, eg})), true, true, true},
		{"outer hbh encap inner frag", withExt(encap(withExt(tcp, protoFrag, frag(0, false))), srv6.ProtoHopByHop, opts), true, true, false},
	}
	for _, rule := range []string{"-p tcp --dport 22 -j DROP", "-p tcp -j DROP", "-p tcp -m tcp -j DROP"} {
		f := loadRules(t, rule, Config{})
		for _, mode := range []Mode{Basic, Advanced} {
			if err := f.SetMode(mode); err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				want := c.dport
				switch {
				case rule == "-p tcp -j DROP" && mode == Basic:
					want = c.anyTCP
				case rule == "-p tcp -j DROP":
					want = c.advDport || c.name == "non-first fragment"
				case mode == Advanced:
					want = c.advDport
				}
				ret, _, reason := run(t, f, c.pkt)
				if (ret == tcActShot) != want {
					t.Errorf("%q %v %s: dropped=%v want %v (reason %v)", rule, mode, c.name, ret == tcActShot, want, reason)
				}
				o := Decide(c.pkt, Config{Mode: mode, Rules: f.cfg.Rules}, 1)
				if (o.Drop != drop.None) != want || o.Drop != reason {
					t.Errorf("%q %v %s: model %v, bpf %v", rule, mode, c.name, o.Drop, reason)
				}
			}
		}
	}
}
