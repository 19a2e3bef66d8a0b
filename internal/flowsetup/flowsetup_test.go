package flowsetup

import (
	"encoding/binary"
	"github.com/cilium/ebpf"
	"github.com/srchain/srchain/internal/testutil"
	"net/netip"
	"slices"
	"testing"
	"time"

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

// TestSweep: the idle sweep walks the whole flow map in batches, deletes
// the entries of flows idle longer than the timeout, leaves other pools'
// entries alone and counts the live flows per instance.
func TestSweep(t *testing.T) {
	testutil.RequireRoot(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.LRUHash, KeySize: 44, ValueSize: 16, MaxEntries: 65536})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const pool, other = 0x1234, 0x9999
	now := monotonic()
	key := func(pool uint32, i int) [44]byte {
		var k [44]byte
		binary.LittleEndian.PutUint32(k[0:], uint32(i))
		binary.LittleEndian.PutUint32(k[32:], pool)
		return k
	}
	want := []int{0, 0, 0}
	for i := range 10000 {
		v := flowValue{Variant: uint32(i % 3), Last: now}
		if i%10 == 0 {
			v.Last = now - uint64(time.Minute) // idle
		} else {
			want[i%3]++
		}
		k := key(pool, i)
		if err := m.Put(k[:], &v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		k := key(other, i)
		if err := m.Put(k[:], &flowValue{Last: now - uint64(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	l := &Loop{opts: Options{IdleTimeout: 30 * time.Second}, flows: m, recent: map[[44]byte]installed{},
		pools: map[uint32]*chainPool{pool: {live: make([]int, 3)}}}
	if err := l.Sweep(); err != nil {
		t.Fatal(err)
	}
	if got := l.pools[pool].live; !slices.Equal(got, want) {
		t.Errorf("live flows %v, want %v", got, want)
	}
	n := 0
	var k [44]byte
	var v flowValue
	for it := m.Iterate(); it.Next(&k, &v); {
		n++
	}
	if n != 9000+50 {
		t.Errorf("%d entries after the sweep, want 9,000 live + 50 of another pool", n)
	}
}
