package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/state"
)

// Behavior is an endpoint behavior the End program implements; the values
// are the SRCHAIN_BEH_* constants of bpf/lib/end.h.
type Behavior uint32

const (
	BehaviorEnd  Behavior = 1 // RFC 8986 4.1
	BehaviorEndX Behavior = 2 // RFC 8986 4.2
)

// String returns the RFC 8986 name.
func (b Behavior) String() string {
	switch b {
	case BehaviorEnd:
		return string(state.End)
	case BehaviorEndX:
		return string(state.EndX)
	}
	return fmt.Sprintf("behavior-%d", uint32(b))
}

// Errors callers branch on.
var (
	ErrUnsupportedBehavior = errors.New("behavior not supported by the ebpf datapath")
	ErrBadSID              = errors.New("bad sid")
	ErrNoSID               = errors.New("sid not configured")
	ErrFull                = errors.New("sid table full")
	ErrAttached            = errors.New("already attached")
	ErrNotAttached         = errors.New("not attached")
)

// BehaviorFromState maps a compiler behavior to the program's.
func BehaviorFromState(b state.Behavior) (Behavior, error) {
	switch b {
	case state.End:
		return BehaviorEnd, nil
	case state.EndX:
		return BehaviorEndX, nil
	}
	return 0, fmt.Errorf("map behavior %q: %w", b, ErrUnsupportedBehavior)
}

// maxSIDs is SRCHAIN_MAX_SID_COUNTERS (bpf/lib/counters.h): the SID map
// size and the number of counter slots.
const maxSIDs = 1024

// sidEntry mirrors struct sid_entry (bpf/lib/end.h).
type sidEntry struct {
	Behavior uint32
	OIF      uint32
	Counter  uint32
	Flags    uint32
	NH6      [16]byte
}

// EndOptions configures LoadEnd.
type EndOptions struct {
	// PinPath, when set, is a bpffs directory (conventionally
	// /sys/fs/bpf/srchain/<scope>) where the maps and the tcx links are
	// pinned, so forwarding survives the process; a later LoadEnd with
	// the same PinPath reuses the pinned maps (SIDs and counters).
	PinPath string
	// Logger receives attach/detach events; nil means slog.Default().
	Logger *slog.Logger
	// StackForward makes the programs hand every rewritten packet to
	// the kernel stack instead of forwarding it themselves
	// (cfg_stack_forward in bpf/lib/end.h): netfilter FORWARD and
	// POSTROUTING rules, policy routing and the kernel's MTU handling
	// then apply on the End node, at the cost of speed. End.X SIDs then
	// follow the routing table for the new destination, not their
	// adjacency (docs/datapath.md).
	StackForward bool
}

// End is a loaded tc End/End.X program with its maps.
type End struct {
	objs endProgObjects
	xdp  endXdpProgObjects
	opts EndOptions
	log  *slog.Logger

	mu    sync.Mutex
	links map[attachPoint]link.Link
	slots map[netip.Addr]uint32
	used  [maxSIDs]bool
}

// LoadEnd loads the End program and its maps into the kernel. Loading does
// not depend on the current network namespace; Attach does.
//
// With a PinPath, maps pinned there are reused; a pinned map whose layout
// no longer matches the program (ebpf.ErrMapIncompatible, e.g. after an
// upgrade changed a map's size) is replaced by a fresh map, logged, and
// its old contents are lost (the SIDs must be set again). If loading fails,
// the pins this call created are removed again.
func LoadEnd(opts EndOptions) (_ *End, retErr error) {
	spec, err := loadEndProg()
	if err != nil {
		return nil, fmt.Errorf("load end spec: %w", err)
	}
	e := &End{opts: opts, links: make(map[attachPoint]link.Link), slots: make(map[netip.Addr]uint32)}
	e.log = opts.Logger
	if e.log == nil {
		e.log = slog.Default()
	}
	if opts.StackForward {
		if err := setStackForward(spec); err != nil {
			return nil, err
		}
	}
	var copts ebpf.CollectionOptions
	pinned := map[string]*ebpf.Map{}
	var created []string // pins this call made, removed on failure
	defer func() {
		if retErr == nil {
			return
		}
		for _, pin := range created {
			if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
				e.log.Warn("remove end map pin after failed load", "pin", pin, "err", err)
			}
		}
	}()
	if opts.PinPath != "" {
		if err := os.MkdirAll(opts.PinPath, 0o700); err != nil {
			return nil, fmt.Errorf("create pin path: %w", err)
		}
		copts.MapReplacements = make(map[string]*ebpf.Map)
		for name, ms := range spec.Maps {
			if !isEndSharedMap(name) {
				continue // .rodata and friends are never pinned
			}
			path := filepath.Join(opts.PinPath, name)
			m, err := ebpf.LoadPinnedMap(path, nil)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				closeMaps(pinned)
				return nil, fmt.Errorf("open pinned map %s: %w", name, err)
			}
			if err := ms.Compatible(m); err != nil {
				m.Close()
				if !errors.Is(err, ebpf.ErrMapIncompatible) {
					closeMaps(pinned)
					return nil, fmt.Errorf("check pinned map %s: %w", name, err)
				}
				// The pin goes; the running program (pinned link)
				// keeps its old map until Attach replaces it.
				if err := os.Remove(path); err != nil {
					closeMaps(pinned)
					return nil, fmt.Errorf("replace incompatible pinned map %s: %w", name, err)
				}
				e.log.Warn("pinned end map incompatible with this program, replaced by a new empty map",
					"map", name, "pin", path, "reason", err.Error())
				continue
			}
			pinned[name] = m
			copts.MapReplacements[name] = m
		}
	}
	err = spec.LoadAndAssign(&e.objs, &copts)
	closeMaps(pinned) // LoadAndAssign holds its own references
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load end program: %+v", ve)
		}
		return nil, fmt.Errorf("load end program: %w", err)
	}
	if opts.PinPath != "" {
		for name, m := range e.sharedMaps() {
			if _, reused := pinned[name]; reused || m.IsPinned() { // clones of pinned maps do not report IsPinned
				continue
			}
			path := filepath.Join(opts.PinPath, name)
			if err := m.Pin(path); err != nil {
				e.objs.Close()
				return nil, fmt.Errorf("pin map %s: %w", name, err)
			}
			created = append(created, path)
		}
	}
	if loadEndTestHook != nil {
		if err := loadEndTestHook(); err != nil {
			e.objs.Close()
			return nil, err
		}
	}
	if err := e.loadXDP(); err != nil {
		e.objs.Close()
		return nil, err
	}
	if err := e.loadSlots(); err != nil {
		e.objs.Close()
		e.xdp.Close()
		return nil, err
	}
	return e, nil
}

// loadEndTestHook, when set (tests only), runs after LoadEnd pinned the
// maps; an error makes LoadEnd fail there.
var loadEndTestHook func() error

// endSharedMaps are the maps the tc and XDP objects share and LoadEnd pins.
var endSharedMaps = []string{endProgMapSids, endProgMapDropCounters, endProgMapSidCounters, endProgMapFibCounters}

func isEndSharedMap(name string) bool { return slices.Contains(endSharedMaps, name) }

func (e *End) sharedMaps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		endProgMapSids: e.objs.Sids, endProgMapDropCounters: e.objs.DropCounters,
		endProgMapSidCounters: e.objs.SidCounters, endProgMapFibCounters: e.objs.FibCounters,
	}
}

// stackForwardVar is the load-time constant of bpf/lib/end.h.
const stackForwardVar = "cfg_stack_forward"

func setStackForward(spec *ebpf.CollectionSpec) error {
	v, ok := spec.Variables[stackForwardVar]
	if !ok {
		return fmt.Errorf("set %s: %w: variable missing", stackForwardVar, ErrBadMap)
	}
	if err := v.Set(uint32(1)); err != nil {
		return fmt.Errorf("set %s: %w", stackForwardVar, err)
	}
	return nil
}

// loadXDP loads the XDP twin (bpf/end_xdp.c) sharing the tc object's maps.
func (e *End) loadXDP() error {
	spec, err := loadEndXdpProg()
	if err != nil {
		return fmt.Errorf("load end xdp spec: %w", err)
	}
	if e.opts.StackForward {
		if err := setStackForward(spec); err != nil {
			return err
		}
	}
	opts := ebpf.CollectionOptions{MapReplacements: e.sharedMaps()}
	if err := spec.LoadAndAssign(&e.xdp, &opts); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load end xdp program: %+v", ve)
		}
		return fmt.Errorf("load end xdp program: %w", err)
	}
	return nil
}

// attachPoint names one attachment: an interface and tc or XDP.
type attachPoint struct {
	ifindex int
	xdp     bool
}

func (a attachPoint) String() string {
	if a.xdp {
		return fmt.Sprintf("xdp_%d", a.ifindex)
	}
	return fmt.Sprintf("tcx_ingress_%d", a.ifindex)
}

func closeMaps(ms map[string]*ebpf.Map) {
	for _, m := range ms {
		m.Close()
	}
}

// loadSlots rebuilds the counter slot allocation from a (pinned) SID map.
func (e *End) loadSlots() error {
	var key [16]byte
	var val sidEntry
	it := e.objs.Sids.Iterate()
	for it.Next(&key, &val) {
		if val.Counter < maxSIDs {
			e.used[val.Counter] = true
			e.slots[netip.AddrFrom16(key)] = val.Counter
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read pinned sids: %w", err)
	}
	return nil
}

// Program returns the tc program (for tests and for callers that attach
// it themselves).
func (e *End) Program() *ebpf.Program { return e.objs.SrchainEnd }

// XDPProgram returns the XDP twin.
func (e *End) XDPProgram() *ebpf.Program { return e.xdp.SrchainEndXdp }

// Attach attaches the tc program to ifindex's tcx ingress in the current
// network namespace: call it inside netns.NS.Do for a lab node. With a
// PinPath the link is pinned (and an existing pinned link for the same
// ifindex is taken over and updated to this program).
func (e *End) Attach(ifindex int) error {
	return e.attach(attachPoint{ifindex: ifindex})
}

// AttachXDP attaches the XDP twin to ifindex (native mode where the driver
// supports it). It handles End SIDs whose next hop the FIB resolves and
// passes everything else on, so the tc program must be attached to the
// same interface too (Attach).
func (e *End) AttachXDP(ifindex int) error {
	return e.attach(attachPoint{ifindex: ifindex, xdp: true})
}

func (e *End) attach(ap attachPoint) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.links[ap]; ok {
		return fmt.Errorf("attach end %s: %w", ap, ErrAttached)
	}
	prog := e.objs.SrchainEnd
	if ap.xdp {
		prog = e.xdp.SrchainEndXdp
	}
	pin := e.linkPin(ap)
	if pin != "" {
		l, err := e.takeOverPinnedLink(ap, pin, prog)
		if err != nil {
			return err
		}
		if l != nil {
			e.links[ap] = l
			e.log.Info("end program re-attached", "at", ap.String(), "pin", pin)
			return nil
		}
	}
	var l link.Link
	var err error
	if ap.xdp {
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ap.ifindex})
	} else {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ap.ifindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	}
	if err != nil {
		return fmt.Errorf("attach end %s: %w", ap, err)
	}
	if pin != "" {
		if err := l.Pin(pin); err != nil {
			l.Close()
			return fmt.Errorf("pin link %s: %w", ap, err)
		}
	}
	e.links[ap] = l
	e.log.Info("end program attached", "at", ap.String())
	return nil
}

// takeOverPinnedLink returns the link pinned at pin, updated to prog, when
// it really is attached at ap in the current network namespace. A stale
// pin (the interface or namespace was deleted and the link severed, the
// link sits on another interface, the pin is not a link, the update
// fails) is removed and its link closed; it then returns nil, nil and the
// caller attaches afresh. No pin: nil, nil.
func (e *End) takeOverPinnedLink(ap attachPoint, pin string, prog *ebpf.Program) (link.Link, error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		e.log.Warn("stale end link pin removed", "at", ap.String(), "pin", pin, "reason", err.Error())
		if err := os.Remove(pin); err != nil {
			return nil, fmt.Errorf("remove stale link pin %s: %w", ap, err)
		}
		return nil, nil
	}
	live, why := linkAttachedHere(l, ap)
	if live {
		if err := l.Update(prog); err == nil {
			return l, nil
		} else {
			why = "update: " + err.Error()
		}
	}
	e.log.Warn("stale end link pin replaced", "at", ap.String(), "pin", pin, "reason", why)
	if err := l.Unpin(); err != nil {
		l.Close()
		return nil, fmt.Errorf("unpin stale link %s: %w", ap, err)
	}
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("close stale link %s: %w", ap, err)
	}
	return nil, nil
}

// linkAttachedHere reports whether l is attached at ap in the current
// network namespace, and if not, why.
func linkAttachedHere(l link.Link, ap attachPoint) (bool, string) {
	info, err := l.Info()
	if err != nil {
		return false, "link info: " + err.Error()
	}
	if ap.xdp {
		xi := info.XDP()
		if xi == nil {
			return false, fmt.Sprintf("not an xdp link (%v)", info.Type)
		}
		if int(xi.Ifindex) != ap.ifindex {
			return false, fmt.Sprintf("link on ifindex %d", xi.Ifindex)
		}
		id, err := xdpProgramID(ap.ifindex)
		if err != nil {
			return false, err.Error()
		}
		if id != info.Program {
			return false, fmt.Sprintf("interface runs xdp program %d, link has %d", id, info.Program)
		}
		return true, ""
	}
	ti := info.TCX()
	if ti == nil {
		return false, fmt.Sprintf("not a tcx link (%v)", info.Type)
	}
	if int(ti.Ifindex) != ap.ifindex {
		return false, fmt.Sprintf("link on ifindex %d", ti.Ifindex)
	}
	ids, err := tcxIngressLinks(ap.ifindex)
	if err != nil {
		return false, err.Error()
	}
	for _, id := range ids {
		if id.link == info.ID {
			return true, ""
		}
	}
	return false, fmt.Sprintf("link %d not on ifindex %d in this namespace", info.ID, ap.ifindex)
}

type tcxAttachment struct {
	prog ebpf.ProgramID
	link link.ID
}

// tcxIngressLinks lists the programs on ifindex's tcx ingress in the
// current network namespace.
func tcxIngressLinks(ifindex int) ([]tcxAttachment, error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return nil, fmt.Errorf("query tcx ingress of ifindex %d: %w", ifindex, err)
	}
	out := make([]tcxAttachment, 0, len(res.Programs))
	for _, p := range res.Programs {
		a := tcxAttachment{prog: p.ID}
		a.link, _ = p.LinkID()
		out = append(out, a)
	}
	return out, nil
}

// xdpProgramID returns the id of the XDP program on ifindex in the current
// network namespace (0: none).
func xdpProgramID(ifindex int) (ebpf.ProgramID, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return 0, fmt.Errorf("open netlink: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByIndex(ifindex)
	if err != nil {
		return 0, fmt.Errorf("find ifindex %d: %w", ifindex, err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return ebpf.ProgramID(x.ProgId), nil
	}
	return 0, nil
}

func programID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, fmt.Errorf("program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, fmt.Errorf("program info: %w: no id", ErrBadMap)
	}
	return id, nil
}

// Attached reports whether this End's tc program is attached to ifindex's
// tcx ingress in the current network namespace (call it inside
// netns.NS.Do for a lab node). It asks the kernel (BPF_PROG_QUERY), not
// this End's bookkeeping, so it is false when the interface lost the
// program, and false when another End (e.g. loaded by an earlier process)
// is attached there: Attach then takes the pinned link over. An ifindex
// that does not exist is an error.
func (e *End) Attached(ifindex int) (bool, error) {
	id, err := programID(e.objs.SrchainEnd)
	if err != nil {
		return false, fmt.Errorf("check end attachment on ifindex %d: %w", ifindex, err)
	}
	atts, err := tcxIngressLinks(ifindex)
	if err != nil {
		return false, fmt.Errorf("check end attachment: %w", err)
	}
	for _, a := range atts {
		if a.prog == id {
			return true, nil
		}
	}
	return false, nil
}

// AttachedXDP is Attached for the XDP twin (asks the kernel through
// netlink which XDP program the interface runs).
func (e *End) AttachedXDP(ifindex int) (bool, error) {
	id, err := programID(e.xdp.SrchainEndXdp)
	if err != nil {
		return false, fmt.Errorf("check end xdp attachment on ifindex %d: %w", ifindex, err)
	}
	have, err := xdpProgramID(ifindex)
	if err != nil {
		return false, fmt.Errorf("check end xdp attachment: %w", err)
	}
	return have == id, nil
}

func (e *End) linkPin(ap attachPoint) string {
	if e.opts.PinPath == "" {
		return ""
	}
	return filepath.Join(e.opts.PinPath, ap.String())
}

// Detach removes the tc program from ifindex (and its pin).
func (e *End) Detach(ifindex int) error { return e.detach(attachPoint{ifindex: ifindex}) }

// DetachXDP removes the XDP twin from ifindex (and its pin).
func (e *End) DetachXDP(ifindex int) error {
	return e.detach(attachPoint{ifindex: ifindex, xdp: true})
}

func (e *End) detach(ap attachPoint) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.links[ap]
	if !ok {
		return fmt.Errorf("detach end %s: %w", ap, ErrNotAttached)
	}
	delete(e.links, ap)
	if e.linkPin(ap) != "" {
		if err := l.Unpin(); err != nil {
			l.Close()
			return fmt.Errorf("unpin link %s: %w", ap, err)
		}
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("detach end %s: %w", ap, err)
	}
	return nil
}

// SetSID installs or replaces sid. For End.X, oif is the outgoing ifindex
// and nh6 the next hop (zero: the new destination is on-link); both are
// ignored for End. The per-SID counters restart when a SID is first added.
func (e *End) SetSID(sid netip.Addr, b Behavior, oif int, nh6 netip.Addr) error {
	if !sid.Is6() || sid.Is4In6() {
		return fmt.Errorf("set sid %s: %w: not an IPv6 address", sid, ErrBadSID)
	}
	val := sidEntry{Behavior: uint32(b)}
	switch b {
	case BehaviorEnd:
	case BehaviorEndX:
		if oif <= 0 {
			return fmt.Errorf("set sid %s: %w: End.X needs an outgoing interface", sid, ErrBadSID)
		}
		if nh6.IsValid() && !nh6.Is6() {
			return fmt.Errorf("set sid %s: %w: End.X next hop %s is not IPv6", sid, ErrBadSID, nh6)
		}
		val.OIF = uint32(oif)
		if nh6.IsValid() {
			val.NH6 = nh6.As16()
		}
	default:
		return fmt.Errorf("set sid %s: %w: %s", sid, ErrUnsupportedBehavior, b)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	slot, ok := e.slots[sid]
	if !ok {
		var err error
		if slot, err = e.allocSlot(); err != nil {
			return fmt.Errorf("set sid %s: %w", sid, err)
		}
		if err := resetSIDCounter(e.objs.SidCounters, slot); err != nil {
			e.used[slot] = false
			return fmt.Errorf("set sid %s: %w", sid, err)
		}
	}
	val.Counter = slot
	if err := e.objs.Sids.Update(sid.As16(), val, ebpf.UpdateAny); err != nil {
		if !ok {
			e.used[slot] = false
		}
		return fmt.Errorf("set sid %s: %w", sid, err)
	}
	e.slots[sid] = slot
	return nil
}

func (e *End) allocSlot() (uint32, error) {
	for i := range e.used {
		if !e.used[i] {
			e.used[i] = true
			return uint32(i), nil
		}
	}
	return 0, ErrFull
}

// DeleteSID removes sid; traffic to it then passes to the stack untouched.
func (e *End) DeleteSID(sid netip.Addr) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	slot, ok := e.slots[sid]
	if !ok {
		return fmt.Errorf("delete sid %s: %w", sid, ErrNoSID)
	}
	if err := e.objs.Sids.Delete(sid.As16()); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("delete sid %s: %w", sid, err)
	}
	delete(e.slots, sid)
	e.used[slot] = false
	return nil
}

// SIDEntry is one SID as the program's map holds it.
type SIDEntry struct {
	Behavior Behavior
	// OIF is End.X's outgoing ifindex (0 for End).
	OIF int
	// NH6 is End.X's next hop; the zero netip.Addr (invalid) when the
	// new destination is on-link, and for End.
	NH6 netip.Addr
	// Counter is the SID's slot in the per-SID counters.
	Counter uint32
}

// SID returns the entry the program's SID map holds for addr (read from
// the kernel map, so with a PinPath it is what forwarding uses now, also
// when another process set it). ok is false when addr is not configured.
// A caller that changes a SID can restore it with
// SetSID(addr, entry.Behavior, entry.OIF, entry.NH6), or DeleteSID when
// it was absent.
func (e *End) SID(addr netip.Addr) (entry SIDEntry, ok bool, err error) {
	if !addr.Is6() || addr.Is4In6() {
		return SIDEntry{}, false, fmt.Errorf("look up sid %s: %w: not an IPv6 address", addr, ErrBadSID)
	}
	var val sidEntry
	if err := e.objs.Sids.Lookup(addr.As16(), &val); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return SIDEntry{}, false, nil
		}
		return SIDEntry{}, false, fmt.Errorf("look up sid %s: %w", addr, err)
	}
	entry = SIDEntry{Behavior: Behavior(val.Behavior), OIF: int(val.OIF), Counter: val.Counter}
	if val.NH6 != ([16]byte{}) {
		entry.NH6 = netip.AddrFrom16(val.NH6)
	}
	return entry, true, nil
}

// SIDs returns the configured SIDs.
func (e *End) SIDs() []netip.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]netip.Addr, 0, len(e.slots))
	for a := range e.slots {
		out = append(out, a)
	}
	return out
}

// DropCounts returns the drop counters summed over CPUs.
func (e *End) DropCounts() (drop.Counts, error) {
	return ReadDropCounts(e.objs.DropCounters)
}

// SIDCounts returns packets and bytes seen per configured SID (malformed
// packets to the SID included).
func (e *End) SIDCounts() (map[netip.Addr]SIDCount, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[netip.Addr]SIDCount, len(e.slots))
	for sid, slot := range e.slots {
		c, err := readSIDCounter(e.objs.SidCounters, slot)
		if err != nil {
			return nil, fmt.Errorf("read counters of sid %s: %w", sid, err)
		}
		out[sid] = c
	}
	return out, nil
}

// FIBCounts returns how forwarding decisions went (bpf/lib/fib.h):
// "success" were redirected by the program, the others handed to the
// kernel stack; "redirect-neigh" counts End.X packets.
func (e *End) FIBCounts() (map[string]uint64, error) {
	return ReadFIBCounts(e.objs.FibCounters)
}

// Close releases the program, the maps and the links held by this process.
// Without a PinPath this detaches the program everywhere; with one, pinned
// links and maps keep forwarding (use Detach or Unpin to remove them).
func (e *End) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for ap, l := range e.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close link %s: %w", ap, err))
		}
		delete(e.links, ap)
	}
	if err := e.xdp.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close end xdp objects: %w", err))
	}
	if err := e.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close end objects: %w", err))
	}
	return errors.Join(errs...)
}

// Unpin removes every pin of this End (links first, then maps), so
// closing it afterwards removes the datapath entirely.
func (e *End) Unpin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	if e.opts.PinPath != "" {
		for _, l := range e.links {
			errs = append(errs, l.Unpin())
		}
	}
	if e.opts.PinPath != "" {
		// By path: maps reopened from pins (MapReplacements) do not
		// know they are pinned.
		for _, name := range endSharedMaps {
			if err := os.Remove(filepath.Join(e.opts.PinPath, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("unpin end: %w", err)
	}
	return nil
}
