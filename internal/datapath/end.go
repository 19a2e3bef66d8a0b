package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

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
func LoadEnd(opts EndOptions) (*End, error) {
	spec, err := loadEndProg()
	if err != nil {
		return nil, fmt.Errorf("load end spec: %w", err)
	}
	e := &End{opts: opts, links: make(map[attachPoint]link.Link), slots: make(map[netip.Addr]uint32)}
	e.log = opts.Logger
	if e.log == nil {
		e.log = slog.Default()
	}
	var copts ebpf.CollectionOptions
	pinned := map[string]*ebpf.Map{}
	if opts.PinPath != "" {
		if err := os.MkdirAll(opts.PinPath, 0o700); err != nil {
			return nil, fmt.Errorf("create pin path: %w", err)
		}
		copts.MapReplacements = make(map[string]*ebpf.Map)
		for name := range spec.Maps {
			m, err := ebpf.LoadPinnedMap(filepath.Join(opts.PinPath, name), nil)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				closeMaps(pinned)
				return nil, fmt.Errorf("open pinned map %s: %w", name, err)
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
		for name, m := range map[string]*ebpf.Map{
			endProgMapSids: e.objs.Sids, endProgMapDropCounters: e.objs.DropCounters,
			endProgMapSidCounters: e.objs.SidCounters, endProgMapFibCounters: e.objs.FibCounters,
		} {
			if _, reused := pinned[name]; reused || m.IsPinned() { // clones of pinned maps do not report IsPinned
				continue
			}
			if err := m.Pin(filepath.Join(opts.PinPath, name)); err != nil {
				e.objs.Close()
				return nil, fmt.Errorf("pin map %s: %w", name, err)
			}
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

// loadXDP loads the XDP twin (bpf/end_xdp.c) sharing the tc object's maps.
func (e *End) loadXDP() error {
	spec, err := loadEndXdpProg()
	if err != nil {
		return fmt.Errorf("load end xdp spec: %w", err)
	}
	opts := ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		endProgMapSids: e.objs.Sids, endProgMapDropCounters: e.objs.DropCounters,
		endProgMapSidCounters: e.objs.SidCounters, endProgMapFibCounters: e.objs.FibCounters,
	}}
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
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			if err := l.Update(prog); err != nil {
				l.Close()
				return fmt.Errorf("update pinned link %s: %w", ap, err)
			}
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
		for _, name := range []string{endProgMapSids, endProgMapDropCounters, endProgMapSidCounters, endProgMapFibCounters} {
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
