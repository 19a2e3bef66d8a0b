package flowsetup

import (
	"net/netip"
	"testing"

	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// TestPick: least-loaded takes the instance with the fewest live flows
// (the first on a tie); hash depends only on the flow key.
func TestPick(t *testing.T) {
	l := &Loop{}
	cp := &chainPool{chain: state.IngressChain{Pool: &state.IngressPool{Pick: state.PickLeastLoaded}}, live: []int{3, 1, 1}}
	if v := l.pick(cp, [44]byte{}); v != 1 {
		t.Errorf("least-loaded picked %d, want 1", v)
	}
	cp.chain.Pool.Pick = state.PickHash
	seen := map[int]bool{}
	for i := range 64 {
		k := [44]byte{byte(i)}
		v := l.pick(cp, k)
		if v != l.pick(cp, k) || v < 0 || v > 2 {
			t.Fatalf("hash pick %d not stable or out of range", v)
		}
		seen[v] = true
	}
	if len(seen) != 3 {
		t.Errorf("hash over 64 flows used instances %v", seen)
	}
}

// TestEncap: the packet the loop sends on is the ingress's H.Encaps
// (outer fields inherited from IPv6, hop limit 64 for IPv4) with the
// forwarding hop's hop limit decrement; a hop limit that would expire is
// refused.
func TestEncap(t *testing.T) {
	src := netip.MustParseAddr("fc00:a1::2")
	l := &Loop{opts: Options{TunSrc: src}}
	segs := []netip.Addr{netip.MustParseAddr("fc00:2::1"), netip.MustParseAddr("fc00:4::1")}
	p6 := srv6.UDP6(netip.MustParseAddr("fc00:a1::1"), netip.MustParseAddr("fc00:a6::2"), 1, 2, nil)
	p6[7] = 40
	got, err := l.encap(segs, p6)
	if err != nil || got[7] != 39 || netip.AddrFrom16([16]byte(got[8:24])) != src || netip.AddrFrom16([16]byte(got[24:40])) != segs[0] {
		t.Fatalf("ipv6: hop limit %d, %v", got[7], err)
	}
	p4 := srv6.UDP4(netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.6.2"), 1, 2, nil)
	if got, err := l.encap(segs, p4); err != nil || got[7] != 63 {
		t.Fatalf("ipv4: hop limit %d, %v", got[7], err)
	}
	p6[7] = 1
	if _, err := l.encap(segs, p6); err == nil {
		t.Errorf("hop limit 1 inherited: sent")
	}
}
