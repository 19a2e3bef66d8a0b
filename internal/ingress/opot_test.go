package ingress

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// opotMaps loads the OPoT programs' maps (as the OPoT driver pins them)
// with chain id's headend entry for travel (node 0 of profile p, slot
// slot) and returns them as the ingress's replacements.
func opotMaps(t *testing.T, p *opot.Profile, id uint32, slot uint8, travel []netip.Addr) (*opotdp.Objects, map[string]*ebpf.Map) {
	t.Helper()
	o, err := opotdp.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	n, err := p.Node(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := opotdp.PutChain(o, id, slot, n, travel[0], travel[len(travel)-1]); err != nil {
		t.Fatal(err)
	}
	return o, opotdp.HeadendMapsOf(o)
}

// TestBPFOPoTHeadend: a chain with Ext = ExtOPoT leaves the tc program
// encapsulated with the OPoT TLV in its SRH, byte for byte the Go
// encapsulation with the TLV the model's headend writes (sequence 1, 2,
// ... from the OPoT driver's counter, the slot of the chain's entry);
// the model's transits and verifier accept it. With the chain's entry
// gone, of another role or for another first SID, the packet is dropped
// (opot-no-profile) before anything leaves; a chain without Ext gets no
// TLV, an insert-mode chain with Ext is left to the stack untouched. XDP, whose FIB lookup fails here,
// passes it untouched to tc.
func TestBPFOPoTHeadend(t *testing.T) {
	testutil.RequireRoot(t)
	const k, id, slot, ethLen, tcActShot = 4, 7, 1, 14, 2
	p, err := opot.GenerateFrom(rand.NewChaCha8([32]byte{11}), k)
	if err != nil {
		t.Fatal(err)
	}
	travel := []netip.Addr{ma("fd00:1::e"), ma("fd00:2::e"), ma("fd00:3::d6")}
	o, shared := opotMaps(t, p, id, slot, travel)
	cfg := Config{Chains: []Chain{
		{Name: "proof", Mode: state.ModeEncap, Segments: travel, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:5::/64")}, Ext: ExtOPoT},
		{Name: "plain", Mode: state.ModeEncap, Segments: travel, Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:6::/64")}},
	}}
	in, err := Load(Options{XDP: true, Capacity: CapacityFor(len(cfg.Chains)), OPoT: shared})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	if _, err := in.Update(cfg, testSettings); err != nil {
		t.Fatal(err)
	}
	ns := testNS(t, cfg)
	f := p.Field()
	n0, _ := p.Node(0)
	inner := srv6.UDP6(ma("2001:db8:1::1"), ma("2001:db8:5::9"), 4000, 80, []byte("proof of transit"))
	pkt := frame(hostMAC, inner)

	if ret, out := run(t, ns, in.XDPProgram(), pkt); ret != xdpPass || !bytes.Equal(out[:len(pkt)], pkt) {
		t.Fatalf("xdp: verdict %d, frame changed", ret)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		ret, out := run(t, ns, in.Program(), pkt)
		if ret != tcActOK {
			t.Fatalf("packet %d: verdict %d, want TC_ACT_OK (the stack forwards it)", seq, ret)
		}
		off := ethLen + 40 + 8 + 16*len(travel)
		m, err := opot.ParseTLV(out[off:])
		if err != nil {
			t.Fatalf("packet %d: %v", seq, err)
		}
		r := m.RND ^ n0.Enc.R
		if opot.SeqOf(r) != seq || m.Slot != slot {
			t.Fatalf("packet %d: seq %d slot %d", seq, opot.SeqOf(r), m.Slot)
		}
		want, err := opot.Init(f, n0, slot, r)
		if err != nil || want != m {
			t.Fatalf("packet %d: TLV %+v, model %+v (%v)", seq, m, want, err)
		}
		l3, err := srv6.EncapWith(srv6.EncapOptions{Inherit: true}, tunsrc, travel, inner, m.SRv6TLV())
		if err != nil {
			t.Fatal(err)
		}
		if exp := frame(hostMAC, l3); !bytes.Equal(out[:len(exp)], exp) {
			t.Fatalf("packet %d differs from the Go encapsulation with the TLV:\n got %x\nwant %x", seq, out[:len(exp)], exp)
		}
		for j := 1; j < k-1; j++ {
			nj, _ := p.Node(j)
			if m, err = opot.Transit(f, nj, m); err != nil {
				t.Fatal(err)
			}
		}
		nv, _ := p.Node(k - 1)
		if got, err := opot.Verify(f, nv, m); err != nil || opot.SeqOf(got) != seq {
			t.Fatalf("packet %d: the model's verifier says seq %d, %v", seq, opot.SeqOf(got), err)
		}
	}

	// A GSO packet (segments that would copy one proof): dropped,
	// counted. gso_size stays 0 in this test run: the kernel's room
	// adjustment refuses a GSO packet it cannot tell is TCP, and a real
	// one is; gso_segs is what the program reads.
	gopts := &ebpf.RunOptions{Data: pkt, DataOut: make([]byte, len(pkt)+1024), Context: testutil.SKB{GSOSegs: 2, IngressIfindex: 1, Ifindex: 1}}
	var gret uint32
	if err := ns.Do(func() (err error) { gret, err = in.Program().Run(gopts); return err }); err != nil || gret != tcActShot {
		t.Fatalf("gso packet: verdict %d (%v), want TC_ACT_SHOT", gret, err)
	}
	if ds, err := in.DropCounts(); err != nil || ds[drop.OPoTGSO] != 1 {
		t.Fatalf("gso packet: drops %v (%v), want one %s", ds.NonZero(), err, drop.OPoTGSO)
	}

	// A chain without Ext: no TLV.
	plain := frame(hostMAC, srv6.UDP6(ma("2001:db8:1::1"), ma("2001:db8:6::9"), 4000, 80, []byte("plain")))
	ret, out := run(t, ns, in.Program(), plain)
	l3, _ := srv6.EncapWith(srv6.EncapOptions{Inherit: true}, tunsrc, travel, plain[ethLen:])
	if exp := frame(hostMAC, l3); ret != tcActOK || !bytes.Equal(out[:len(exp)], exp) {
		t.Fatalf("plain chain: verdict %d, frame %x", ret, out[:len(exp)])
	}

	// The entry gone (the OPoT driver removed the chain): dropped.
	ck := opotdp.ChainKey{Last: travel[len(travel)-1].As16()}
	if err := o.OpotChains.Delete(&ck); err != nil {
		t.Fatal(err)
	}
	if ret, _ := run(t, ns, in.Program(), pkt); ret != tcActShot {
		t.Fatalf("no chain entry: verdict %d, want TC_ACT_SHOT", ret)
	}
	// An entry of another role (this node is the chain's transit), or
	// whose SID is not the chain's first segment: dropped alike.
	for name, ch := range map[string]opotdp.Chain{
		"transit entry": {Profile: id, Slot: slot, Role: uint32(opot.RoleTransit), Idx: id, Sid: travel[0].As16()},
		"other sid":     {Profile: id, Slot: slot, Role: uint32(opot.RoleHeadend), Idx: id, Sid: travel[1].As16()},
	} {
		if err := o.OpotChains.Put(&ck, &ch); err != nil {
			t.Fatal(err)
		}
		if ret, _ := run(t, ns, in.Program(), pkt); ret != tcActShot {
			t.Fatalf("%s: verdict %d, want TC_ACT_SHOT", name, ret)
		}
	}
	ds, err := in.DropCounts()
	if err != nil {
		t.Fatal(err)
	}
	if ds[drop.OPoTNoProfile] != 3 {
		t.Fatalf("drops %v, want three %s", ds.NonZero(), drop.OPoTNoProfile)
	}

	// Ext on an insert-mode chain (the compiler never asks for it): left
	// to the stack untouched, before anything is written.
	ins := Config{Chains: []Chain{{Name: "ins", Mode: state.ModeInsert, Segments: travel[:2], Dev: "eth1", Dst: []netip.Prefix{mp("2001:db8:5::/64")}, Ext: ExtOPoT}}}
	if _, err := in.Update(ins, testSettings); err != nil {
		t.Fatal(err)
	}
	if ret, out := run(t, ns, in.Program(), pkt); ret != tcActUnspec || !bytes.Equal(out[:len(pkt)], pkt) {
		t.Fatalf("insert chain with ext: verdict %d, frame changed %v", ret, !bytes.Equal(out[:len(pkt)], pkt))
	}
	if _, err := Load(Options{OPoT: map[string]*ebpf.Map{"opot_chains": o.OpotStats}}); !errors.Is(err, ebpf.ErrMapIncompatible) {
		t.Fatalf("a wrong map as opot_chains: %v, want ErrMapIncompatible", err)
	}
}
