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

// csidEncap is a seg6local encap with the NEXT-C-SID flavor (RFC 9800
// section 4.1): the library's encap plus the nested SEG6_LOCAL_FLAVORS
// attribute, which the kernel parses strictly (NLA_F_NESTED set).
type csidEncap struct {
	netlink.SEG6LocalEncap
	flavor state.CSIDFlavor
}

func (e *csidEncap) Encode() ([]byte, error) {
	b, err := e.SEG6LocalEncap.Encode()
	if err != nil {
		return nil, err
	}
	flv := nl.NewRtAttr(unix.NLA_F_NESTED|seg6LocalFlavors, nil)
	flv.AddRtAttr(seg6LocalFlvOperation, nl.Uint32Attr(1<<seg6LocalFlvOpNextCSID))
	flv.AddRtAttr(seg6LocalFlvLCBlockBits, []byte{uint8(e.flavor.BlockBits)})
	flv.AddRtAttr(seg6LocalFlvLCNodeFn, []byte{uint8(e.flavor.NodeFunctionBits)})
	return append(b, flv.Serialize()...), nil
}

func (e *csidEncap) String() string {
	return fmt.Sprintf("%s flavors next-csid lblen %d nflen %d", e.SEG6LocalEncap.String(), e.flavor.BlockBits, e.flavor.NodeFunctionBits)
}

func (e *csidEncap) Equal(x netlink.Encap) bool {
	o, ok := x.(*csidEncap)
	return ok && o.flavor == e.flavor && e.SEG6LocalEncap.Equal(&o.SEG6LocalEncap)
}

// withFlavor gives route r (built by SIDRoute) the SID's flavor, if any.
func withFlavor(r *netlink.Route, s state.LocalSID) {
	e, ok := r.Encap.(*netlink.SEG6LocalEncap)
	if !ok || s.NextCSID == (state.CSIDFlavor{}) {
		return
	}
	r.Encap = &csidEncap{SEG6LocalEncap: *e, flavor: s.NextCSID}
}

// seg6Flavors reads the NEXT-C-SID flavor of every IPv6 seg6local route
// in the namespace, by destination prefix and table: the library decodes
// seg6local routes without their flavors, so the applier asks the kernel
// itself (one dump, only on nodes with flavored SIDs).
func (a *applier) seg6Flavors() (map[routeKey]state.CSIDFlavor, error) {
	out := map[routeKey]state.CSIDFlavor{}
	var msgs [][]byte
	err := a.ns.Do(func() error {
		req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
		msg := &nl.RtMsg{RtMsg: unix.RtMsg{Family: unix.AF_INET6}}
		req.AddData(msg)
		var err error
		msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dump ipv6 routes: %w", err)
	}
	for _, m := range msgs {
		if len(m) < unix.SizeofRtMsg {
			continue
		}
		rt := nl.DeserializeRtMsg(m)
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofRtMsg:])
		if err != nil {
			return nil, fmt.Errorf("parse route: %w", err)
		}
		table := int(rt.Table)
		dst := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		var flv state.CSIDFlavor
		for _, at := range attrs {
			switch at.Attr.Type {
			case unix.RTA_TABLE:
				if len(at.Value) >= 4 {
					table = int(binary.NativeEndian.Uint32(at.Value))
				}
			case unix.RTA_DST:
				if a, ok := netip.AddrFromSlice(at.Value); ok {
					dst = netip.PrefixFrom(a, int(rt.Dst_len))
				}
			case unix.RTA_ENCAP:
				flv = parseFlavor(at.Value)
			}
		}
		if flv != (state.CSIDFlavor{}) {
			r := netlink.Route{Table: table, Dst: ipNet(dst)}
			out[keyOf(&r, netlink.FAMILY_V6)] = flv
		}
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

// csidFlavors makes the flavored SID routes carry their flavor: the
// route diff (encapSig) cannot see flavors in what it reads back, so a
// route that lost its flavor, or had another, is replaced here.
func (a *applier) csidFlavors() error {
	var have map[routeKey]state.CSIDFlavor
	for _, s := range a.node.SIDs {
		if s.NextCSID == (state.CSIDFlavor{}) {
			continue
		}
		if have == nil {
			var err error
			if have, err = a.seg6Flavors(); err != nil {
				return err
			}
		}
		dev, err := a.sidDev()
		if err != nil {
			return err
		}
		nr, err := SIDRoute(s, dev, a.ifindex)
		if err != nil {
			return err
		}
		k := keyOf(nr, nr.Family)
		if have[k] == s.NextCSID {
			continue
		}
		h := a.ns.Netlink()
		what := fmt.Sprintf("sid %s %s flavor next-csid", s.SID, s.Behavior)
		plain := *nr
		plain.Encap = &nr.Encap.(*csidEncap).SEG6LocalEncap
		if err := a.change("replace "+what,
			func() error { return wrap(h.RouteReplace(nr), "replace %s", what) },
			func() error { return h.RouteReplace(&plain) }); err != nil {
			return err
		}
	}
	return nil
}
