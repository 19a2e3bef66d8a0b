package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/state"
)

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func tableID(t int) int {
	if t == 0 {
		return unix.RT_TABLE_MAIN
	}
	return t
}

// wireSegments turns a travel-order segment list into the order the kernel
// wants in the SRH it is given: Segment List[0] is the last segment (RFC 8754
// section 2). In inline mode (H.Insert) the kernel writes the packet's
// original destination into Segment List[0] itself, so the list carries an
// empty slot there, as iproute2 does.
func wireSegments(e *state.SREncap) []net.IP {
	var out []net.IP
	if e.Mode == state.ModeInsert {
		out = append(out, net.IP(make([]byte, net.IPv6len)))
	}
	for _, s := range slices.Backward(e.Segments) {
		out = append(out, net.IP(s.AsSlice()))
	}
	return out
}

// TravelSegments is the inverse of the kernel encoding: it returns the
// travel-order segment list of a seg6 encap read back from the kernel.
func TravelSegments(e *netlink.SEG6Encap) []netip.Addr {
	segs := e.Segments
	if e.Mode == nl.SEG6_IPTUN_MODE_INLINE && len(segs) > 0 {
		segs = segs[1:]
	}
	var out []netip.Addr
	for _, s := range slices.Backward(segs) {
		a, _ := netip.AddrFromSlice(s)
		out = append(out, a.Unmap())
	}
	return out
}

func (a *applier) ifindex(name string) (int, error) {
	if name == "" {
		return 0, nil
	}
	if idx, ok := a.ifindexes[name]; ok {
		return idx, nil
	}
	l, err := a.link(name)
	if err != nil {
		return 0, err
	}
	if a.ifindexes == nil {
		a.ifindexes = map[string]int{}
	}
	a.ifindexes[name] = l.Attrs().Index
	return l.Attrs().Index, nil
}

// RouteFor builds the netlink form of a desired route; ifindex resolves
// interface names in the node's namespace.
func RouteFor(r state.Route, ifindex func(string) (int, error)) (*netlink.Route, error) {
	if !r.Dst.IsValid() {
		return nil, fmt.Errorf("route without destination: %w", ErrBadState)
	}
	nr := &netlink.Route{
		Family:   family(r.Dst.Addr()),
		Table:    tableID(r.Table),
		Dst:      ipNet(r.Dst.Masked()),
		Protocol: RTProto,
	}
	if r.Via.IsValid() {
		nr.Gw = net.IP(r.Via.AsSlice())
		if r.Via.Is6() != r.Dst.Addr().Is6() {
			// RFC 5549-style IPv4 via IPv6 next hop.
			nr.Gw = nil
			nr.Via = &netlink.Via{AddrFamily: family(r.Via), Addr: net.IP(r.Via.AsSlice())}
		}
	}
	idx, err := ifindex(r.Dev)
	if err != nil {
		return nil, err
	}
	nr.LinkIndex = idx
	if r.Encap != nil {
		if len(r.Encap.Segments) == 0 {
			return nil, fmt.Errorf("route %s: empty segment list: %w", r.Dst, ErrBadState)
		}
		mode := nl.SEG6_IPTUN_MODE_ENCAP
		switch r.Encap.Mode {
		case state.ModeEncap:
		case state.ModeInsert:
			if r.Dst.Addr().Is4() {
				return nil, fmt.Errorf("route %s: inline mode needs an ipv6 packet: %w", r.Dst, ErrBadState)
			}
			mode = nl.SEG6_IPTUN_MODE_INLINE
		default:
			return nil, fmt.Errorf("route %s: unknown encap mode %q: %w", r.Dst, r.Encap.Mode, ErrBadState)
		}
		e := netlink.SEG6Encap{Mode: mode, Segments: wireSegments(r.Encap)}
		nr.Encap = &e
		if len(r.Encap.TLVs) > 0 {
			if len(r.Encap.TLVs)%16 != 0 || len(e.Segments)*16+len(r.Encap.TLVs) > 255*8 {
				return nil, fmt.Errorf("route %s: tlv area of %d bytes, want a multiple of 16 that fits the srh: %w", r.Dst, len(r.Encap.TLVs), ErrBadState)
			}
			nr.Encap = &tlvEncap{SEG6Encap: e, tlvs: slices.Clone(r.Encap.TLVs)}
		}
	}
	return nr, nil
}

// tlvEncap is a seg6 encap whose SRH carries TLVs after its segments
// (state.SREncap.TLVs), which vishvananda/netlink v1.3.1 cannot encode;
// the kernel copies them into every packet (seg6_do_srh_encap) once
// seg6_validate_srh found that they tile the area.
type tlvEncap struct {
	netlink.SEG6Encap
	tlvs []byte
}

// Encode writes SEG6_IPTUNNEL_SRH (struct seg6_iptunnel_encap: mode,
// then the SRH) as the library does, with Hdr Ext Len counting the TLVs.
func (e *tlvEncap) Encode() ([]byte, error) {
	srh, err := nl.EncodeSEG6Encap(e.Mode, e.Segments)
	if err != nil {
		return nil, err
	}
	srh[4+1] = uint8((len(e.Segments)*16 + len(e.tlvs)) / 8)
	srh = append(srh, e.tlvs...)
	b := make([]byte, 4, 4+len(srh))
	nl.NativeEndian().PutUint16(b, uint16(len(b)+len(srh)))
	nl.NativeEndian().PutUint16(b[2:], nl.SEG6_IPTUNNEL_SRH)
	return append(b, srh...), nil
}

func (e *tlvEncap) String() string {
	return fmt.Sprintf("%s tlvs %x", e.SEG6Encap.String(), e.tlvs)
}

func (e *tlvEncap) Equal(x netlink.Encap) bool {
	o, ok := x.(*tlvEncap)
	return ok && bytes.Equal(o.tlvs, e.tlvs) && e.SEG6Encap.Equal(&o.SEG6Encap)
}

// readBack is the route as the library reads it back: its decoder cuts
// the SRH after the fixed header into 16-byte segments and drops Last
// Entry, the field that tells segments from TLVs, so the TLV area comes
// back as segments after the real ones.
func (e *tlvEncap) readBack() *netlink.SEG6Encap {
	r := &netlink.SEG6Encap{Mode: e.Mode, Segments: slices.Clone(e.Segments)}
	for b := e.tlvs; len(b) >= 16; b = b[16:] {
		r.Segments = append(r.Segments, net.IP(slices.Clone(b[:16])))
	}
	return r
}

// SIDRoute builds the seg6local route serving a kernel-datapath SID
// (RFC 8986 section 4). dev is the interface the route hangs off; the
// behavior does not depend on it.
func SIDRoute(s state.LocalSID, dev int, ifindex func(string) (int, error)) (*netlink.Route, error) {
	if !s.SID.IsValid() || !s.SID.Addr().Is6() {
		return nil, fmt.Errorf("sid %s: not an ipv6 prefix: %w", s.SID, ErrBadState)
	}
	if s.Datapath == state.ProgramDatapath {
		// An SR proxy's SID (End.AS, End.AD, ...): the kernel has no
		// such behaviour; the NF's program serves it at tcx ingress.
		// The route makes the SID an ordinary route (advertised like
		// any other) and drops what the program does not take, so no
		// packet is forwarded around the NF.
		if !s.Behavior.IsProxy() {
			return nil, fmt.Errorf("sid %s: behavior %q is not served by a program: %w", s.SID, s.Behavior, ErrBadState)
		}
		return &netlink.Route{
			Family:   netlink.FAMILY_V6,
			Table:    unix.RT_TABLE_MAIN,
			Dst:      ipNet(s.SID.Masked()),
			Type:     unix.RTN_BLACKHOLE,
			Protocol: RTProto,
		}, nil
	}
	e := &netlink.SEG6LocalEncap{}
	e.Flags[nl.SEG6_LOCAL_ACTION] = true
	need6 := func() error {
		if !s.NH6.IsValid() {
			return fmt.Errorf("sid %s %s: missing nh6: %w", s.SID, s.Behavior, ErrBadState)
		}
		e.Flags[nl.SEG6_LOCAL_NH6] = true
		e.In6Addr = net.IP(s.NH6.AsSlice())
		return nil
	}
	switch s.Behavior {
	case state.End:
		e.Action = nl.SEG6_LOCAL_ACTION_END
	case state.EndX:
		// RFC 8986 section 4.2: End.X forwards to a layer-3 adjacency.
		e.Action = nl.SEG6_LOCAL_ACTION_END_X
		if err := need6(); err != nil {
			return nil, err
		}
		if s.OIF != "" {
			idx, err := ifindex(s.OIF)
			if err != nil {
				return nil, err
			}
			e.Flags[nl.SEG6_LOCAL_OIF] = true
			e.Oif = idx
		}
	case state.EndDX6:
		e.Action = nl.SEG6_LOCAL_ACTION_END_DX6
		if err := need6(); err != nil {
			return nil, err
		}
	case state.EndDX4:
		e.Action = nl.SEG6_LOCAL_ACTION_END_DX4
		if !s.NH4.IsValid() {
			return nil, fmt.Errorf("sid %s %s: missing nh4: %w", s.SID, s.Behavior, ErrBadState)
		}
		e.Flags[nl.SEG6_LOCAL_NH4] = true
		e.InAddr = net.IP(s.NH4.AsSlice())
	case state.EndDT6:
		// Legacy End.DT6 with a plain table (no VRF on this kernel).
		e.Action = nl.SEG6_LOCAL_ACTION_END_DT6
		e.Flags[nl.SEG6_LOCAL_TABLE] = true
		e.Table = tableID(s.Table)
	case state.EndB6Encaps:
		if len(s.Segments) == 0 {
			return nil, fmt.Errorf("sid %s %s: no segments: %w", s.SID, s.Behavior, ErrBadState)
		}
		e.Action = nl.SEG6_LOCAL_ACTION_END_B6_ENCAPS
		e.Flags[nl.SEG6_LOCAL_SRH] = true
		e.Segments = wireSegments(&state.SREncap{Segments: s.Segments})
	default:
		return nil, fmt.Errorf("sid %s: unsupported behavior %q: %w", s.SID, s.Behavior, ErrBadState)
	}
	r := &netlink.Route{
		Family:    netlink.FAMILY_V6,
		Table:     unix.RT_TABLE_MAIN,
		Dst:       ipNet(s.SID.Masked()),
		LinkIndex: dev,
		Encap:     e,
		Protocol:  RTProto,
	}
	withExtras(r, s)
	return r, nil
}

// encapSig is a comparable description of a route's encapsulation.
func encapSig(e netlink.Encap) string {
	switch e := e.(type) {
	case nil:
		return ""
	case *netlink.SEG6Encap:
		var b strings.Builder
		fmt.Fprintf(&b, "seg6 mode=%d", e.Mode)
		for _, s := range e.Segments {
			b.WriteString(" " + s.String())
		}
		return b.String()
	case *netlink.SEG6LocalEncap:
		var b strings.Builder
		fmt.Fprintf(&b, "seg6local action=%d", e.Action)
		if e.Flags[nl.SEG6_LOCAL_NH4] {
			fmt.Fprintf(&b, " nh4=%s", e.InAddr)
		}
		if e.Flags[nl.SEG6_LOCAL_NH6] {
			fmt.Fprintf(&b, " nh6=%s", e.In6Addr)
		}
		if e.Flags[nl.SEG6_LOCAL_OIF] {
			fmt.Fprintf(&b, " oif=%d", e.Oif)
		}
		if e.Flags[nl.SEG6_LOCAL_TABLE] {
			fmt.Fprintf(&b, " table=%d", e.Table)
		}
		if e.Flags[nl.SEG6_LOCAL_SRH] {
			b.WriteString(" srh")
			for _, s := range e.Segments {
				b.WriteString(" " + s.String())
			}
		}
		return b.String()
	case *tlvEncap:
		return encapSig(e.readBack())
	case *localEncap:
		// Read-back routes carry no flavor (the library drops it):
		// sidExtras compares flavors and counters itself.
		return encapSig(&e.SEG6LocalEncap)
	default:
		return fmt.Sprintf("type=%d", e.Type())
	}
}

func prefixOf(n *net.IPNet, fam int) string {
	if n == nil {
		if fam == netlink.FAMILY_V4 {
			return "0.0.0.0/0"
		}
		return "::/0"
	}
	return n.String()
}

// sameDst reports whether have is a route to want's destination in want's table.
func sameDst(want, have *netlink.Route) bool {
	return have.Table == want.Table && prefixOf(have.Dst, want.Family) == prefixOf(want.Dst, want.Family)
}

// RouteMatches reports whether have already is want. Fields want leaves
// unset (gateway, device, metric) are not compared: the kernel fills them
// in.
func RouteMatches(want, have *netlink.Route) bool {
	if !sameDst(want, have) {
		return false
	}
	if want.Priority != 0 && want.Priority != have.Priority {
		return false
	}
	if want.Gw != nil && !want.Gw.Equal(have.Gw) {
		return false
	}
	if want.Via != nil && (have.Via == nil || want.Via.String() != have.Via.String()) {
		return false
	}
	if want.LinkIndex != 0 && want.LinkIndex != have.LinkIndex {
		return false
	}
	if want.Type != 0 && want.Type != have.Type {
		return false
	}
	return encapSig(want.Encap) == encapSig(have.Encap)
}

// listRoutes lists the routes of one family in every table of the namespace.
func listRoutes(h *netlink.Handle, fam int) ([]netlink.Route, error) {
	rs, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return rs, nil
}

// routeKey names the routes to one destination in one table.
type routeKey struct {
	fam, table int
	dst        string
}

func keyOf(r *netlink.Route, fam int) routeKey {
	return routeKey{fam, r.Table, prefixOf(r.Dst, fam)}
}

// routeView is the node's routes of one family, read from the kernel at
// most once per table per Apply and kept up to date in memory as Apply
// changes them: looking a route up is a map access, so applying n routes
// costs one dump per table touched (or one dump of every table, once many
// are touched) and n changes, not n dumps.
type routeView struct {
	// best is, per destination, the route the kernel uses (lowest metric).
	best map[routeKey]netlink.Route
	// tables read so far; full once every table was read in one dump.
	tables map[int]bool
	full   bool
}

// perTableDumps is how many tables Apply reads one by one before it
// reads all tables in one dump instead: a change to a few chains reads
// only their tables, a full apply reads everything once.
const perTableDumps = 8

// routeViewNoLoad returns the view of a family without reading anything.
func (a *applier) routeViewNoLoad(fam int) (*routeView, error) {
	v, ok := a.views[fam]
	if !ok {
		v = &routeView{best: map[routeKey]netlink.Route{}, tables: map[int]bool{}}
		if a.views == nil {
			a.views = map[int]*routeView{}
		}
		a.views[fam] = v
	}
	return v, nil
}

func (a *applier) routeView(fam, table int) (*routeView, error) {
	v, _ := a.routeViewNoLoad(fam)
	if v.full || v.tables[table] {
		return v, nil
	}
	var rs []netlink.Route
	var err error
	if len(v.tables) < perTableDumps {
		rs, err = a.listTable(fam, table)
		v.tables[table] = true
	} else {
		rs, err = listRoutes(a.ns.Netlink(), fam)
		v.full = true
		clear(v.best)
	}
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		k := keyOf(&r, fam)
		if b, ok := v.best[k]; !ok || r.Priority < b.Priority {
			v.best[k] = r
		}
	}
	return v, nil
}

// lookupRoute finds the route the kernel uses for want's destination in
// want's table. For the first few main-table routes of an Apply, while
// that table has not been read, it asks the kernel's FIB for that one
// route (RTM_GETROUTE with RTM_F_FIB_MATCH): the main table of an ingress
// holds a route per prefix chain, and a change to one chain should not
// read all of them. Only an answer naming exactly that table and prefix is
// taken; anything else, and any route after the first few (a full apply,
// where one dump is cheaper), reads the table.
func (a *applier) lookupRoute(want *netlink.Route, k routeKey) (netlink.Route, bool, error) {
	v, err := a.routeViewNoLoad(want.Family)
	if err != nil {
		return netlink.Route{}, false, err
	}
	if want.Table == unix.RT_TABLE_MAIN && !v.full && !v.tables[want.Table] && want.Dst != nil && a.fibLookups < perTableDumps {
		a.fibLookups++
		if rs, err := a.ns.Netlink().RouteGetWithOptions(want.Dst.IP, &netlink.RouteGetOptions{FIBMatch: true}); err == nil &&
			len(rs) == 1 && rs[0].Table == want.Table && keyOf(&rs[0], want.Family) == k {
			return rs[0], true, nil
		}
	}
	v, err = a.routeView(want.Family, want.Table)
	if err != nil {
		return netlink.Route{}, false, err
	}
	r, ok := v.best[k]
	return r, ok, nil
}

// listTable dumps one routing table. The kernel filters by table only on
// a socket with NETLINK_GET_STRICT_CHK (Linux >= 4.20), so this uses a
// handle of its own with that option; it answers ENOENT for a table that
// does not exist yet.
func (a *applier) listTable(fam, table int) ([]netlink.Route, error) {
	if a.strict == nil {
		h, err := netlink.NewHandleAt(a.ns.Handle(), unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("open netlink in %s: %w", a.ns.Name, err)
		}
		if err := h.SetStrictCheck(true); err != nil {
			h.Close()
			return nil, fmt.Errorf("set netlink strict check: %w", err)
		}
		a.strict = h
	}
	rs, err := a.strict.RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list routes of table %d: %w", table, err)
	}
	return rs, nil
}

// set records that r is now the route the kernel uses for its key.
func (v *routeView) set(r netlink.Route, fam int) {
	k := keyOf(&r, fam)
	v.best[k] = r
}

// ensureRoute adds want, or replaces the route to the same destination
// that the kernel uses, journaling the inverse. A route like want that a
// route with a lower metric shadows does not count: traffic follows the
// other one.
func (a *applier) ensureRoute(what string, want *netlink.Route) error {
	h := a.ns.Netlink()
	k := keyOf(want, want.Family)
	old, ok, err := a.lookupRoute(want, k)
	if err != nil {
		return err
	}
	v, err := a.routeViewNoLoad(want.Family)
	if err != nil {
		return err
	}
	if !ok {
		if err := a.change("add "+what,
			func() error { return wrap(retryNoMem(func() error { return h.RouteAdd(want) }), "add %s", what) },
			func() error { return h.RouteDel(want) }); err != nil {
			return err
		}
		v.set(*want, want.Family)
		return nil
	}
	if RouteMatches(want, &old) {
		return nil
	}
	// The kernel replaces the route with the same metric (IPv6) or the
	// same tos and priority (IPv4); with any other metric it would add a
	// second route next to prev and traffic would keep following prev.
	// So the new route takes prev's metric, and undo puts prev back in
	// its place.
	prev := restorable(old)
	repl := *want
	repl.Priority = prev.Priority
	if err := a.change("replace "+what,
		func() error {
			return wrap(retryNoMem(func() error { return h.RouteReplace(&repl) }), "replace %s", what)
		},
		func() error { return h.RouteReplace(&prev) }); err != nil {
		return err
	}
	v.set(repl, want.Family)
	return nil
}

// kernelFlags are next-hop flags the kernel reports but refuses in a
// request (IPv4 answers EINVAL to DEAD and LINKDOWN).
const kernelFlags = unix.RTNH_F_DEAD | unix.RTNH_F_LINKDOWN | unix.RTNH_F_OFFLOAD | unix.RTNH_F_TRAP | unix.RTNH_F_UNRESOLVED

// restorable makes a route read from the kernel fit to be written back:
// without the flags only the kernel sets (a route whose device has no
// carrier is reported "linkdown").
func restorable(r netlink.Route) netlink.Route {
	r.Flags &^= kernelFlags
	if len(r.MultiPath) > 0 {
		mp := make([]*netlink.NexthopInfo, len(r.MultiPath))
		for i, nh := range r.MultiPath {
			c := *nh
			c.Flags &^= kernelFlags
			mp[i] = &c
		}
		r.MultiPath = mp
	}
	return r
}

func (a *applier) routes() error {
	for _, r := range a.node.Routes {
		if a.prev.hasRoute(r) {
			continue
		}
		nr, err := RouteFor(r, a.ifindex)
		if err != nil {
			return err
		}
		if err := a.ensureRoute("route "+r.Dst.String(), nr); err != nil {
			return err
		}
	}
	return nil
}

// sidDev picks the interface a seg6local route hangs off: the first
// interface of the node (the kernel requires a device; End and the
// decapsulating behaviors do not use it).
func (a *applier) sidDev() (int, error) {
	name := "lo"
	if len(a.node.Interfaces) > 0 {
		name = a.node.Interfaces[0].Name
	}
	return a.ifindex(name)
}

// localAddr reports whether addr is one of the node's own addresses.
func localAddr(node state.Node, addr netip.Addr) bool {
	for _, p := range node.Loopback {
		if p.Addr() == addr {
			return true
		}
	}
	for _, i := range node.Interfaces {
		for _, p := range i.Addrs {
			if p.Addr() == addr {
				return true
			}
		}
	}
	return false
}

func (a *applier) sids() error {
	// Which SIDs ensureRoute found in place: only their routes may lack
	// what the diff cannot see (sidExtras).
	var found []bool
	for i, s := range a.node.SIDs {
		if s.Behavior == state.EndDX6 && localAddr(a.node, s.NH6) {
			// The kernel accepts this route and then drops every packet
			// silently (MACHINE-NOTES); refuse it loudly instead.
			return fmt.Errorf("sid %s: End.DX6 next hop %s is the node's own address (use End.DT6 for local delivery): %w",
				s.SID, s.NH6, ErrBadState)
		}
		if a.prev.hasSID(s) {
			continue
		}
		// An eBPF SID gets its kernel seg6local route too: the End
		// program hands the kernel, untouched, every packet its fast
		// path does not complete (docs/datapath.md, slow path).
		dev, err := a.sidDev()
		if err != nil {
			return err
		}
		nr, err := SIDRoute(s, dev, a.ifindex)
		if err != nil {
			return err
		}
		changes := len(a.j.steps)
		if err := a.ensureRoute(fmt.Sprintf("sid %s %s", s.SID, s.Behavior), nr); err != nil {
			return err
		}
		if len(a.j.steps) == changes {
			if found == nil {
				found = make([]bool, len(a.node.SIDs))
			}
			found[i] = true
		}
	}
	return a.sidExtras(found)
}

// RuleFor builds the netlink form of a policy rule.
func RuleFor(r state.Rule) (*netlink.Rule, error) {
	nr := netlink.NewRule()
	nr.Protocol = RTProto
	nr.Priority = r.Priority
	nr.Table = tableID(r.Table)
	switch r.Family {
	case 4:
		nr.Family = netlink.FAMILY_V4
	case 6:
		nr.Family = netlink.FAMILY_V6
	default:
		return nil, fmt.Errorf("rule %d: family %d: %w", r.Priority, r.Family, ErrBadState)
	}
	if r.Src.IsValid() {
		nr.Src = ipNet(r.Src.Masked())
	}
	if r.Dst.IsValid() {
		nr.Dst = ipNet(r.Dst.Masked())
	}
	nr.IPProto = int(r.IPProto)
	if r.SPort != (state.PortRange{}) {
		nr.Sport = netlink.NewRulePortRange(r.SPort.From, max(r.SPort.To, r.SPort.From))
	}
	if r.DPort != (state.PortRange{}) {
		nr.Dport = netlink.NewRulePortRange(r.DPort.From, max(r.DPort.To, r.DPort.From))
	}
	nr.IifName = r.IIF
	return nr, nil
}

func ruleSig(r *netlink.Rule) string {
	port := func(p *netlink.RulePortRange) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%d-%d", p.Start, p.End)
	}
	ipn := func(n *net.IPNet) string {
		if n == nil {
			return "all"
		}
		return n.String()
	}
	return fmt.Sprintf("pref=%d src=%s dst=%s proto=%d sport=%s dport=%s iif=%s table=%d",
		r.Priority, ipn(r.Src), ipn(r.Dst), r.IPProto, port(r.Sport), port(r.Dport), r.IifName, r.Table)
}

// ruleView is the node's policy rules of one family by signature, dumped
// once per Apply like routeView.
func (a *applier) ruleView(fam int) (map[string]netlink.Rule, error) {
	if v, ok := a.ruleViews[fam]; ok {
		return v, nil
	}
	have, err := a.ns.Netlink().RuleList(fam)
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	v := make(map[string]netlink.Rule, len(have))
	for _, r := range have {
		v[ruleSig(&r)] = r
	}
	if a.ruleViews == nil {
		a.ruleViews = map[int]map[string]netlink.Rule{}
	}
	a.ruleViews[fam] = v
	return v, nil
}

func (a *applier) rules() error {
	h := a.ns.Netlink()
	for _, r := range a.node.Rules {
		if a.prev.hasRule(r) {
			continue
		}
		want, err := RuleFor(r)
		if err != nil {
			return err
		}
		sig := ruleSig(want)
		have, err := a.ruleView(want.Family)
		if err != nil {
			return err
		}
		if _, ok := have[sig]; ok {
			continue
		}
		if err := a.change("rule "+sig,
			func() error { return wrap(h.RuleAdd(want), "add rule %s", sig) },
			func() error { return h.RuleDel(want) }); err != nil {
			return err
		}
		have[sig] = *want
	}
	return nil
}

// prune removes what the previous desired state (Options.Remove) had and
// this one has not: routes, seg6local SIDs and policy rules of chains and
// NFs that were deleted or changed. It runs after everything desired is in
// place, so traffic of a changed chain moves to its new policy before the
// old one goes, and it touches only what the previous state named and the
// kernel still holds as that state wrote it.
func (a *applier) prune() error {
	if a.remove == nil {
		return nil
	}
	if err := a.prunePrograms(); err != nil {
		return err
	}
	h := a.ns.Netlink()
	rules := map[state.Rule]bool{}
	for _, r := range a.node.Rules {
		r.Chain = ""
		rules[r] = true
	}
	for _, r := range a.remove.Rules {
		if r.Chain = ""; rules[r] {
			continue
		}
		old, err := RuleFor(r)
		if err != nil {
			return err
		}
		sig := ruleSig(old)
		have, err := a.ruleView(old.Family)
		if err != nil {
			return err
		}
		held, ok := have[sig]
		if !ok {
			continue
		}
		// The kernel matches a rule's protocol on delete when one is
		// given: take the one it holds (rules of srchain before RTProto
		// have none).
		old.Protocol = held.Protocol
		if err := a.change("delete rule "+sig,
			func() error { return wrap(h.RuleDel(old), "delete rule %s", sig) },
			func() error { return h.RuleAdd(old) }); err != nil {
			return err
		}
		delete(have, sig)
	}
	slots := map[slot]bool{}
	for _, r := range a.node.Routes {
		slots[routeSlot(r)] = true
	}
	for _, s := range a.node.SIDs {
		slots[sidSlot(s)] = true
	}
	var olds []*netlink.Route
	for _, r := range a.remove.Routes {
		if slots[routeSlot(r)] {
			continue
		}
		nr, err := RouteFor(r, a.ifindexOrZero)
		if err != nil {
			return err
		}
		olds = append(olds, nr)
	}
	for _, s := range a.remove.SIDs {
		if slots[sidSlot(s)] {
			continue
		}
		dev, _ := a.sidDev()
		nr, err := SIDRoute(s, dev, a.ifindexOrZero)
		if err != nil {
			return err
		}
		olds = append(olds, nr)
	}
	for _, old := range olds {
		k := keyOf(old, old.Family)
		v, err := a.routeView(old.Family, old.Table)
		if err != nil {
			return err
		}
		have, ok := v.best[k]
		if !ok || !RouteMatches(old, &have) {
			continue // gone already, or no longer ours
		}
		prev := restorable(have)
		what := "route " + k.dst
		if k.table != unix.RT_TABLE_MAIN {
			what += fmt.Sprintf(" table %d", k.table)
		}
		if err := a.change("delete "+what,
			func() error { return wrap(h.RouteDel(&prev), "delete %s", what) },
			func() error { return h.RouteAdd(&prev) }); err != nil {
			return err
		}
		delete(v.best, k)
	}
	return nil
}

// prunePrograms removes, through their drivers, the programs of the
// previous state that this one no longer has (an NF deleted from the
// spec): same kind and NF is the same program.
func (a *applier) prunePrograms() error {
	for _, p := range a.remove.Programs {
		if slices.ContainsFunc(a.node.Programs, func(q state.Program) bool { return q.Kind == p.Kind && q.NF == p.NF }) {
			continue
		}
		d, ok := a.drivers[p.Kind]
		if !ok {
			continue // nothing could have attached it
		}
		old := *a.remove
		if err := a.change("remove program "+p.Kind+" "+p.NF,
			func() error { return wrap(d.Remove(a.ctx, a.ns, old, p), "remove program %s", p.Kind) },
			func() error {
				_, err := d.Apply(context.WithoutCancel(a.ctx), a.ns, old, p)
				return err
			}); err != nil {
			return err
		}
	}
	return nil
}

// ifindexOrZero resolves an interface of the previous state; one that is
// gone resolves to 0 (any device), which RouteMatches does not compare.
func (a *applier) ifindexOrZero(name string) (int, error) {
	idx, err := a.ifindex(name)
	if err != nil {
		return 0, nil
	}
	return idx, nil
}

// retryNoMem runs f again while it fails with ENOMEM, a few times with a
// growing pause. The kernel builds a seg6 route's per-CPU dst cache with
// an atomic allocation (net/ipv6/seg6_iptunnel.c, dst_cache_init with
// GFP_ATOMIC), which fails once the per-CPU allocator's atomic reserve is
// used up: adding thousands of SR policies in a row hits it ("percpu:
// allocation failed ... atomic alloc failed" in dmesg) until the
// allocator's background work refills the reserve, within milliseconds.
func retryNoMem(f func() error) error {
	pause := time.Millisecond
	for range 12 {
		err := f()
		if !errors.Is(err, unix.ENOMEM) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
	return f()
}
