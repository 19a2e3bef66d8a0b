package compile

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/srchain/srchain/internal/state"
)

func TestPackCSIDs(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name      string
		segs      []string
		lb, nf    int
		want      []string
		wantError bool
	}{
		{"one container", []string{"fc00:0:2:1::", "fc00:0:3:1::"}, 32, 32, []string{"fc00:0:2:1:3:1::"}, false},
		{"full container", []string{"fc00:0:2:1::", "fc00:0:3:1::", "fc00:0:4:7::"}, 32, 32, []string{"fc00:0:2:1:3:1:4:7"}, false},
		{"second container", []string{"fc00:0:2:1::", "fc00:0:3:1::", "fc00:0:4:7::", "fc00:0:5:9::"}, 32, 32, []string{"fc00:0:2:1:3:1:4:7", "fc00:0:5:9::"}, false},
		{"16-bit C-SIDs", []string{"fc00:0:2::", "fc00:0:3::", "fc00:0:4::"}, 32, 16, []string{"fc00:0:2:3:4::"}, false},
		{"other block", []string{"fc00:0:2:1::", "fc01:0:3:1::"}, 32, 32, nil, true},
		{"bits after the C-SID", []string{"fc00:0:2:1::1"}, 32, 32, nil, true},
		{"layout not in bytes", []string{"fc00:0:2:1::"}, 30, 32, nil, true},
		{"ipv4", []string{"10.0.0.1"}, 32, 32, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var segs []netip.Addr
			for _, s := range tc.segs {
				segs = append(segs, a(s))
			}
			got, err := PackCSIDs(segs, tc.lb, tc.nf)
			if tc.wantError {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("PackCSIDs = %v, %v; want ErrUnsupported", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []netip.Addr
			for _, s := range tc.want {
				want = append(want, a(s))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("PackCSIDs = %v, want %v", got, want)
			}
			// Expanding the containers gives the SIDs back, in order.
			var back []netip.Addr
			for _, c := range got {
				back = append(back, state.CSIDFlavor{BlockBits: tc.lb, NodeFunctionBits: tc.nf}.Expand(c)...)
			}
			if !slices.Equal(back, segs) {
				t.Errorf("expand = %v, want %v", back, segs)
			}
		})
	}
}

// FuzzPackCSIDs: packing then expanding gives back every SID, whatever
// the C-SIDs (non-zero) and their number.
func FuzzPackCSIDs(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 0, 3, 0, 1}, uint8(4))
	f.Fuzz(func(t *testing.T, csids []byte, nfBytes uint8) {
		nb := int(nfBytes%4) + 1 // 8..32-bit C-SIDs
		lb := 4
		var segs []netip.Addr
		for i := 0; i+nb <= len(csids) && len(segs) < 20; i += nb {
			var b [16]byte
			copy(b[:lb], []byte{0xfc, 0, 0, 0})
			copy(b[lb:lb+nb], csids[i:i+nb])
			if string(b[lb:lb+nb]) == string(make([]byte, nb)) {
				continue // a zero C-SID ends a container
			}
			segs = append(segs, netip.AddrFrom16(b))
		}
		got, err := PackCSIDs(segs, lb*8, nb*8)
		if err != nil {
			t.Fatal(err)
		}
		var back []netip.Addr
		for _, c := range got {
			back = append(back, state.CSIDFlavor{BlockBits: lb * 8, NodeFunctionBits: nb * 8}.Expand(c)...)
		}
		if !slices.Equal(back, segs) {
			t.Fatalf("expand(pack(%v)) = %v", segs, back)
		}
	})
}

// CSIDArrivals: the DA each segment's node sees is the block, its own
// C-SID and the rest of its container (the C-SIDs before it shifted
// out), zero-filled; the first of a container is the container itself;
// and the containers are PackCSIDs'.
func TestCSIDArrivals(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	// Block 32 bits, C-SID 32 bits: three C-SIDs per container.
	segs := []netip.Addr{a("fc00:0:2:1::"), a("fc00:0:3:1::"), a("fc00:0:4:1::"), a("fc00:0:5:1::"), a("fc00:0:6:d::")}
	das, packed, err := CSIDArrivals(segs, 32, 32)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{
		a("fc00:0:2:1:3:1:4:1"), a("fc00:0:3:1:4:1::"), a("fc00:0:4:1::"),
		a("fc00:0:5:1:6:d::"), a("fc00:0:6:d::"),
	}
	if len(das) != len(want) {
		t.Fatalf("%d arrivals, want %d", len(das), len(want))
	}
	for i := range want {
		if das[i] != want[i] {
			t.Errorf("segment %d: DA %s, want %s", i, das[i], want[i])
		}
	}
	if len(packed) != 2 || packed[0] != das[0] || packed[1] != das[3] {
		t.Errorf("containers %v", packed)
	}
	// The last arrival is the last segment itself (the egress SID).
	if das[len(das)-1] != segs[len(segs)-1] {
		t.Errorf("the egress sees %s, its SID is %s", das[len(das)-1], segs[len(segs)-1])
	}
	if _, _, err := CSIDArrivals([]netip.Addr{a("fc00:0:2:1::"), a("fc01:0:3:1::")}, 32, 32); err == nil {
		t.Error("two blocks: no error")
	}
}
