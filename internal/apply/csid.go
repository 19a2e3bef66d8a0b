package apply

import (
	"encoding/binary"
	"fmt"

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

// seg6Extras reads the NEXT-C-SID flavor and whether the kernel counts
// (SEG6_LOCAL_COUNTERS), of every IPv6 seg6local route in the
// namespace, by destination prefix and table: the library decodes
// seg6local routes without them, so the applier asks the kernel itself
// (one dump per Apply, only when a SID needs the answer).
func (a *applier) seg6Extras() (map[routeKey]localExtras, error) {
	routes, err := dumpSeg6Local(a.ns)
	if err != nil {
		return nil, err
	}
	out := make(map[routeKey]localExtras, len(routes))
	for _, r := range routes {
		nr := netlink.Route{Table: r.Table, Dst: ipNet(r.Dst)}
		_, counted := parseCounters(r.Encap)
		out[keyOf(&nr, netlink.FAMILY_V6)] = localExtras{flavor: parseFlavor(r.Encap), count: counted}
	}
	return out, nil
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
// once. SIDs the previous state held as they are now were checked by the
// apply that installed them; flavored ones are checked every time, as
// before counters.
func (a *applier) sidExtras() error {
	var have map[routeKey]localExtras
	for _, s := range a.node.SIDs {
		if s.Datapath == state.ProgramDatapath || (a.prev.hasSID(s) && s.NextCSID == (state.CSIDFlavor{})) {
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
		if have == nil {
			if have, err = a.seg6Extras(); err != nil {
				return err
			}
		}
		k := keyOf(nr, nr.Family)
		got, ok := have[k]
		if !ok && a.dry {
			// A dry run did not add the route it reported missing.
			continue
		}
		if got == (localExtras{flavor: want.flavor, count: want.count}) {
			continue
		}
		h := a.ns.Netlink()
		what := fmt.Sprintf("sid %s %s", s.SID, s.Behavior)
		if got.flavor != want.flavor {
			what += " flavor next-csid"
		}
		if got.count != want.count {
			what += " count"
		}
		prev := *nr
		prev.Encap = &localEncap{SEG6LocalEncap: want.SEG6LocalEncap, flavor: got.flavor, count: got.count}
		if err := a.change("replace "+what,
			func() error { return wrap(h.RouteReplace(nr), "replace %s", what) },
			func() error { return h.RouteReplace(&prev) }); err != nil {
			return err
		}
		have[k] = localExtras{flavor: want.flavor, count: want.count}
	}
	return nil
}
