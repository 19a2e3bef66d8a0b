package proxydp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/testutil"
)

// tc verdicts (linux/pkt_cls.h).
const (
	tcActUnspec   = 0xffffffff // TC_ACT_UNSPEC (-1): the next tcx program
	tcActOK       = 0
	tcActShot     = 2
	tcActRedirect = 7
	ethLen        = 14
)

var (
	outerSrc = netip.MustParseAddr("fc00:a::1")
	asSrc    = netip.MustParseAddr("fc00:1::1")
	seg5     = netip.MustParseAddr("fc00:2::5") // routed via nhAddr
	seg6     = netip.MustParseAddr("fc00:2::6")
	noRoute  = netip.MustParseAddr("fc00:9::1")
	nhAddr   = netip.MustParseAddr("fc00:12::2")
	nf6      = netip.MustParseAddr("fc00:99::2")
	nf4      = netip.MustParseAddr("10.99.0.2")
	host6a   = netip.MustParseAddr("2001:db8::1")
	host6b   = netip.MustParseAddr("2001:db8::2")
	host4a   = netip.MustParseAddr("10.1.0.1")
	host4b   = netip.MustParseAddr("10.2.0.1")
	nhMAC    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	nfMAC    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	inMAC    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	hostMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}

	sidAS6    = netip.MustParseAddr("fc00:1::a6")
	sidAS4    = netip.MustParseAddr("fc00:1::a4")
	sidAD6    = netip.MustParseAddr("fc00:1::d6")
	sidAD4    = netip.MustParseAddr("fc00:1::d4")
	sidAM     = netip.MustParseAddr("fc00:1::3")
	sidAMNAT  = netip.MustParseAddr("fc00:1::4")
	sidFlow   = netip.MustParseAddr("fc00:1::f6")
	sidFlow4  = netip.MustParseAddr("fc00:1::f4")
	sidIdle   = netip.MustParseAddr("fc00:1::e")
	sidNoSRH6 = netip.MustParseAddr("fc00:1::a7")
	sidADOPoT = netip.MustParseAddr("fc00:1::d7") // End.AD, IPv6, carries OPoT TLVs
	sidFlowOP = netip.MustParseAddr("fc00:1::f7") // End.AD.flow, IPv4, carries OPoT TLVs
	sidASL2   = netip.MustParseAddr("fc00:1::a2") // End.AS, Ethernet inner
	sidADL2   = netip.MustParseAddr("fc00:1::d2") // End.AD, Ethernet inner
)

type env struct {
	ns    *netns.NS
	p     *Proxy
	m     *Model
	sr    int // SR-facing interface (route to fc00:2::/64 via nhAddr)
	srMAC net.HardwareAddr
	nf    []int            // NF-side interfaces: nf[0] is every SID's IFACE-OUT, nf[i] IFACE-IN of SID i
	nfMAC net.HardwareAddr // nf[0]'s MAC
	sids  map[netip.Addr]SID
	// xdp: steps also go through the XDP twins first.
	xdp bool
	// stage: with xdp, through this dispatcher and the proxy's pipeline
	// stage (srchain_proxy_xdp) instead of the twins.
	stage *ebpf.Program
	// xdpNF counts the packets the NF side's XDP twin forwarded.
	xdpNF int
}

// xdpCtx is struct xdp_md; test runs may set ingress_ifindex.
type xdpCtx struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the proxy loaded over opot, the node's OPoT
// maps (Options.OPoT; nil: none).
func newEnvWith(t *testing.T, opot map[string]*ebpf.Map) *env {
	t.Helper()
	return newEnvOpts(t, Options{OPoT: opot})
}

// newEnvOpts is newEnv with the proxy loaded with o's OPoT and Pipeline.
func newEnvOpts(t *testing.T, o Options) *env {
	t.Helper()
	testutil.RequireRoot(t)
	name := fmt.Sprintf("srct-px-%d", os.Getpid())
	_ = netns.Delete(name)
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	})
	nl := ns.Netlink()
	e := &env{ns: ns, sids: map[netip.Addr]SID{}}
	pair := func(a, b string) (int, int, net.HardwareAddr) {
		if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b, PeerHardwareAddr: hostMAC}); err != nil {
			t.Fatalf("add veth %s: %v", a, err)
		}
		var ids [2]int
		var mac net.HardwareAddr
		for i, n := range []string{a, b} {
			l, err := nl.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := nl.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			ids[i] = l.Attrs().Index
			if i == 0 {
				mac = l.Attrs().HardwareAddr
			}
		}
		return ids[0], ids[1], mac
	}
	pid := os.Getpid() % 100000
	srName := fmt.Sprintf("pxs%da", pid)
	e.sr, _, e.srMAC = pair(srName, fmt.Sprintf("pxs%db", pid))
	for i := 0; i < 7; i++ {
		a, b, mac := pair(fmt.Sprintf("px%dn%da", pid, i), fmt.Sprintf("px%dn%db", pid, i))
		e.nf = append(e.nf, a, b)
		if i == 0 {
			e.nfMAC = mac
		}
	}
	nfOut := fmt.Sprintf("px%dn0a", pid)
	for _, k := range []string{"net.ipv6.conf.all.forwarding", "net.ipv4.ip_forward"} {
		if err := ns.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range [][]string{
		{"ip", "-6", "addr", "add", "fc00:12::1/64", "dev", srName, "nodad"},
		{"ip", "-6", "neigh", "replace", nhAddr.String(), "lladdr", nhMAC.String(), "dev", srName, "nud", "permanent"},
		{"ip", "-6", "route", "add", "fc00:2::/64", "via", nhAddr.String(), "dev", srName},
		// The NFs' addresses behind IFACE-OUT (the XDP twin looks them up).
		{"ip", "-6", "addr", "add", "fc00:99::1/64", "dev", nfOut, "nodad"},
		{"ip", "addr", "add", "10.99.0.1/24", "dev", nfOut},
		{"ip", "-6", "neigh", "replace", nf6.String(), "lladdr", nfMAC.String(), "dev", nfOut, "nud", "permanent"},
		{"ip", "neigh", "replace", nf4.String(), "lladdr", nfMAC.String(), "dev", nfOut, "nud", "permanent"},
	} {
		if _, err := ns.Run(t.Context(), cmd[0], cmd[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	out := e.nf[0]
	sids := []SID{
		{Addr: sidAS6, Behavior: BehaviorAS, OutIfindex: out, InIfindex: e.nf[0], NFNext6: nf6, Inner: ProtoIPv6, Source: asSrc, Segments: []netip.Addr{seg5, seg6}},
		{Addr: sidAS4, Behavior: BehaviorAS, OutIfindex: out, InIfindex: e.nf[1], NFNext4: nf4, Inner: ProtoIPv4, Source: asSrc, Segments: []netip.Addr{seg5}},
		{Addr: sidAD6, Behavior: BehaviorAD, OutIfindex: out, InIfindex: e.nf[2], NFNext6: nf6, Inner: ProtoIPv6},
		{Addr: sidAD4, Behavior: BehaviorAD, OutIfindex: out, InIfindex: e.nf[3], NFNext4: nf4, Inner: ProtoIPv4},
		{Addr: sidAM, Behavior: BehaviorAM, OutIfindex: out, InIfindex: e.nf[4], NFNext6: nf6},
		{Addr: sidAMNAT, Behavior: BehaviorAMNAT, OutIfindex: out, InIfindex: e.nf[5], NFNext6: nf6},
		{Addr: sidFlow, Behavior: BehaviorADFlow, OutIfindex: out, InIfindex: e.nf[6], NFNext6: nf6, Inner: ProtoIPv6, FlowTimeout: time.Hour},
		{Addr: sidFlow4, Behavior: BehaviorADFlow, OutIfindex: out, InIfindex: e.nf[7], Inner: ProtoIPv4},
		{Addr: sidIdle, Behavior: BehaviorADFlow, OutIfindex: out, InIfindex: e.nf[8], Inner: ProtoIPv6, FlowTimeout: time.Millisecond},
		{Addr: sidNoSRH6, Behavior: BehaviorAS, OutIfindex: out, InIfindex: e.nf[9], Inner: ProtoIPv6, Source: asSrc, Segments: []netip.Addr{noRoute}},
		{Addr: sidADOPoT, Behavior: BehaviorAD, OutIfindex: out, InIfindex: e.nf[10], NFNext6: nf6, Inner: ProtoIPv6, OPoT: true},
		{Addr: sidFlowOP, Behavior: BehaviorADFlow, OutIfindex: out, InIfindex: e.nf[11], NFNext4: nf4, Inner: ProtoIPv4, OPoT: true},
		{Addr: sidASL2, Behavior: BehaviorAS, OutIfindex: out, InIfindex: e.nf[12], Inner: ProtoEthernet, Source: asSrc, Segments: []netip.Addr{seg5, seg6}},
		{Addr: sidADL2, Behavior: BehaviorAD, OutIfindex: out, InIfindex: e.nf[13], Inner: ProtoEthernet},
	}
	for _, s := range sids {
		e.sids[s.Addr] = s
	}
	p, err := Load(Options{FlowCapacity: 4096, OPoTStale: time.Hour, OPoT: o.OPoT, Pipeline: o.Pipeline})
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.SetSIDs(sids); err != nil {
		t.Fatal(err)
	}
	e.p = p
	if e.m, err = NewModel(sids); err != nil {
		t.Fatal(err)
	}
	return e
}

// run feeds frame to prog as if received on ifindex in.
func (e *env) run(t *testing.T, prog *ebpf.Program, in int, frame []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{
		Data:    frame,
		DataOut: make([]byte, len(frame)+2048),
		Context: testutil.SKB{IngressIfindex: uint32(in), Ifindex: uint32(in)},
	}
	var ret uint32
	err := e.ns.Do(func() error {
		var err error
		ret, err = prog.Run(opts)
		return err
	})
	if err != nil {
		t.Fatalf("test run of %d bytes %x: %v", len(frame), frame, err)
	}
	return ret, opts.DataOut
}

func ether(etherType uint16, l3 []byte) []byte {
	return srv6.Ether(hostMAC, inMAC, etherType, l3)
}

// step is one packet through one program.
type step struct {
	name      string
	in        int    // 0: the SR side (srchain_proxy_sr); else IFACE-IN
	etherType uint16 // 0: IPv6
	l3        []byte
	want      Verdict
	reason    drop.Reason
	frame     []byte // whole frame instead of l3 (non-IP)
}

// do runs st through the program and the model and compares them; it
// returns the model's result.
func (e *env) do(t *testing.T, st step) Result {
	t.Helper()
	et := st.etherType
	if et == 0 {
		et = EtherIPv6
	}
	frame := st.frame
	if frame == nil {
		frame = ether(et, st.l3)
	}
	var res Result
	prog, in := e.p.SRProgram(), e.sr
	if st.in == 0 {
		if et == EtherIPv6 {
			res = e.m.FromSR(frame[ethLen:])
		} else {
			res = Result{Verdict: Pass}
		}
	} else {
		prog, in = e.p.NFProgram(), st.in
		res = e.m.FromNF(st.in, et, frame[ethLen:])
	}
	if res.Verdict != st.want || res.Reason != st.reason {
		t.Fatalf("%s: model says %v %v, the case wants %v %v", st.name, res.Verdict, res.Reason, st.want, st.reason)
	}
	if e.xdp && st.in == 0 && et == EtherIPv6 {
		e.doXDP(t, st.name, frame)
	}
	if e.xdp && st.in != 0 && e.doXDPNF(t, st.name, st.in, frame, &res) {
		return res // the XDP twin served it: tc never sees it
	}
	before, err := e.p.Drops()
	if err != nil {
		t.Fatal(err)
	}
	ret, out := e.run(t, prog, in, frame)
	after, err := e.p.Drops()
	if err != nil {
		t.Fatal(err)
	}
	dropped := func() {
		for r := range after {
			d := after[r] - before[r]
			want := uint64(0)
			icmpReason := drop.ProxyTTL // from the NF; End's check on the way in says hop-limit
			if res.Reason != drop.None {
				icmpReason = res.Reason
			}
			if drop.Reason(r) == res.Reason && res.Verdict == Drop || res.Verdict == ICMP && drop.Reason(r) == icmpReason {
				want = 1
			}
			if d != want {
				t.Errorf("%s: drop counter %v moved by %d, want %d", st.name, drop.Reason(r), d, want)
			}
		}
	}
	dropped()
	switch res.Verdict {
	case Pass:
		if ret != tcActUnspec || !bytes.Equal(out, frame) {
			t.Errorf("%s: verdict %d, frame changed %v; want untouched pass (TC_ACT_UNSPEC)", st.name, ret, !bytes.Equal(out, frame))
		}
	case Drop:
		if ret != tcActShot {
			t.Errorf("%s: verdict %d, want drop (%v)", st.name, ret, res.Reason)
		}
	case ToNF:
		wantET := uint16(EtherIPv6)
		if res.IPv4 {
			wantET = EtherIPv4
		}
		if ret != tcActRedirect || binary.BigEndian.Uint16(out[12:14]) != wantET || !bytes.Equal(out[ethLen:], res.Packet) {
			t.Errorf("%s: verdict %d type %#x\n got %x\nwant %x", st.name, ret, out[12:14], out[ethLen:], res.Packet)
		}
	case Forward:
		res = e.carried(t, st.name, res, out[ethLen:])
		pkt := append([]byte(nil), res.Packet...)
		da := netip.AddrFrom16([16]byte(pkt[24:40]))
		wantMAC := frame[:12]
		wantRet := uint32(tcActOK)
		if netip.MustParsePrefix("fc00:2::/64").Contains(da) && pkt[7] > 1 {
			pkt[7]--
			wantRet = tcActRedirect
			wantMAC = append(append([]byte(nil), nhMAC...), e.srMAC...)
		}
		if ret != wantRet || !bytes.Equal(out[:12], wantMAC) || binary.BigEndian.Uint16(out[12:14]) != EtherIPv6 || !bytes.Equal(out[ethLen:], pkt) {
			t.Errorf("%s: verdict %d (want %d) macs %x (want %x)\n got %x\nwant %x", st.name, ret, wantRet, out[:12], wantMAC, out[ethLen:], pkt)
		}
	case ICMP:
		wantMAC := append(append([]byte(nil), frame[6:12]...), frame[0:6]...)
		if ret != tcActRedirect || !bytes.Equal(out[:12], wantMAC) || !bytes.Equal(out[ethLen:], res.Packet) {
			t.Errorf("%s: verdict %d macs %x\n got %x\nwant %x", st.name, ret, out[:12], out[ethLen:], res.Packet)
		}
	}
	return res
}

// doXDP runs frame through the XDP twin: what the model sends to an NF
// whose address is configured (the test's FIB resolves it out of
// IFACE-OUT) must come out redirected with the MACs from the FIB and
// the model's bytes; everything else passes to tc untouched, no drop
// counted. The model's caches move only when the twin forwarded.
func (e *env) doXDP(t *testing.T, name string, frame []byte) {
	t.Helper()
	res := e.m.clone().FromSR(frame[ethLen:])
	s, isSID := e.sids[netip.AddrFrom16([16]byte(frame[ethLen+24:ethLen+40]))]
	forward := isSID && res.Verdict == ToNF && (res.IPv4 && s.NFNext4.IsValid() || !res.IPv4 && s.NFNext6.IsValid())
	before, err := e.p.Drops()
	if err != nil {
		t.Fatal(err)
	}
	opts := &ebpf.RunOptions{
		Data:    frame,
		DataOut: make([]byte, len(frame)+256),
		Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: uint32(e.sr)},
	}
	ret, out := e.runXDP(t, name, e.p.XDPProgram(), opts)
	if after, err := e.p.Drops(); err != nil || after != before {
		t.Errorf("%s: xdp counted drops (%v)", name, err)
	}
	if !forward {
		if ret != xdpPass || !bytes.Equal(out, frame) {
			t.Errorf("%s: xdp verdict %d, frame changed %v; want an untouched pass", name, ret, !bytes.Equal(out, frame))
		}
		return
	}
	e.m.FromSR(frame[ethLen:])
	et := uint16(EtherIPv6)
	if res.IPv4 {
		et = EtherIPv4
	}
	want := srv6.Ether(nfMAC, e.nfMAC, et, res.Packet)
	if ret != xdpRedirect || !bytes.Equal(out, want) {
		t.Errorf("%s: xdp verdict %d\n got %x\nwant %x", name, ret, out, want)
	}
}

// runXDP runs twin, or the pipeline (e.stage) in its place, and returns
// the verdict and the frame out (without the pipeline's metadata, which
// test runs return in front of it).
func (e *env) runXDP(t *testing.T, name string, twin *ebpf.Program, opts *ebpf.RunOptions) (uint32, []byte) {
	t.Helper()
	prog := twin
	if e.stage != nil {
		prog = e.stage
	}
	var ret uint32
	if err := e.ns.Do(func() error {
		var err error
		ret, err = prog.Run(opts)
		return err
	}); err != nil {
		t.Fatalf("%s: xdp test run of %s: %v", name, prog, err)
	}
	out := opts.DataOut
	if e.stage != nil {
		if len(out) < pipeMetaLen {
			t.Fatalf("%s: pipeline returned %d bytes, less than its metadata", name, len(out))
		}
		out = out[pipeMetaLen:]
	}
	return ret, out
}

// pipeMetaLen is sizeof(struct pipe_meta) (lib/pipeline.h).
const pipeMetaLen = 8

// doXDPNF runs frame, received from the NF on in, through the NF side's
// XDP twin: a packet the model forwards into SR whose restored
// destination the test's FIB routes (fc00:2::/64, outer hop limit > 1)
// and whose header fits the test run's headroom must come out redirected
// with the FIB's MACs and the model's bytes (outer hop limit - 1);
// everything else passes to tc untouched, no drop counted. Reports
// whether the twin forwarded (the model's caches then move; the caller
// skips tc).
func (e *env) doXDPNF(t *testing.T, name string, in int, frame []byte, res *Result) bool {
	t.Helper()
	forward := false
	var want []byte
	switch res.Verdict {
	case Forward:
		pkt := append([]byte(nil), res.Packet...)
		da := netip.AddrFrom16([16]byte(pkt[24:40]))
		// The pushed header: the packet out less the IP packet in.
		l3 := frame[ethLen:]
		inner := 40 + int(binary.BigEndian.Uint16(l3[4:6]))
		if binary.BigEndian.Uint16(frame[12:14]) == EtherIPv4 {
			inner = int(binary.BigEndian.Uint16(l3[2:4]))
		}
		hlen := len(pkt) - inner
		// XDP test runs leave 256 bytes of headroom, less the room the
		// kernel keeps for struct xdp_frame.
		if netip.MustParsePrefix("fc00:2::/64").Contains(da) && pkt[7] > 1 && hlen <= 200 {
			pkt[7]--
			forward = true
			want = append(append(append([]byte(nil), nhMAC...), e.srMAC...), 0x86, 0xdd)
			want = append(want, pkt...)
		}
	case Pass:
		return false // not the proxy's: the twin passes it (checked below)
	}
	before, err := e.p.Drops()
	if err != nil {
		t.Fatal(err)
	}
	opts := &ebpf.RunOptions{
		Data:    frame,
		DataOut: make([]byte, len(frame)+1024),
		Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: uint32(in)},
	}
	ret, out := e.runXDP(t, name, e.p.NFXDPProgram(), opts)
	if after, err := e.p.Drops(); err != nil || after != before {
		t.Errorf("%s: nf xdp counted drops (%v)", name, err)
	}
	if !forward {
		if ret != xdpPass || !bytes.Equal(out, frame) {
			t.Errorf("%s: nf xdp verdict %d, frame changed %v; want an untouched pass", name, ret, !bytes.Equal(out, frame))
		}
		return false
	}
	if len(out) > ethLen {
		*res = e.carried(t, name, *res, out[ethLen:])
		if res.OPoTAt > 0 {
			copy(want[ethLen+res.OPoTAt-1:], res.Packet[res.OPoTAt-1:res.OPoTAt-1+opot.TLVLen])
		}
	}
	if ret != xdpRedirect || !bytes.Equal(out, want) {
		t.Errorf("%s: nf xdp verdict %d\n got %x\nwant %x", name, ret, out, want)
	}
	e.xdpNF++
	return true
}

// carried reconciles the model with the program's choice among the OPoT
// TLVs kept for the packet of res, a Forward from the NF (Result.OPoTAt;
// identical packets' TLVs are interchangeable): out is the program's L3
// packet. Returns res with the program's TLV, if the model kept it.
func (e *env) carried(t *testing.T, name string, res Result, out []byte) Result {
	t.Helper()
	at := res.OPoTAt - 1
	if res.OPoTAt == 0 || len(out) < at+opot.TLVLen {
		return res
	}
	got := [opot.TLVLen]byte(out[at:])
	if !e.m.OPoTSwap(res, got) {
		t.Errorf("%s: the packet left with OPoT TLV %x, not one kept for it", name, got)
		return res
	}
	res.Packet = append([]byte(nil), res.Packet...)
	copy(res.Packet[at:], got[:])
	return res
}

const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

// toSID is an SRv6 packet from outerSrc over travel (DA = travel[0]).
func toSID(t *testing.T, inner []byte, travel ...netip.Addr) []byte {
	t.Helper()
	p, err := srv6.Encap(outerSrc, travel, inner)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func udp6(hl uint8, sport uint16) []byte {
	p := srv6.UDP6(host6a, host6b, sport, 2000, []byte("proxy payload"))
	p[7] = hl
	return p
}

func udp4(ttl uint8, sport uint16) []byte {
	p := srv6.UDP4(host4a, host4b, sport, 2000, []byte("proxy payload"))
	p[8] = ttl
	binary.BigEndian.PutUint16(p[10:12], 0)
	binary.BigEndian.PutUint16(p[10:12], srv6.Checksum(p[:20]))
	return p
}

// nfForward is what a forwarding NF sends back: the packet with its hop
// limit / TTL decremented (IPv4: checksum recomputed).
func nfForward(p []byte) []byte {
	q := append([]byte(nil), p...)
	if q[0]>>4 == 6 {
		q[7]--
		return q
	}
	q[8]--
	binary.BigEndian.PutUint16(q[10:12], 0)
	binary.BigEndian.PutUint16(q[10:12], srv6.Checksum(q[:20]))
	return q
}

func mutate(p []byte, f func([]byte)) []byte {
	q := append([]byte(nil), p...)
	f(q)
	return q
}

const srhOff = 40 // SRH right behind the outer header in toSID packets

func (e *env) in(sid netip.Addr) int { return e.sids[sid].InIfindex }

// TestRoundTrips runs each behaviour both ways through the programs and
// the model: SR -> NF (decapsulated, or End.AM's DA = SRH[0]), then the
// NF's forwarded packet back (header restored, End done, FIB redirect to
// the next SID or the stack when no route).
func TestRoundTrips(t *testing.T) {
	e := newEnv(t)
	travel := []netip.Addr{seg5, seg6}

	// End.AS, IPv6 inner, pushed SRH of two segments.
	r := e.do(t, step{name: "as6 sr->nf", l3: toSID(t, udp6(64, 1), sidAS6, noRoute), want: ToNF})
	e.do(t, step{name: "as6 nf->sr", in: e.in(sidAS6), l3: nfForward(r.Packet), want: Forward})
	// End.AS without any SRH on the way in (an SRH is optional for End.AS).
	noSRH, err := srv6.EncapWith(srv6.EncapOptions{HopLimit: 64, ReducedSRH: true}, outerSrc, []netip.Addr{sidAS6}, udp6(64, 2))
	if err != nil {
		t.Fatal(err)
	}
	e.do(t, step{name: "as6 sr->nf without srh", l3: noSRH, want: ToNF})
	// End.AS, IPv4 inner, one segment: plain IPv6 encapsulation.
	r = e.do(t, step{name: "as4 sr->nf", l3: toSID(t, udp4(64, 1), sidAS4, seg6), want: ToNF})
	e.do(t, step{name: "as4 nf->sr (no srh)", in: e.in(sidAS4), etherType: EtherIPv4, l3: nfForward(r.Packet), want: Forward})
	e.do(t, step{name: "as one segment without route -> stack", in: e.in(sidNoSRH6), l3: udp6(9, 3), want: Forward})

	// End.AD, IPv6: cache written, restored on the way back.
	e.do(t, step{name: "ad6 nf->sr before any cache", in: e.in(sidAD6), l3: udp6(64, 1), want: Drop, reason: drop.ProxyNoCache})
	r = e.do(t, step{name: "ad6 sr->nf", l3: toSID(t, udp6(64, 1), append([]netip.Addr{sidAD6}, travel...)...), want: ToNF})
	e.checkADCache(t, sidAD6)
	e.do(t, step{name: "ad6 nf->sr", in: e.in(sidAD6), l3: nfForward(r.Packet), want: Forward})
	// A second packet with the same header (cache not rewritten) and a
	// longer one (payload length fixed up on restore).
	big := srv6.UDP6(host6a, host6b, 5, 6, bytes.Repeat([]byte{7}, 900))
	r = e.do(t, step{name: "ad6 sr->nf big", l3: toSID(t, big, append([]netip.Addr{sidAD6}, travel...)...), want: ToNF})
	e.do(t, step{name: "ad6 nf->sr big", in: e.in(sidAD6), l3: nfForward(r.Packet), want: Forward})
	// SL = 1: the next SID is the last one.
	r = e.do(t, step{name: "ad6 sr->nf last", l3: toSID(t, udp6(64, 1), sidAD6, seg6), want: ToNF})
	e.checkADCache(t, sidAD6)
	e.do(t, step{name: "ad6 nf->sr last", in: e.in(sidAD6), l3: nfForward(r.Packet), want: Forward})
	// End.AD, IPv4 inner.
	r = e.do(t, step{name: "ad4 sr->nf", l3: toSID(t, udp4(64, 1), append([]netip.Addr{sidAD4}, travel...)...), want: ToNF})
	e.checkADCache(t, sidAD4)
	e.do(t, step{name: "ad4 nf->sr", in: e.in(sidAD4), etherType: EtherIPv4, l3: nfForward(r.Packet), want: Forward})
	// IPv4 with Ethernet padding behind it: trimmed before the push.
	padded := append(nfForward(r.Packet), make([]byte, 18)...)
	e.do(t, step{name: "ad4 nf->sr padded", in: e.in(sidAD4), etherType: EtherIPv4, l3: padded, want: Forward})

	// End.AM: DA = SRH[0] towards the NF; back: SL - 1, DA = SRH[SL].
	r = e.do(t, step{name: "am sr->nf", l3: toSID(t, udp6(64, 1), sidAM, seg5), want: ToNF})
	e.do(t, step{name: "am nf->sr", in: e.in(sidAM), l3: nfForward(r.Packet), want: Forward})
	r = e.do(t, step{name: "am sr->nf 3 segs", l3: toSID(t, udp6(64, 1), sidAM, seg5, seg6), want: ToNF})
	e.do(t, step{name: "am nf->sr 3 segs", in: e.in(sidAM), l3: nfForward(r.Packet), want: Forward})
	// End.AM with NAT: the NF rewrote the DA (SRH[0]).
	r = e.do(t, step{name: "am-nat sr->nf", l3: toSID(t, udp6(64, 1), sidAMNAT, seg6), want: ToNF})
	nat := mutate(nfForward(r.Packet), func(q []byte) { a := seg5.As16(); copy(q[24:40], a[:]) })
	e.do(t, step{name: "am-nat nf->sr", in: e.in(sidAMNAT), l3: nat, want: Forward})
	r = e.do(t, step{name: "am-nat sr->nf 3 segs", l3: toSID(t, udp6(64, 1), sidAMNAT, seg5, seg6), want: ToNF})
	e.do(t, step{name: "am-nat nf->sr 3 segs", in: e.in(sidAMNAT), l3: mutate(nfForward(r.Packet), func(q []byte) { q[39] = 0x77 }), want: Forward})

	// End.AD.flow: per flow; another flow misses.
	r = e.do(t, step{name: "flow6 sr->nf a", l3: toSID(t, udp6(64, 100), append([]netip.Addr{sidFlow}, travel...)...), want: ToNF})
	r2 := e.do(t, step{name: "flow6 sr->nf b", l3: toSID(t, udp6(64, 200), sidFlow, seg6), want: ToNF})
	e.checkFlow(t, sidFlow, r.Packet)
	e.do(t, step{name: "flow6 nf->sr a", in: e.in(sidFlow), l3: nfForward(r.Packet), want: Forward})
	e.do(t, step{name: "flow6 nf->sr b", in: e.in(sidFlow), l3: nfForward(r2.Packet), want: Forward})
	e.do(t, step{name: "flow6 nf->sr unknown flow", in: e.in(sidFlow), l3: udp6(63, 300), want: Drop, reason: drop.ProxyFlowMiss})
	// The NF rewrote the source port (NAT): a miss (documented).
	e.do(t, step{name: "flow6 nf->sr natted", in: e.in(sidFlow), l3: mutate(nfForward(r.Packet), func(q []byte) { q[41] = 99 }), want: Drop, reason: drop.ProxyFlowMiss})
	// Protocol is in the key: same addresses and ports, TCP instead of UDP.
	tcp := srv6.TCP6(host6a, host6b, 100, 2000, 0x02, nil)
	e.do(t, step{name: "flow6 nf->sr other protocol", in: e.in(sidFlow), l3: tcp, want: Drop, reason: drop.ProxyFlowMiss})
	r = e.do(t, step{name: "flow4 sr->nf", l3: toSID(t, udp4(64, 7), sidFlow4, seg5), want: ToNF})
	e.do(t, step{name: "flow4 nf->sr", in: e.in(sidFlow4), etherType: EtherIPv4, l3: nfForward(r.Packet), want: Forward})
	// Idle entry (timeout 1 ms): a miss.
	r = e.do(t, step{name: "idle sr->nf", l3: toSID(t, udp6(64, 1), sidIdle, seg5), want: ToNF})
	time.Sleep(20 * time.Millisecond)
	e.m.Now += time.Second
	e.do(t, step{name: "idle nf->sr", in: e.in(sidIdle), l3: nfForward(r.Packet), want: Drop, reason: drop.ProxyFlowMiss})

	// One-armed: a packet to a SID arriving on an IFACE-IN is SR -> NF.
	e.do(t, step{name: "sr packet on iface-in", in: e.in(sidAD4), l3: toSID(t, udp6(64, 1), sidAD6, seg5), want: ToNF})

	c, err := e.p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]uint64{
		"sid/" + sidAD6.String() + "/to-nf":       4,
		"sid/" + sidAD6.String() + "/from-nf":     3,
		"sid/" + sidAD6.String() + "/cache-miss":  1,
		"sid/" + sidAD6.String() + "/cache-hit":   3,
		"sid/" + sidAD6.String() + "/cache-write": 3, // first, "last" and the one-armed packet: 3 headers
		"sid/" + sidFlow.String() + "/cache-miss": 3,
		"drop/proxy-no-cache":                     1,
		"drop/proxy-flow-miss":                    4,
	} {
		if c[k] != want {
			t.Errorf("counter %s = %d, want %d", k, c[k], want)
		}
	}
}

// checkADCache compares the program's cached header with the model's.
func (e *env) checkADCache(t *testing.T, sid netip.Addr) {
	t.Helper()
	in := e.in(sid)
	want, ok := e.m.ADCache(in)
	if !ok {
		t.Fatalf("model has no cache for %s", sid)
	}
	var h proxyProgProxyHdr
	if err := e.p.objs.ProxyAdCache.Lookup(uint32(in), &h); err != nil {
		t.Fatalf("cache of %s: %v", sid, err)
	}
	if !bytes.Equal(h.Hdr[:h.Len], want) {
		t.Errorf("cache of %s:\n got %x\nwant %x", sid, h.Hdr[:h.Len], want)
	}
}

// checkFlow compares the program's flow entry of the inner packet with
// the model's.
func (e *env) checkFlow(t *testing.T, sid netip.Addr, inner []byte) {
	t.Helper()
	s := e.sids[sid]
	want, slot, _, ok := e.m.Flow(s, inner)
	if !ok {
		t.Fatalf("model has no flow")
	}
	got, gotSlot, ok := e.flowHdr(t, sid, inner)
	if !ok {
		t.Fatalf("flow entry of %s: none or its slot holds another generation", sid)
	}
	if !bytes.Equal(got, want) || gotSlot != slot {
		t.Errorf("flow entry (slot %d, model %d):\n got %x\nwant %x", gotSlot, slot, got, want)
	}
}

// flowHdr is the program's flow entry of the inner packet: the header it
// pushes (its slot's stack with the flow's first word), the slot within
// the SID's table; ok false when none or the slot's generation differs.
func (e *env) flowHdr(t *testing.T, sid netip.Addr, inner []byte) (hdr []byte, slot uint32, ok bool) {
	t.Helper()
	s := e.sids[sid]
	k, _ := flowKey(sid, inner, s.Inner)
	bk := proxyProgProxyFlowKey{Sid: e.p.sids[sid], Family: k.Family, Proto: k.Proto, Sport: htons(k.Sport), Dport: htons(k.Dport)}
	copy(bk.Src.In6U.U6Addr8[:], k.Src.AsSlice())
	copy(bk.Dst.In6U.U6Addr8[:], k.Dst.AsSlice())
	var f proxyProgProxyFlow
	if err := e.p.objs.ProxyFlows.Lookup(&bk, &f); err != nil {
		return nil, 0, false
	}
	if f.LastNs == 0 || f.Slot/hdrSlots != e.p.sids[sid] {
		t.Errorf("flow entry of %s: last %d, slot %d (SID entry %d)", sid, f.LastNs, f.Slot, e.p.sids[sid])
	}
	var h proxyProgProxyHdr
	if err := e.p.objs.ProxyHslots.Lookup(f.Slot, &h); err != nil || uint32(h.Gen) != f.Gen {
		return nil, 0, false
	}
	hdr = append([]byte(nil), h.Hdr[:h.Len]...)
	binary.NativeEndian.PutUint32(hdr[:4], f.Word0)
	return hdr, f.Slot % hdrSlots, true
}

// TestMalformed: every malformed or refused packet, both directions.
func TestMalformed(t *testing.T) {
	e := newEnv(t)
	valid := toSID(t, udp6(64, 1), sidAD6, seg5, seg6)
	ad := func(name string, p []byte, r drop.Reason) step {
		return step{name: name, l3: p, want: Drop, reason: r}
	}
	steps := []step{
		ad("no srh", noSRHTo(t, sidAD6), drop.NoSRH),
		ad("sl 0", mutate(valid, func(q []byte) { q[srhOff+3] = 0 }), drop.SRHSLZero),
		ad("sl > last entry + 1", mutate(valid, func(q []byte) { q[srhOff+3] = 4 }), drop.SRHSLOverLast),
		ad("bad hdr len", mutate(valid, func(q []byte) { q[srhOff+1] = 3 }), drop.SRHBadLen),
		ad("bad routing type", mutate(valid, func(q []byte) { q[srhOff+2] = 3 }), drop.SRHBadType),
		ad("too many segments", mutate(valid, func(q []byte) { q[srhOff+4] = 16 }), drop.SRHTooManySegs),
		ad("srh longer than the packet", mutate(valid, func(q []byte) { q[srhOff+1] = 200 }), drop.SRHTruncated),
		ad("cut in the srh", valid[:srhOff+20], drop.PktTruncated),
		ad("payload length beyond the frame", mutate(valid, func(q []byte) { q[4]++ }), drop.PktTruncated),
		ad("inner truncated", valid[:len(valid)-len(udp6(64, 1))+10], drop.PktTruncated),
		ad("wrong inner (ipv4 to an ipv6 sid)", toSID(t, udp4(64, 1), sidAD6, seg5), drop.ProxyWrongInner),
		ad("wrong inner (ipv6 to an ipv4 sid)", toSID(t, udp6(64, 1), sidAD4, seg5), drop.ProxyWrongInner),
		ad("as wrong inner", toSID(t, udp4(64, 1), sidAS6, seg5), drop.ProxyWrongInner),
		ad("as bad srh", mutate(toSID(t, udp6(64, 1), sidAS6, seg5), func(q []byte) { q[srhOff+2] = 0 }), drop.SRHBadType),
		ad("am sl 0", mutate(toSID(t, udp6(64, 1), sidAM, seg5), func(q []byte) { q[srhOff+3] = 0 }), drop.SRHSLZero),
		ad("am no srh", noSRHTo(t, sidAM), drop.NoSRH),
		ad("flow sl 0", mutate(toSID(t, udp6(64, 1), sidFlow, seg5), func(q []byte) { q[srhOff+3] = 0 }), drop.SRHSLZero),
		ad("bad tlv", mutate(withTLVs(t, sidAD6), func(q []byte) { q[srhOff+8+32+1] = 9 }), drop.TLVBad),

		// NF -> SR.
		{name: "hop limit 1 -> icmp time exceeded", in: e.in(sidAS6), l3: udp6(1, 1), want: ICMP},
		{name: "hop limit 0 -> icmp time exceeded", in: e.in(sidAS6), l3: udp6(0, 1), want: ICMP},
		{name: "ttl 1 dropped", in: e.in(sidAS4), etherType: EtherIPv4, l3: udp4(1, 1), want: Drop, reason: drop.ProxyTTL},
		{name: "ipv4 on an ipv6 iface-in", in: e.in(sidAD6), etherType: EtherIPv4, l3: udp4(64, 1), want: Drop, reason: drop.ProxyWrongInner},
		{name: "ipv6 on an ipv4 iface-in", in: e.in(sidAD4), l3: udp6(64, 1), want: Drop, reason: drop.ProxyWrongInner},
		{name: "ipv4 on am", in: e.in(sidAM), etherType: EtherIPv4, l3: udp4(64, 1), want: Drop, reason: drop.ProxyWrongInner},
		{name: "am back without srh", in: e.in(sidAM), l3: udp6(64, 1), want: Drop, reason: drop.NoSRH},
		{name: "am back sl 0", in: e.in(sidAM), l3: mutate(toSID(t, udp6(64, 1), seg5, seg6), func(q []byte) { q[srhOff+3] = 0 }), want: Drop, reason: drop.SRHSLZero},
		{name: "am back hop limit 1", in: e.in(sidAM), l3: mutate(toSID(t, udp6(64, 1), seg5, seg6), func(q []byte) { q[7] = 1 }), want: ICMP},
		{name: "am back bad type", in: e.in(sidAM), l3: mutate(toSID(t, udp6(64, 1), seg5, seg6), func(q []byte) { q[srhOff+2] = 2 }), want: Drop, reason: drop.SRHBadType},
		{name: "ipv6 payload length beyond the frame", in: e.in(sidAS6), l3: udp6(64, 1)[:50], want: Drop, reason: drop.PktTruncated},
		{name: "ipv4 total length beyond the frame", in: e.in(sidAS4), etherType: EtherIPv4, l3: udp4(64, 1)[:30], want: Drop, reason: drop.PktTruncated},
		{name: "ipv4 ihl 4", in: e.in(sidAS4), etherType: EtherIPv4, l3: mutate(udp4(64, 1), func(q []byte) { q[0] = 0x44 }), want: Drop, reason: drop.PktTruncated},
		{name: "ipv4 ihl beyond total length", in: e.in(sidAS4), etherType: EtherIPv4, l3: mutate(udp4(64, 1), func(q []byte) { q[0] = 0x4f; q[2], q[3] = 0, 40 }), want: Drop, reason: drop.PktTruncated},
		{name: "flow miss", in: e.in(sidFlow), l3: udp6(64, 1), want: Drop, reason: drop.ProxyFlowMiss},
		{name: "ad4 cache empty", in: e.in(sidAD4), etherType: EtherIPv4, l3: udp4(64, 1), want: Drop, reason: drop.ProxyNoCache},

		// Control traffic on IFACE-IN and foreign packets pass untouched.
		{name: "neighbour solicitation", in: e.in(sidAD6), l3: icmp6(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1:ff00:2"), 135), want: Pass},
		{name: "neighbour advertisement global", in: e.in(sidAD6), l3: icmp6(host6a, host6b, 136), want: Pass},
		{name: "router solicitation", in: e.in(sidAD6), l3: icmp6(host6a, netip.MustParseAddr("ff02::2"), 133), want: Pass},
		{name: "mld report", in: e.in(sidAD6), l3: icmp6(host6a, host6b, 143), want: Pass},
		{name: "link-local unicast", in: e.in(sidAD6), l3: srv6.UDP6(netip.MustParseAddr("fe80::1"), host6b, 1, 2, nil), want: Pass},
		{name: "ipv4 broadcast", in: e.in(sidAD4), etherType: EtherIPv4, l3: srv6.UDP4(host4a, netip.MustParseAddr("255.255.255.255"), 67, 68, nil), want: Pass},
		{name: "ipv4 multicast", in: e.in(sidAD4), etherType: EtherIPv4, l3: srv6.UDP4(host4a, netip.MustParseAddr("224.0.0.5"), 1, 2, nil), want: Pass},
		{name: "arp", in: e.in(sidAD4), etherType: 0x0806, frame: ether(0x0806, make([]byte, 28)), want: Pass},
		{name: "interface that is no iface-in", in: e.sr, l3: udp6(64, 1), want: Pass},
		{name: "sr side: not a sid", l3: toSID(t, udp6(64, 1), seg5, seg6), want: Pass},
		{name: "sr side: ipv4", etherType: EtherIPv4, l3: udp4(64, 1), want: Pass},
	}
	for _, st := range steps {
		e.do(t, st)
	}
}

// noSRHTo is an IPv6-in-IPv6 packet to sid without an SRH.
func noSRHTo(t *testing.T, sid netip.Addr) []byte {
	t.Helper()
	p, err := srv6.EncapWith(srv6.EncapOptions{HopLimit: 64, ReducedSRH: true}, outerSrc, []netip.Addr{sid}, udp6(64, 1))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withTLVs is a packet to sid over seg5 with an 8-byte TLV area.
func withTLVs(t *testing.T, sid netip.Addr) []byte {
	t.Helper()
	p, err := srv6.Encap(outerSrc, []netip.Addr{sid, seg5}, udp6(64, 1), srv6.TLV{Type: 0x80, Value: make([]byte, 6)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func icmp6(src, dst netip.Addr, typ uint8) []byte {
	body := make([]byte, 24)
	body[0] = typ
	binary.BigEndian.PutUint16(body[2:4], srv6.L4Checksum(src, dst, 58, body))
	h := srv6.IPv6{PayloadLen: uint16(len(body)), NextHeader: 58, HopLimit: 255, Src: src, Dst: dst}
	return append(h.AppendTo(nil), body...)
}

// TestXDP runs the SR -> NF cases through the XDP twin before tc: the
// NFs with a configured address are served there (MACs from the FIB),
// the others (End.AS/AD without next hop, malformed packets) pass to tc
// untouched, which gives the same results as without the twin.
func TestXDP(t *testing.T) {
	e := newEnv(t)
	e.xdp = true
	xdpSteps(t, e)
}

// TestXDPStage: the proxy's stage of the node's XDP pipeline, reached
// through the dispatcher, does what the twins do (xdpSteps), on the
// IFACE-INs and the SR-side interfaces only (elsewhere a packet to a
// proxy SID goes on to the next stage untouched, as no tc proxy program
// is attached there), and the pipeline counts what it did.
func TestXDPStage(t *testing.T) {
	m, err := pipeline.OpenMaps("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e := newEnvOpts(t, Options{Pipeline: m.Replacements()})
	disp, err := pipeline.LoadDispatcher(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { disp.Close() })
	if err := m.Set(map[pipeline.Stage]*ebpf.Program{pipeline.Proxy: e.p.StageProgram()}); err != nil {
		t.Fatal(err)
	}
	e.xdp, e.stage = true, disp

	// Not an SR-side interface: nothing of the proxy's there.
	if err := e.p.SetSRSide(nil); err != nil {
		t.Fatal(err)
	}
	f := ether(EtherIPv6, toSID(t, udp6(64, 1), sidAD6, seg5))
	opts := &ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+256), Context: xdpCtx{DataEnd: uint32(len(f)), IngressIfindex: uint32(e.sr)}}
	before, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ret, out := e.runXDP(t, "not sr side", nil, opts); ret != xdpPass || !bytes.Equal(out, f) {
		t.Errorf("not sr side: verdict %d, frame changed %v; want an untouched pass", ret, !bytes.Equal(out, f))
	}
	after, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range after {
		if want := before[k] + map[bool]uint64{true: 1}[k == "stage/proxy/next"]; v != want {
			t.Errorf("not sr side: %s %d, want %d", k, v, want)
		}
	}
	if after["stage/proxy/next"] != before["stage/proxy/next"]+1 {
		t.Errorf("not sr side: stats %v -> %v, want one stage/proxy/next more", before, after)
	}
	if got, err := e.p.SRSide(); err != nil || len(got) != 0 {
		t.Errorf("sr side %v (%v), want none", got, err)
	}

	if err := e.p.SetSRSide([]int{e.sr}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.p.SRSide(); err != nil || len(got) != 1 || got[0] != e.sr {
		t.Errorf("sr side %v (%v), want [%d]", got, err, e.sr)
	}
	xdpSteps(t, e)
	stats, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// 10 packets forwarded back, every SR step forwarded to the NF but
	// the one without an NF address, and the pass-throughs counted.
	if stats["stage/proxy/redirect"] < 20 || stats["stage/proxy/pass"] == 0 || stats["stage/proxy/next"] < 2 {
		t.Errorf("pipeline stats %v: want the proxy stage's redirects, passes and nexts", stats)
	}
}

// xdpSteps runs the XDP cases of TestXDP and TestXDPStage.
func xdpSteps(t *testing.T, e *env) {
	travel := []netip.Addr{seg5, seg6}
	noSRH, err := srv6.EncapWith(srv6.EncapOptions{HopLimit: 64, ReducedSRH: true}, outerSrc, []netip.Addr{sidAS6}, udp6(64, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []step{
		{name: "as6", l3: toSID(t, udp6(64, 1), sidAS6, noRoute), want: ToNF},
		{name: "as6 without srh", l3: noSRH, want: ToNF},
		{name: "as4", l3: toSID(t, udp4(64, 1), sidAS4, seg6), want: ToNF},
		{name: "ad6", l3: toSID(t, udp6(64, 1), append([]netip.Addr{sidAD6}, travel...)...), want: ToNF},
		{name: "ad6 destopts", l3: withDestOpts(toSID(t, udp6(64, 1), sidAD6, seg5, seg6), 16), want: ToNF},
		{name: "ad4", l3: toSID(t, udp4(64, 1), sidAD4, seg5), want: ToNF},
		{name: "am", l3: toSID(t, udp6(64, 1), sidAM, seg5, seg6), want: ToNF},
		{name: "am nat", l3: toSID(t, udp6(64, 1), sidAMNAT, seg6), want: ToNF},
		{name: "flow6", l3: toSID(t, udp6(64, 9), sidFlow, seg5), want: ToNF},
		{name: "flow4 (no nf address: tc)", l3: toSID(t, udp4(64, 9), sidFlow4, seg5), want: ToNF},
		{name: "sl 0", l3: mutate(toSID(t, udp6(64, 1), sidAD6, seg5), func(q []byte) { q[srhOff+3] = 0 }), want: Drop, reason: drop.SRHSLZero},
		{name: "wrong inner", l3: toSID(t, udp4(64, 1), sidAD6, seg5), want: Drop, reason: drop.ProxyWrongInner},
		{name: "bad type", l3: mutate(toSID(t, udp6(64, 1), sidAM, seg5), func(q []byte) { q[srhOff+2] = 1 }), want: Drop, reason: drop.SRHBadType},
		{name: "not a sid", l3: toSID(t, udp6(64, 1), seg5), want: Pass},
		// End's hop limit check: the XDP side passes them to tc, which
		// sends the Time Exceeded (issue 34 item 5).
		{name: "ad6 hop limit 1", l3: mutate(toSID(t, udp6(64, 1), sidAD6, seg5), func(q []byte) { q[7] = 1 }), want: ICMP, reason: drop.HopLimit},
		{name: "flow6 hop limit 0", l3: mutate(toSID(t, udp6(64, 9), sidFlow, seg5), func(q []byte) { q[7] = 0 }), want: ICMP, reason: drop.HopLimit},
		{name: "am hop limit 1", l3: mutate(toSID(t, udp6(64, 1), sidAM, seg5, seg6), func(q []byte) { q[7] = 1 }), want: ICMP, reason: drop.HopLimit},
		{name: "as6 hop limit 1 (no check: End.AS terminates the outer header)", l3: mutate(toSID(t, udp6(64, 1), sidAS6, noRoute), func(q []byte) { q[7] = 1 }), want: ToNF},
	} {
		e.do(t, st)
	}
	e.checkADCache(t, sidAD6)

	// The NF side: what comes back is restored and redirected at XDP when
	// the FIB routes the restored destination; the rest goes to tc.
	back := func(name string, sid netip.Addr, sr []byte, want Verdict, reason drop.Reason) {
		t.Helper()
		r := e.m.clone().FromSR(sr)
		e.do(t, step{name: name + " sr->nf", l3: sr, want: ToNF})
		et := uint16(EtherIPv6)
		if r.IPv4 {
			et = EtherIPv4
		}
		e.do(t, step{name: name + " nf->sr", in: e.in(sid), etherType: et, l3: nfForward(r.Packet), want: want, reason: reason})
	}
	back("as6", sidAS6, toSID(t, udp6(64, 3), sidAS6, seg5), Forward, 0)
	back("as4", sidAS4, toSID(t, udp4(64, 3), sidAS4, seg6), Forward, 0)
	back("ad6", sidAD6, toSID(t, udp6(64, 3), sidAD6, seg5, seg6), Forward, 0)
	back("ad4", sidAD4, toSID(t, udp4(64, 3), sidAD4, seg5), Forward, 0)
	back("am", sidAM, toSID(t, udp6(64, 3), sidAM, seg5, seg6), Forward, 0)
	back("am nat", sidAMNAT, toSID(t, udp6(64, 3), sidAMNAT, seg6), Forward, 0)
	back("flow6", sidFlow, toSID(t, udp6(64, 3), sidFlow, seg5), Forward, 0)
	back("flow4", sidFlow4, toSID(t, udp4(64, 3), sidFlow4, seg6), Forward, 0)
	back("ad opot", sidADOPoT, toSIDOPoT(t, udp6(64, 3), 1, 0x99, sidADOPoT, seg5), Forward, 0)
	back("flow opot", sidFlowOP, toSIDOPoT(t, udp4(64, 3), 0, 0x98, sidFlowOP, seg5), Forward, 0)
	forwarded := e.xdpNF
	if forwarded != 10 {
		t.Errorf("the NF side's XDP twin forwarded %d of the 10 packets back", forwarded)
	}
	// To tc: hop limit 1 (tc sends Time Exceeded), no route for the
	// restored destination, a packet sent back twice (OPoT), no cache.
	r := e.do(t, step{name: "ad6 sr->nf no route", l3: toSID(t, udp6(64, 4), sidAD6, noRoute), want: ToNF})
	e.do(t, step{name: "ad6 nf->sr no route", in: e.in(sidAD6), l3: nfForward(r.Packet), want: Forward})
	e.do(t, step{name: "ad6 nf->sr hop limit 1", in: e.in(sidAD6), l3: udp6(1, 4), want: ICMP})
	// This harness runs each SR step through the twin and tc, so one
	// packet's TLV is kept twice (seq 0 and queued behind it): two
	// identical packets come back with a proof, the third misses.
	r = e.do(t, step{name: "ad opot sr->nf", l3: toSIDOPoT(t, udp6(64, 5), 0, 0x55, sidADOPoT, seg5), want: ToNF})
	e.do(t, step{name: "ad opot nf->sr", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Forward})
	e.do(t, step{name: "ad opot nf->sr queued", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Forward})
	e.do(t, step{name: "ad opot nf->sr once more", in: e.in(sidADOPoT), l3: nfForward(r.Packet), want: Drop, reason: drop.ProxyOPoTMiss})
	if e.xdpNF != forwarded+2 {
		t.Errorf("the NF side's XDP twin forwarded %d more, want 2 (the OPoT packets)", e.xdpNF-forwarded)
	}

	// The FIB cache lives one jiffy: once the next hop's MAC changed and
	// a jiffy (4 ms at CONFIG_HZ 250) passed, the twins use the new one.
	newMAC := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x22}
	if _, err := e.ns.Run(t.Context(), "ip", "-6", "neigh", "replace", nhAddr.String(), "lladdr", newMAC.String(), "dev", fmt.Sprintf("pxs%da", os.Getpid()%100000), "nud", "permanent"); err != nil {
		t.Fatal(err)
	}
	defer func(old net.HardwareAddr) { nhMAC = old }(nhMAC)
	nhMAC = newMAC
	time.Sleep(50 * time.Millisecond)
	back("ad6 after a neighbour change", sidAD6, toSID(t, udp6(64, 6), sidAD6, seg5, seg6), Forward, 0)
}
