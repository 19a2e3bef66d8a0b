package apply

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/state"
)

// seg6local flavor attributes (include/uapi/linux/seg6_local.h), which
// vishvananda/netlink v1.3.1 does not know.
const (
	seg6LocalFlavors        = 11 // SEG6_LOCAL_FLAVORS, nested
	seg6LocalFlvOperation   = 1  // SEG6_LOCAL_FLV_OPERATION, u32 bit mask
	seg6LocalFlvLCBlockBits = 2  // SEG6_LOCAL_FLV_LCBLOCK_BITS, u8
	seg6LocalFlvLCNodeFn    = 3  // SEG6_LOCAL_FLV_LCNODE_FN_BITS, u8
	seg6LocalFlvOpNextCSID  = 4  // SEG6_LOCAL_FLV_OP_NEXT_CSID (bit number)
)

// localEncap is a seg6local encap with the attributes the library cannot
// encode: the NEXT-C-SID flavor (RFC 9800 section 4.1, the nested
// SEG6_LOCAL_FLAVORS attribute, which the kernel parses strictly:
// NLA_F_NESTED set) and the behaviour's counters (SEG6_LOCAL_COUNTERS,
// counters.go).
type localEncap struct {
	netlink.SEG6LocalEncap
	flavor state.CSIDFlavor
	count  bool
}

func (e *localEncap) Encode() ([]byte, error) {
	b, err := e.SEG6LocalEncap.Encode()
	if err != nil {
		return nil, err
	}
	if e.flavor != (state.CSIDFlavor{}) {
		flv := nl.NewRtAttr(unix.NLA_F_NESTED|seg6LocalFlavors, nil)
		flv.AddRtAttr(seg6LocalFlvOperation, nl.Uint32Attr(1<<seg6LocalFlvOpNextCSID))
		flv.AddRtAttr(seg6LocalFlvLCBlockBits, []byte{uint8(e.flavor.BlockBits)})
		flv.AddRtAttr(seg6LocalFlvLCNodeFn, []byte{uint8(e.flavor.NodeFunctionBits)})
		b = append(b, flv.Serialize()...)
	}
	if e.count {
		b = append(b, encodeCounters()...)
	}
	return b, nil
}

func (e *localEncap) String() string {
	s := e.SEG6LocalEncap.String()
	if e.flavor != (state.CSIDFlavor{}) {
		s += fmt.Sprintf(" flavors next-csid lblen %d nflen %d", e.flavor.BlockBits, e.flavor.NodeFunctionBits)
	}
	if e.count {
		s += " count"
	}
	return s
}

func (e *localEncap) Equal(x netlink.Encap) bool {
	o, ok := x.(*localEncap)
	return ok && o.flavor == e.flavor && o.count == e.count && e.SEG6LocalEncap.Equal(&o.SEG6LocalEncap)
}

// withExtras gives route r (built by SIDRoute) the SID's flavor, if any,
// and the kernel's per-SID counters (`count`): every kernel SID is
// counted, as every eBPF SID is (docs/metrics.md), where the kernel can
// (countersSupported).
func withExtras(r *netlink.Route, s state.LocalSID) {
	e, ok := r.Encap.(*netlink.SEG6LocalEncap)
	if !ok {
		return
	}
	r.Encap = &localEncap{SEG6LocalEncap: *e, flavor: s.NextCSID, count: countersSupported()}
}

// localExtras is what the library's decoder drops from a seg6local route
// read back from the kernel.
type localExtras struct {
	flavor state.CSIDFlavor
	count  bool
}

// parseFlavor reads the NEXT-C-SID flavor out of a seg6local encap's
// attributes (zero when absent or another flavor).
func parseFlavor(b []byte) state.CSIDFlavor {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return state.CSIDFlavor{}
	}
	for _, at := range attrs {
		if at.Attr.Type&^unix.NLA_F_NESTED != seg6LocalFlavors {
			continue
		}
		sub, err := nl.ParseRouteAttr(at.Value)
		if err != nil {
			return state.CSIDFlavor{}
		}
		var ops uint32
		var f state.CSIDFlavor
		for _, s := range sub {
			switch {
			case s.Attr.Type == seg6LocalFlvOperation && len(s.Value) >= 4:
				ops = binary.NativeEndian.Uint32(s.Value)
			case s.Attr.Type == seg6LocalFlvLCBlockBits && len(s.Value) >= 1:
				f.BlockBits = int(s.Value[0])
			case s.Attr.Type == seg6LocalFlvLCNodeFn && len(s.Value) >= 1:
				f.NodeFunctionBits = int(s.Value[0])
			}
		}
		if ops&(1<<seg6LocalFlvOpNextCSID) != 0 {
			return f
		}
	}
	return state.CSIDFlavor{}
}

// sidExtras makes the SID routes carry their flavor and counters: the
// route diff (encapSig) cannot see either in what it reads back, so a
// route that lost its flavor, had another, or was installed without
// `count` (by an srchain before counters, or by hand) is replaced here,
// once. found marks the SIDs whose route ensureRoute found in place (nil:
// none): a route it just wrote has both, and a SID the previous state
// held as it is now was checked by the apply that wrote it. Flavored SIDs
// are checked every time, as before counters. The routes are read as
// KernelSIDCounters reads them (per-SID lookups, or one dump).
func (a *applier) sidExtras(found []bool) error {
	type sidRoute struct {
		s    state.LocalSID
		nr   *netlink.Route
		want *localEncap
	}
	var todo []sidRoute
	var prefixes []netip.Prefix
	for i, s := range a.node.SIDs {
		if s.Datapath == state.ProgramDatapath || (s.NextCSID == (state.CSIDFlavor{}) && (found == nil || !found[i])) {
			continue
		}
		dev, err := a.sidDev()
		if err != nil {
			return err
		}
		nr, err := SIDRoute(s, dev, a.ifindex)
		if err != nil {
			return err
		}
		want, ok := nr.Encap.(*localEncap)
		if !ok {
			continue
		}
		todo = append(todo, sidRoute{s, nr, want})
		prefixes = append(prefixes, s.SID.Masked())
	}
	if len(todo) == 0 {
		return nil
	}
	have, ok, err := lookupSIDRoutes(a.ns, prefixes)
	if err == nil && !ok {
		have, err = dumpMainSIDRoutes(a.ns)
	}
	if err != nil {
		return fmt.Errorf("read sid routes: %w", err)
	}
	h := a.ns.Netlink()
	for _, t := range todo {
		enc, present := have[t.s.SID.Masked()]
		if !present && a.dry {
			// A dry run did not add the route it reported missing.
			continue
		}
		_, counted := parseCounters(enc)
		got := localExtras{flavor: parseFlavor(enc), count: counted}
		if got == (localExtras{flavor: t.want.flavor, count: t.want.count}) {
			continue
		}
		what := fmt.Sprintf("sid %s %s", t.s.SID, t.s.Behavior)
		if got.flavor != t.want.flavor {
			what += " flavor next-csid"
		}
		if got.count != t.want.count {
			what += " count"
		}
		nr := t.nr
		prev := *nr
		prev.Encap = &localEncap{SEG6LocalEncap: t.want.SEG6LocalEncap, flavor: got.flavor, count: got.count}
		if err := a.change("replace "+what,
			func() error { return wrap(h.RouteReplace(nr), "replace %s", what) },
			func() error { return h.RouteReplace(&prev) }); err != nil {
			return err
		}
	}
	return nil
}
