package srv6

import (
	"errors"
	"net/netip"
	"testing"
)

func TestSIDFormat(t *testing.T) {
	f := SIDFormat{LocatorBits: 48, FunctionBits: 16, ArgsBits: 32}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	loc := netip.MustParsePrefix("fc00:0:1::/48")
	sid, err := f.Make(loc, 0xe1, 0x1111)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("fc00:0:1:e1:0:1111::"); sid != want {
		t.Fatalf("Make = %v, want %v", sid, want)
	}
	l, fn, args := f.Split(sid)
	if l != loc || fn != 0xe1 || args != 0x1111 || f.Args(sid) != 0x1111 {
		t.Fatalf("Split = %v %#x %#x", l, fn, args)
	}
	w := f.WithArgs(sid, 0x2222)
	if w != netip.MustParseAddr("fc00:0:1:e1:0:2222::") {
		t.Fatalf("WithArgs = %v", w)
	}
	if f.WithArgs(sid, 0x1_0000_2222) != w {
		t.Fatal("WithArgs must truncate to ArgsBits")
	}
	if f.String() != "48:16:32" {
		t.Fatal(f.String())
	}
}

func TestSIDFormatOddWidths(t *testing.T) {
	// Fields that straddle the 64-bit halves and fill all 128 bits.
	for _, f := range []SIDFormat{
		{40, 24, 64}, {64, 64, 0}, {60, 8, 60}, {0, 64, 64}, {127, 1, 0}, {1, 63, 64}, {32, 0, 0},
	} {
		loc := netip.PrefixFrom(netip.MustParseAddr("fc00:1234:5678:9abc:def0:1234:5678:9abc"), f.LocatorBits).Masked()
		fn := uint64(0xdeadbeefcafef00d)
		args := uint64(0x0123456789abcdef)
		if f.FunctionBits < 64 {
			fn &= 1<<f.FunctionBits - 1
		}
		if f.ArgsBits < 64 {
			args &= 1<<f.ArgsBits - 1
		}
		sid, err := f.Make(loc, fn, args)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		l, gf, ga := f.Split(sid)
		if l != loc || gf != fn || ga != args {
			t.Fatalf("%v: Split(%v) = %v %#x %#x, want %v %#x %#x", f, sid, l, gf, ga, loc, fn, args)
		}
	}
}

func TestSIDFormatErrors(t *testing.T) {
	for _, f := range []SIDFormat{{-1, 16, 16}, {64, 65, 0}, {64, 0, 65}, {64, 64, 1}} {
		if err := f.Validate(); !errors.Is(err, ErrBadSIDFormat) {
			t.Fatalf("%v: %v", f, err)
		}
		if _, err := f.Make(netip.MustParsePrefix("fc00::/64"), 0, 0); !errors.Is(err, ErrBadSIDFormat) {
			t.Fatalf("%v Make: %v", f, err)
		}
		a := netip.MustParseAddr("fc00::1")
		if l, fn, args := f.Split(a); l.IsValid() || fn != 0 || args != 0 || f.WithArgs(a, 1) != a {
			t.Fatalf("%v: invalid format must give zero values", f)
		}
	}
	f := SIDFormat{48, 16, 16}
	for _, c := range []struct {
		loc      string
		fn, args uint64
	}{
		{"fc00::/64", 1, 1},          // wrong locator length
		{"10.0.0.0/8", 1, 1},         // not IPv6
		{"fc00::/48", 0x10000, 1},    // function too wide
		{"fc00::/48", 1, 0x1_0000_0}, // args too wide
	} {
		if _, err := f.Make(netip.MustParsePrefix(c.loc), c.fn, c.args); !errors.Is(err, ErrSIDOverflow) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	if _, err := f.Make(netip.Prefix{}, 1, 1); !errors.Is(err, ErrSIDOverflow) {
		t.Fatal(err)
	}
	if l, _, _ := f.Split(netip.MustParseAddr("10.0.0.1")); l.IsValid() {
		t.Fatal("Split of IPv4")
	}
}

func TestCSIDNext(t *testing.T) {
	// lblen 48 nflen 16: block fc00:0:0, then C-SIDs 1, 2, 3.
	c, err := CSIDContainer(netip.MustParsePrefix("fc00::/48"), 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c != netip.MustParseAddr("fc00:0:0:1:2:3::") {
		t.Fatalf("container %v", c)
	}
	want := []string{"fc00:0:0:2:3::", "fc00:0:0:3::"}
	for i, w := range want {
		next, ok := CSIDNext(c, 48, 16)
		if !ok || next != netip.MustParseAddr(w) {
			t.Fatalf("shift %d: %v %v, want %s", i, next, ok, w)
		}
		c = next
	}
	if next, ok := CSIDNext(c, 48, 16); ok || next != c {
		t.Fatalf("exhausted: %v %v", next, ok)
	}
	// Full container: 5 C-SIDs, the last shifts out cleanly.
	full, _ := CSIDContainer(netip.MustParsePrefix("2001:db8:ab::/48"), 0xa, 0xb, 0xc, 0xd, 0xe)
	n := 0
	for ok := true; ok; n++ {
		full, ok = CSIDNext(full, 48, 16)
	}
	if n != 5 || full != netip.MustParseAddr("2001:db8:ab:e::") {
		t.Fatalf("%d shifts, ends at %v", n, full)
	}
	// Bad geometry never shifts.
	for _, g := range [][2]int{{-1, 16}, {48, 0}, {120, 16}} {
		if _, ok := CSIDNext(c, g[0], g[1]); ok {
			t.Fatalf("geometry %v shifted", g)
		}
	}
	if _, ok := CSIDNext(netip.MustParseAddr("10.0.0.1"), 8, 8); ok {
		t.Fatal("ipv4 shifted")
	}
}

func TestCSIDContainerErrors(t *testing.T) {
	b := netip.MustParsePrefix("fc00::/48")
	if _, err := CSIDContainer(b, 1, 2, 3, 4, 5, 6); !errors.Is(err, ErrTooLong) {
		t.Fatal(err)
	}
	if _, err := CSIDContainer(b); !errors.Is(err, ErrNoSegments) {
		t.Fatal(err)
	}
	if _, err := CSIDContainer(netip.MustParsePrefix("10.0.0.0/8"), 1); !errors.Is(err, ErrBadSIDFormat) {
		t.Fatal(err)
	}
	if _, err := CSIDContainerBits(b, 0, 1); !errors.Is(err, ErrBadSIDFormat) {
		t.Fatal(err)
	}
	if _, err := CSIDContainerBits(b, 8, 0x100); !errors.Is(err, ErrSIDOverflow) {
		t.Fatal(err)
	}
}

func TestCSIDPack(t *testing.T) {
	b := netip.MustParsePrefix("fc00::/48")
	got, err := CSIDPack(b, 16, []uint64{1, 2, 3, 4, 5, 6, 7})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("fc00:0:0:1:2:3:4:5"), netip.MustParseAddr("fc00:0:0:6:7::")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("CSIDPack = %v", got)
	}
	if _, err := CSIDPack(b, 16, nil); !errors.Is(err, ErrNoSegments) {
		t.Fatal(err)
	}
	if _, err := CSIDPack(b, 96, []uint64{1}); !errors.Is(err, ErrBadSIDFormat) {
		t.Fatal(err)
	}
}
