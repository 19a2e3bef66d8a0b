package proxydp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

var (
	l2A = net.HardwareAddr{0x02, 0, 0, 0, 0x0a, 0x01}
	l2B = net.HardwareAddr{0x02, 0, 0, 0, 0x0b, 0x01}
)

// arpFrame is an ARP request from l2A, padded to the Ethernet minimum:
// an L2 service carries what is not IP too.
func arpFrame() []byte {
	p := make([]byte, 46)
	copy(p, []byte{0, 1, 8, 0, 6, 4, 0, 1})
	copy(p[8:], l2A)
	copy(p[14:], []byte{10, 1, 0, 1})
	copy(p[24:], []byte{10, 1, 0, 2})
	return srv6.Ether(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, l2A, 0x0806, p)
}

// runProg feeds frame to prog (tc or XDP) as received on in.
func (e *env) runProg(t *testing.T, prog *ebpf.Program, xdp bool, in int, frame []byte) (uint32, []byte) {
	t.Helper()
	if !xdp {
		return e.run(t, prog, in, frame)
	}
	opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+1024),
		Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: uint32(in)}}
	var ret uint32
	if err := e.ns.Do(func() (err error) { ret, err = prog.Run(opts); return err }); err != nil {
		t.Fatal(err)
	}
	return ret, opts.DataOut
}

// TestL2: End.AS and End.AD with the Ethernet inner type (143), tc and
// XDP, against the model: the inner frame leaves IFACE-OUT as it is; a
// frame from the NF (ARP or IP) goes whole behind the restored header
// and is forwarded by the FIB; the 802.1D link-local group is the
// link's; a restored destination the FIB cannot resolve is dropped at
// tc (proxy-l2-no-route) and passed by XDP.
func TestL2(t *testing.T) {
	e := newEnv(t)
	ipFrame := srv6.Ether(l2B, l2A, EtherIPv4, udp4(64, 7))
	for _, xdp := range []bool{false, true} {
		srProg, nfProg := e.p.SRProgram(), e.p.NFProgram()
		if xdp {
			srProg, nfProg = e.p.XDPProgram(), e.p.NFXDPProgram()
		}
		for _, c := range []struct {
			name   string
			sid    netip.Addr
			travel []netip.Addr
			inner  []byte
		}{
			{"as arp", sidASL2, []netip.Addr{sidASL2, seg6}, arpFrame()},
			{"as ip", sidASL2, []netip.Addr{sidASL2, seg6}, ipFrame},
			{"ad arp", sidADL2, []netip.Addr{sidADL2, seg5, seg6}, arpFrame()},
			{"ad ip", sidADL2, []netip.Addr{sidADL2, seg6}, ipFrame},
		} {
			name := c.name
			if xdp {
				name += " xdp"
			}
			sr, err := srv6.EncapL2(outerSrc, c.travel, c.inner)
			if err != nil {
				t.Fatal(err)
			}
			want := e.m.FromSR(sr)
			if want.Verdict != ToNF || !want.L2 || !bytes.Equal(want.Packet, c.inner) {
				t.Fatalf("%s: model %v %v", name, want.Verdict, want.Reason)
			}
			ret, out := e.runProg(t, srProg, xdp, e.sr, srv6.Ether(e.srMAC, hostMAC, EtherIPv6, sr))
			if (!xdp && ret != tcActRedirect) || (xdp && ret != xdpRedirect) || !bytes.Equal(out[:len(c.inner)], c.inner) {
				t.Errorf("%s sr->nf: verdict %d\n got %x\nwant %x", name, ret, out[:len(c.inner)], c.inner)
			}
			if c.sid == sidADL2 {
				e.checkADCache(t, sidADL2)
			}
			// Back: the frame as the NF bridged it.
			back := e.m.FromNFL2(e.in(c.sid), c.inner)
			if back.Verdict != Forward {
				t.Fatalf("%s: model back %v %v", name, back.Verdict, back.Reason)
			}
			pkt := append([]byte(nil), back.Packet...)
			pkt[7]--
			wantOut := append(append(append([]byte(nil), nhMAC...), e.srMAC...), 0x86, 0xdd)
			wantOut = append(wantOut, pkt...)
			ret, out = e.runProg(t, nfProg, xdp, e.in(c.sid), c.inner)
			if (!xdp && ret != tcActRedirect) || (xdp && ret != xdpRedirect) || !bytes.Equal(out[:len(wantOut)], wantOut) {
				t.Errorf("%s nf->sr: verdict %d\n got %x\nwant %x", name, ret, out[:len(wantOut)], wantOut)
			}
			if nh := pkt[6]; c.sid == sidASL2 && pkt[40] != 143 || c.sid == sidADL2 && nh != 43 {
				t.Errorf("%s: outer stack does not lead to the frame (next header %d)", name, nh)
			}
		}
		// STP's group address: the link's, passed untouched.
		stp := srv6.Ether(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0}, l2A, 0x0026, make([]byte, 46))
		if r := e.m.FromNFL2(e.in(sidASL2), stp); r.Verdict != Pass {
			t.Fatalf("model: stp %v", r.Verdict)
		}
		ret, out := e.runProg(t, nfProg, xdp, e.in(sidASL2), stp)
		if want := map[bool]uint32{false: tcActUnspec, true: xdpPass}[xdp]; ret != want || !bytes.Equal(out[:len(stp)], stp) {
			t.Errorf("stp (xdp %v): verdict %d, want an untouched pass", xdp, ret)
		}
	}
	// No route for the restored destination: tc drops (the stack would
	// read the frame as its inner type), XDP hands it to tc.
	sr, err := srv6.EncapL2(outerSrc, []netip.Addr{sidADL2, noRoute}, ipFrame)
	if err != nil {
		t.Fatal(err)
	}
	e.m.FromSR(sr)
	if ret, _ := e.run(t, e.p.SRProgram(), e.sr, srv6.Ether(e.srMAC, hostMAC, EtherIPv6, sr)); ret != tcActRedirect {
		t.Fatalf("ad no route sr->nf: %d", ret)
	}
	if ret, out := e.runProg(t, e.p.NFXDPProgram(), true, e.in(sidADL2), ipFrame); ret != xdpPass || !bytes.Equal(out[:len(ipFrame)], ipFrame) {
		t.Errorf("no route, xdp: verdict %d, want an untouched pass", ret)
	}
	before, _ := e.p.Drops()
	if ret, _ := e.run(t, e.p.NFProgram(), e.in(sidADL2), ipFrame); ret != tcActShot {
		t.Errorf("no route, tc: verdict %d, want drop", ret)
	}
	after, _ := e.p.Drops()
	if after[drop.ProxyL2NoRoute]-before[drop.ProxyL2NoRoute] != 1 {
		t.Errorf("drop/proxy-l2-no-route moved by %d", after[drop.ProxyL2NoRoute]-before[drop.ProxyL2NoRoute])
	}
	// Payload length covers the whole frame.
	r := e.m.FromNFL2(e.in(sidASL2), ipFrame)
	if got := int(binary.BigEndian.Uint16(r.Packet[4:6])); got != len(r.Packet)-40 {
		t.Errorf("payload length %d, want %d", got, len(r.Packet)-40)
	}
}
