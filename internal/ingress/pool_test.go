package ingress

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// TestBPFPoolFlows: a packet of a pool chain whose flow has no entry is
// reported whole (with its flow key, chain and arrival time) and consumed
// by tc, and passed to tc untouched by XDP; once the flow's entry names a
// variant, tc encapsulates with that variant's segment list, and a flow
// of another 5-tuple is still reported. A report carries at most
// ING_REPORT_MAX bytes and the packet's real length.
func TestBPFPoolFlows(t *testing.T) {
	segs1 := []netip.Addr{ma("fc00:2::1"), ma("fc00:4::1")}
	segs2 := []netip.Addr{ma("fc00:3::1"), ma("fc00:4::1")}
	cfg := Config{Chains: []Chain{
		{Name: "plain", Mode: state.ModeEncap, Segments: segsB, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:9::/64")}},
		{Name: "pooled", Mode: state.ModeEncap, Segments: segs1, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:5::/64")},
			Pool: &state.IngressPool{Name: "fw", Pick: state.PickLeastLoaded, NFs: []string{"fw1", "fw2"}, Variants: [][]netip.Addr{segs1, segs2}}},
	}}
	in := loadTest(t, cfg, testSettings)
	ns := testNS(t, cfg)
	rd, err := ringbuf.NewReader(in.objs.IngReports)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	next := func() Report {
		t.Helper()
		rd.SetDeadline(time.Now().Add(2 * time.Second))
		rec, err := rd.Read()
		if err != nil {
			t.Fatalf("no report: %v", err)
		}
		r, err := ParseReport(rec.RawSample)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	s6, d6 := ma("2001:db8:1::1"), ma("2001:db8:5::9")
	p := srv6.UDP6(s6, d6, 4000, 80, []byte("first"))
	f := frame(hostMAC, p)
	const tcActShot = 2
	if ret, out := run(t, ns, in.XDPProgram(), f); ret != xdpPass || !bytes.Equal(out[:len(f)], f) {
		t.Fatalf("xdp, no flow entry: ret %d, packet changed", ret)
	}
	if ret, _ := run(t, ns, in.Program(), f); ret != tcActShot {
		t.Fatalf("tc, no flow entry: ret %d, want TC_ACT_SHOT (reported)", int32(ret))
	}
	r := next()
	if !bytes.Equal(r.Data, p) || r.Len != uint32(len(p)) || r.Chain != 1 || r.Pool != PoolID(cfg, 1) || r.Pool == 0 || r.KTime == 0 {
		t.Fatalf("report: chain %d pool %#x (want %#x) len %d data %x", r.Chain, r.Pool, PoolID(cfg, 1), r.Len, r.Data)
	}
	if k := r.Key; netip.AddrFrom16([16]byte(k[:16])) != s6 || netip.AddrFrom16([16]byte(k[16:32])) != d6 ||
		binary.LittleEndian.Uint16(k[36:]) != 4000 || binary.LittleEndian.Uint16(k[38:]) != 80 || k[40] != 17 {
		t.Fatalf("flow key %x", k)
	}
	// The flow goes to variant 1 (fw2).
	type flow struct {
		Variant, Pad uint32
		Last         uint64
	}
	if err := in.objs.IngFlows.Update(r.Key[:], flow{Variant: 1}, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	want, err := srv6.EncapWith(srv6.EncapOptions{Inherit: true}, tunsrc, segs2, p)
	if err != nil {
		t.Fatal(err)
	}
	ret, out := run(t, ns, in.Program(), f)
	if ret != tcActOK || !bytes.Equal(out[14:14+len(want)], want) {
		t.Fatalf("tc, flow on variant 1: ret %d\n got %x\nwant %x", int32(ret), out[14:14+len(want)], want)
	}
	var v flow
	if err := in.objs.IngFlows.Lookup(r.Key[:], &v); err != nil || v.Last == 0 {
		t.Errorf("flow entry not refreshed: %+v, %v", v, err)
	}
	// An entry naming a variant the pool does not have is a miss.
	if err := in.objs.IngFlows.Update(r.Key[:], flow{Variant: 7}, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, ns, in.Program(), f); ret != tcActShot {
		t.Fatalf("tc, bad variant: ret %d, want a report", int32(ret))
	}
	next()
	// Another source port: another flow, reported; a big packet is cut
	// to ING_REPORT_MAX bytes and says its length.
	big := srv6.UDP6(s6, d6, 4001, 80, make([]byte, 3000))
	if ret, _ := run(t, ns, in.Program(), frame(hostMAC, big)); ret != tcActShot {
		t.Fatalf("tc, new flow: ret %d", int32(ret))
	}
	r = next()
	if len(r.Data) != 2048 || r.Len != uint32(len(big)) || !bytes.Equal(r.Data, big[:2048]) {
		t.Fatalf("big report: %d bytes of %d", len(r.Data), r.Len)
	}
	// The plain chain is not affected.
	q := srv6.UDP6(s6, ma("2001:db8:9::1"), 4000, 80, nil)
	want, _ = srv6.EncapWith(srv6.EncapOptions{Inherit: true}, tunsrc, segsB, q)
	if ret, out := run(t, ns, in.Program(), frame(hostMAC, q)); ret != tcActOK || !bytes.Equal(out[14:14+len(want)], want) {
		t.Fatalf("plain chain: ret %d", int32(ret))
	}
}
