package apply

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/state"
)

// TestRouteTLVEncode: a route whose SRH carries TLVs encodes Hdr Ext Len
// over segments and TLVs, and reads back (as the library decodes it) as
// the segments followed by the TLV area in 16-byte pieces; a TLV area
// the library could not read back is refused.
func TestRouteTLVEncode(t *testing.T) {
	tlvs := opot.Reservation()
	r := state.Route{Dst: p("fc00:5::/64"), Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::e"), ad("fc00:9::d6")}, TLVs: tlvs}}
	nr, err := RouteFor(r, func(string) (int, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	b, err := nr.Encap.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// attr header (4), mode (4), SRH: 8 + 2 * 16 + 32.
	if len(b) != 4+4+8+32+len(tlvs) || b[8+1] != (32+byte(len(tlvs)))/8 || b[8+4] != 1 || !bytes.Equal(b[len(b)-len(tlvs):], tlvs) {
		t.Fatalf("encoded % x", b)
	}
	var back netlink.SEG6Encap
	if err := back.Decode(b); err != nil {
		t.Fatalf("the library cannot read it back: %v", err)
	}
	if encapSig(&back) != encapSig(nr.Encap) {
		t.Errorf("read back %q, want %q", encapSig(&back), encapSig(nr.Encap))
	}
	r.Encap.TLVs = tlvs[:24]
	if _, err := RouteFor(r, func(string) (int, error) { return 0, nil }); !errors.Is(err, ErrBadState) {
		t.Errorf("a 24-byte tlv area: %v, want ErrBadState", err)
	}
}

// TestApplyRouteTLVs: the kernel takes the route (seg6_validate_srh walks
// the TLVs), a second apply changes nothing, and a route with other TLV
// bytes is reported by Check and repaired.
func TestApplyRouteTLVs(t *testing.T) {
	a, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := richNode()
	route := state.Route{Dst: p("fc00:77::/64"), Dev: "eth0", Encap: &state.SREncap{Mode: state.ModeEncap, Segments: []netip.Addr{ad("fc00:2::f1"), ad("fc00:2::d4")}, TLVs: opot.Reservation()}}
	node.Routes = append(node.Routes, route)
	if _, err := ApplyWith(ctx, a, node, Options{}); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run(ctx, "ip", "-6", "route", "show", "fc00:77::/64"); err != nil || !strings.Contains(out, "encap seg6 mode encap segs 2") {
		t.Fatalf("route = %q, %v", out, err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 0 {
		t.Errorf("re-apply = %d changes, %v; want 0", res.Changes, err)
	}
	other := route
	other.Encap = &state.SREncap{Mode: state.ModeEncap, Segments: route.Encap.Segments, TLVs: bytes.Clone(route.Encap.TLVs)}
	other.Encap.TLVs[opot.OffSlot] = 0
	l, err := a.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	nr, err := RouteFor(other, func(string) (int, error) { return l.Attrs().Index, nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Netlink().RouteReplace(nr); err != nil {
		t.Fatal(err)
	}
	pending, err := Check(ctx, a, node)
	if err != nil || len(pending) != 1 || !strings.Contains(pending[0], "fc00:77::/64") {
		t.Errorf("check of a route with other tlvs = %v, %v", pending, err)
	}
	if res, err := ApplyWith(ctx, a, node, Options{}); err != nil || res.Changes != 1 {
		t.Errorf("repair = %d changes, %v; want 1", res.Changes, err)
	}
}
