package datapath

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// Operations of bpf/test/encap.c (ENCAP_TEST_*).
const (
	encapOpEncaps = 1
	encapOpDecap  = 2
)

// xdpHeadroom is XDP_PACKET_HEADROOM: what bpf_xdp_adjust_head can
// push in a test run (and on most drivers).
const xdpHeadroom = 256

var (
	encapDstMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	encapSrcMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
	encapSrc    = netip.MustParseAddr("fc00:e::1")
)

func encapEther(etype uint16, l3 []byte) []byte {
	return srv6.Ether(encapDstMAC, encapSrcMAC, etype, l3)
}

func etherOf(l3 []byte) []byte {
	if l3[0]>>4 == 4 {
		return encapEther(srv6.EtherTypeIPv4, l3)
	}
	return encapEther(srv6.EtherTypeIPv6, l3)
}

type encapHarness struct {
	objs encapTestProgObjects
}

func newEncapHarness(t *testing.T) *encapHarness {
	t.Helper()
	requireRoot(t)
	spec, err := loadEncapTestProg()
	if err != nil {
		t.Fatal(err)
	}
	h := &encapHarness{}
	if err := spec.LoadAndAssign(&h.objs, nil); err != nil {
		t.Fatalf("load encap test program: %v", err)
	}
	t.Cleanup(func() { h.objs.Close() })
	return h
}

func (h *encapHarness) configure(t *testing.T, op uint32, travel []netip.Addr) {
	t.Helper()
	var c encapTestProgEncapTestCfg
	c.Op = op
	c.Nsegs = uint32(len(travel))
	c.HopLimit = srv6.DefaultHopLimit
	c.Src.In6U.U6Addr8 = encapSrc.As16()
	for i, a := range travel {
		if i < len(c.Travel) {
			c.Travel[i].In6U.U6Addr8 = a.As16()
		}
	}
	if err := h.objs.EncapTestCfgs.Put(uint32(0), &c); err != nil {
		t.Fatal(err)
	}
}

// run runs frame through the tc or the XDP program and returns whether
// it passed, the output and the drop reason counted (drop.None if none).
func (h *encapHarness) run(t *testing.T, frame []byte, xdp bool) (bool, []byte, drop.Reason) {
	t.Helper()
	before, err := bpfrt.ReadDropCounts(h.objs.DropCounters)
	if err != nil {
		t.Fatal(err)
	}
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+1024)}
	prog, pass := h.objs.SrchainEncapTest, uint32(tcActOK)
	if xdp {
		prog, pass = h.objs.SrchainEncapTestXdp, xdpPass
	}
	ret, err := prog.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	after, err := bpfrt.ReadDropCounts(h.objs.DropCounters)
	if err != nil {
		t.Fatal(err)
	}
	reason := drop.None
	for r := range after {
		if after[r] != before[r] {
			if reason != drop.None {
				t.Fatalf("two drop counters moved: %v and %v", reason, drop.Reason(r))
			}
			reason = drop.Reason(r)
		}
	}
	return ret == pass, opts.DataOut, reason
}

func seq(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.MustParseAddr(fmt.Sprintf("fc00:%x::%x", i+1, i+1))
	}
	return out
}

func encapInners() map[string][]byte {
	s6, d6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	s4, d4 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.2")
	return map[string][]byte{
		"udp6":       srv6.UDP6(s6, d6, 1000, 2000, []byte("srchain encap")),
		"udp4":       srv6.UDP4(s4, d4, 1000, 2000, []byte("srchain encap")),
		"icmp6 1000": srv6.ICMP6EchoData(s6, d6, 7, 1, bytes.Repeat([]byte{0x5a}, 1000)),
		"icmp4 odd":  srv6.ICMP4EchoData(s4, d4, 7, 1, []byte("odd")),
	}
}

// TestEncapsTestRun: srv6_encaps from tc and from XDP writes exactly
// what srv6.Encap (H.Encaps, RFC 8986 5.1) builds.
func TestEncapsTestRun(t *testing.T) {
	h := newEncapHarness(t)
	for name, inner := range encapInners() {
		for _, n := range []int{1, 2, 3, 16} {
			travel := seq(n)
			want, err := srv6.Encap(encapSrc, travel, inner)
			if err != nil {
				t.Fatal(err)
			}
			for _, xdp := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d sids/xdp=%v", name, n, xdp), func(t *testing.T) {
					h.configure(t, encapOpEncaps, travel)
					ok, out, r := h.run(t, etherOf(inner), xdp)
					if xdp && 40+8+16*n > xdpHeadroom {
						// More than XDP's headroom: not possible at XDP.
						if ok || r != drop.AdjustRoom {
							t.Fatalf("passed=%v reason %v, want dropped with adjust-room", ok, r)
						}
						return
					}
					if !ok || r != drop.None {
						t.Fatalf("dropped (%v)", r)
					}
					if w := encapEther(srv6.EtherTypeIPv6, want); !bytes.Equal(out, w) {
						t.Fatalf("output differs from srv6.Encap\n got %x\nwant %x", out, w)
					}
				})
			}
		}
	}
}

// TestEncapsRejects: bad segment counts and non-IP frames are dropped
// and counted.
func TestEncapsRejects(t *testing.T) {
	h := newEncapHarness(t)
	udp := encapInners()["udp6"]
	cases := []struct {
		name   string
		travel []netip.Addr
		frame  []byte
		want   drop.Reason
	}{
		{"no sids", nil, etherOf(udp), drop.Unsupported},
		{"17 sids", seq(17), etherOf(udp), drop.Unsupported},
		{"arp", seq(2), encapEther(0x0806, make([]byte, 28)), drop.Unsupported},
	}
	for _, tc := range cases {
		for _, xdp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/xdp=%v", tc.name, xdp), func(t *testing.T) {
				h.configure(t, encapOpEncaps, tc.travel)
				ok, _, r := h.run(t, tc.frame, xdp)
				if ok || r != tc.want {
					t.Fatalf("passed=%v reason %v, want dropped with %v", ok, r, tc.want)
				}
			})
		}
	}
}

// TestDecapTestRun: srv6_decap from tc and XDP leaves the inner packet
// srv6's builders put in, whatever extension headers precede it.
func TestDecapTestRun(t *testing.T) {
	h := newEncapHarness(t)
	for name, inner := range encapInners() {
		plain := must(srv6.Encap(encapSrc, seq(3), inner))
		reduced := must(srv6.EncapWith(srv6.EncapOptions{HopLimit: 9, ReducedSRH: true}, encapSrc, seq(3), inner))
		tlv := must(srv6.Encap(encapSrc, seq(2), inner, srv6.TLV{Type: 4, Value: make([]byte, 6)}))
		noSRH := must(srv6.EncapWith(srv6.EncapOptions{HopLimit: 64, ReducedSRH: true}, encapSrc, seq(1), inner))
		for oname, outer := range map[string][]byte{
			"srh": plain, "reduced srh": reduced, "srh with tlv": tlv,
			"no srh": noSRH, "hbh + srh": withHBH(plain),
		} {
			for _, xdp := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/xdp=%v", name, oname, xdp), func(t *testing.T) {
					h.configure(t, encapOpDecap, nil)
					ok, out, r := h.run(t, encapEther(srv6.EtherTypeIPv6, outer), xdp)
					if !ok || r != drop.None {
						t.Fatalf("dropped (%v)", r)
					}
					if w := etherOf(inner); !bytes.Equal(out, w) {
						t.Fatalf("output is not the inner packet\n got %x\nwant %x", out, w)
					}
				})
			}
		}
	}
}

// TestDecapRejects: no inner packet, or headers cut short.
func TestDecapRejects(t *testing.T) {
	h := newEncapHarness(t)
	udp := encapInners()["udp6"]
	enc := must(srv6.Encap(encapSrc, seq(2), udp))
	cases := []struct {
		name  string
		frame []byte
		want  drop.Reason
	}{
		{"plain udp6", etherOf(udp), drop.Unsupported},
		{"srh then udp", etherOf(must(srv6.Insert(udp, seq(2)))), drop.Unsupported},
		{"cut in srh", encapEther(srv6.EtherTypeIPv6, enc[:60]), drop.PktTruncated},
		{"cut in inner", encapEther(srv6.EtherTypeIPv6, enc[:40+8+32+20]), drop.PktTruncated},
	}
	for _, tc := range cases {
		for _, xdp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/xdp=%v", tc.name, xdp), func(t *testing.T) {
				h.configure(t, encapOpDecap, nil)
				ok, _, r := h.run(t, tc.frame, xdp)
				if ok || r != tc.want {
					t.Fatalf("passed=%v reason %v, want dropped with %v", ok, r, tc.want)
				}
			})
		}
	}
}

// TestEncapDecapRoundTrip: decap(encaps(p)) == p from both hooks.
func TestEncapDecapRoundTrip(t *testing.T) {
	h := newEncapHarness(t)
	for name, inner := range encapInners() {
		for _, xdp := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/xdp=%v", name, xdp), func(t *testing.T) {
				h.configure(t, encapOpEncaps, seq(5))
				ok, out, r := h.run(t, etherOf(inner), xdp)
				if !ok {
					t.Fatalf("encaps dropped (%v)", r)
				}
				h.configure(t, encapOpDecap, nil)
				ok, out, r = h.run(t, out, xdp)
				if !ok {
					t.Fatalf("decap dropped (%v)", r)
				}
				if w := etherOf(inner); !bytes.Equal(out, w) {
					t.Fatalf("round trip changed the packet\n got %x\nwant %x", out, w)
				}
			})
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
