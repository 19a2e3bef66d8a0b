package end

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
)

// endDriver attaches srchain's End program (bpf/end.c, internal/datapath)
// and fills its SID map: the eBPF datapath of every "ebpf" SID on a node,
// whatever NF kind fronts the SID.
type endDriver struct{}

// Apply serves the node's eBPF SIDs (see applyEnd).
func (endDriver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return applyEnd(ns, node, p)
}

// configOf decodes p's config (none: the zero value).
func configOf(p state.Program) (state.EndConfig, error) {
	var cfg state.EndConfig
	if len(p.Config) == 0 {
		return cfg, nil
	}
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		return cfg, fmt.Errorf("decode end program config: %w", err)
	}
	return cfg, nil
}

// endProgName is the kernel name of the End program (bpf/end.c).
const endProgName = "srchain_end"

// Check reports interfaces of p where the End program serving this
// node's pinned SID map does not run (absent, detached by hand, or
// another srchain_end), and the node's eBPF SIDs that the pinned SID map
// lacks or holds with another entry. It never creates pins: a node
// without them is reported, not repaired.
func (endDriver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sids, err := ebpfSIDs(ns, node)
	if err != nil {
		return nil, err
	}
	pin := kind.PinDir(ns)
	if _, err := os.Stat(pin); err != nil {
		if len(sids) == 0 && len(p.Interfaces) == 0 {
			return nil, nil
		}
		return []string{"end program (" + endProgName + ") maps not pinned at " + pin}, nil
	}
	end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: pin})
	if err != nil {
		return nil, err
	}
	defer end.Close()
	var missing []string
	for _, name := range p.Interfaces {
		l, err := ns.Netlink().LinkByName(name)
		if err != nil {
			missing = append(missing, "end program: no interface "+name)
			continue
		}
		st, err := endAttachment(ns, end, pin, l.Attrs().Index)
		if err != nil {
			return missing, err
		}
		switch st {
		case endAbsent:
			missing = append(missing, fmt.Sprintf("program end (%s) not attached on %s", endProgName, name))
		case endForeign:
			missing = append(missing, "end program on "+name+" is not the one serving this node's pinned SID map")
		case endOld:
			missing = append(missing, "end program on "+name+" runs another build's code")
		}
	}
	if cfg, err := configOf(p); err != nil {
		return missing, err
	} else if cfg.OPoT {
		want, err := opotdp.PinnedChains(ns)
		if err != nil {
			return missing, err
		}
		for _, name := range p.Interfaces {
			l, err := ns.Netlink().LinkByName(name)
			if err != nil {
				continue // reported above
			}
			if have, err := opotdp.LinkChains(endLinkPin(pin, l.Attrs().Index)); err != nil {
				return missing, err
			} else if have == 0 || have != want {
				missing = append(missing, "end program on "+name+" does not read the node's opot maps (the transit in the end)")
			}
		}
	}
	if p.XDP && !pipeline.StageRuns(pipeline.Dir(pin), pipeline.End, end.XDPProgram()) {
		missing = append(missing, fmt.Sprintf("program end (%s) not loaded as the xdp pipeline's end stage (or an older build's)", endXDPProgName))
	}
	for _, s := range sids {
		have, found, err := end.SID(s.sid)
		if err != nil {
			return missing, err
		}
		switch {
		case !found:
			missing = append(missing, "sid "+s.sid.String()+" missing from the end program's map")
		case !s.matches(have):
			missing = append(missing, fmt.Sprintf("sid %s in the end program's map is %s, want %s", s.sid, describeEntry(have), s.describe()))
		}
	}
	return missing, nil
}

// Remove detaches the End program from p's interfaces and deletes the
// node's eBPF SIDs from its map; the maps stay pinned until the
// namespace's pin directory goes (another program may share them).
func (endDriver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pin := kind.PinDir(ns)
	if _, err := os.Stat(pin); err != nil {
		return nil // nothing was applied
	}
	var errs []error
	for _, name := range p.Interfaces {
		l, err := ns.Netlink().LinkByName(name)
		if err != nil {
			continue // the interface and its link are gone
		}
		errs = append(errs, bpfrt.DetachPinned(endLinkPin(pin, l.Attrs().Index)))
	}
	errs = append(errs, pipeline.UnpinStage(pipeline.Dir(pin), pipeline.End))
	sids, err := ebpfSIDs(ns, node)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: pin})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, s := range sids {
		if _, found, _ := end.SID(s.sid); found {
			errs = append(errs, end.DeleteSID(s.sid))
		}
	}
	errs = append(errs, end.Close())
	return errors.Join(errs...)
}

// Counters reads the End program's drop counters ("drop/REASON"), FIB
// outcomes ("fib/RESULT"), packets handed to the kernel's End untouched
// ("pass/REASON") and per-SID packets and bytes
// ("sid/SID/packets", "sid/SID/bytes"), sorted by name.
func (endDriver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pin := kind.PinDir(ns)
	if _, err := os.Stat(pin); err != nil {
		return nil, fmt.Errorf("read end counters: not pinned at %s: %w", pin, err)
	}
	// Read-only map pins, no program load: Prometheus scrapes this.
	ec, err := datapath.ReadPinnedEndCounters(pin)
	if err != nil {
		return nil, err
	}
	var out []kind.Counter
	for i, v := range ec.Drops {
		if v != 0 {
			out = append(out, kind.Counter{Name: "drop/" + drop.Reason(i).String(), Value: v})
		}
	}
	for name, v := range ec.FIB {
		out = append(out, kind.Counter{Name: "fib/" + name, Value: v})
	}
	for name, v := range ec.Pass {
		out = append(out, kind.Counter{Name: "pass/" + name, Value: v})
	}
	for sid, c := range ec.SIDs {
		out = append(out, kind.Counter{Name: "sid/" + sid.String() + "/packets", Value: c.Packets},
			kind.Counter{Name: "sid/" + sid.String() + "/bytes", Value: c.Bytes})
	}
	slices.SortFunc(out, func(a, b kind.Counter) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// endLinkPin is where datapath.End pins the tcx link of ifindex (see
// datapath.End.Attach).
func endLinkPin(pin string, ifindex int) string {
	return filepath.Join(pin, bpfrt.Hook{Ifindex: ifindex}.String())
}

// endXDPProgName is the kernel name of the End's XDP twin (bpf/end_xdp.c).
const endXDPProgName = "srchain_end_xdp"

type ebpfSID struct {
	sid  netip.Addr // the SID prefix's masked address: the map key
	bits int        // LOC+FUNCT length (128: no ARGS)
	b    datapath.Behavior
	oif  int
	nh6  netip.Addr
	csid state.CSIDFlavor // NEXT-C-SID flavor (zero: none)
}

// entry is s as the program's SID map holds it (SetSID ignores oif and
// nh6 for End).
func (s ebpfSID) entry() datapath.SIDEntry {
	e := datapath.SIDEntry{Behavior: s.b, Bits: s.bits, CSIDBlockBits: s.csid.BlockBits, CSIDBits: s.csid.NodeFunctionBits}
	if s.b == datapath.BehaviorEndX {
		e.OIF, e.NH6 = s.oif, s.nh6
	}
	return e
}

func (s ebpfSID) matches(have datapath.SIDEntry) bool {
	want := s.entry()
	return have.Behavior == want.Behavior && have.OIF == want.OIF && have.NH6 == want.NH6 && have.Bits == want.Bits &&
		have.CSIDBlockBits == want.CSIDBlockBits && have.CSIDBits == want.CSIDBits
}

func (s ebpfSID) describe() string { return describeEntry(s.entry()) }

func describeEntry(e datapath.SIDEntry) string {
	out := e.Behavior.String()
	if e.Bits != 0 && e.Bits != 128 {
		out += fmt.Sprintf(" /%d", e.Bits)
	}
	if e.OIF != 0 {
		out += fmt.Sprintf(" oif %d", e.OIF)
	}
	if e.NH6.IsValid() {
		out += " nh6 " + e.NH6.String()
	}
	if e.CSIDBits != 0 {
		out += fmt.Sprintf(" next-csid %d/%d", e.CSIDBlockBits, e.CSIDBits)
	}
	return out
}

// ebpfSIDs returns the node's SIDs served by the End program.
func ebpfSIDs(ns *netns.NS, node state.Node) ([]ebpfSID, error) {
	var sids []ebpfSID
	for _, s := range node.SIDs {
		if s.Datapath != state.EBPF {
			continue
		}
		b, err := datapath.BehaviorFromState(s.Behavior)
		if err != nil {
			return nil, err
		}
		e := ebpfSID{sid: s.SID.Masked().Addr(), bits: s.SID.Bits(), b: b, nh6: s.NH6, csid: s.NextCSID}
		if s.OIF != "" {
			l, err := ns.Netlink().LinkByName(s.OIF)
			if err != nil {
				return nil, fmt.Errorf("find interface %s: %w: %w", s.OIF, kind.ErrNoInterface, err)
			}
			e.oif = l.Attrs().Index
		}
		sids = append(sids, e)
	}
	return sids, nil
}

type endAttach int

const (
	endAbsent  endAttach = iota // no srchain_end program on the interface
	endForeign                  // one that does not serve the pinned SID map, or a stale pin
	endOurs                     // the program serving the pinned SID map
	endOld                      // that link, running another srchain build's code
)

// endAttachment tells whether the End program serving the node's pinned
// maps really runs on the tcx ingress of ifindex, asking the kernel: it
// is end's own program, or the link pinned for ifindex (by an earlier
// apply, maybe in another process; datapath.End attaches only programs
// loaded with the pin directory's maps) when the pin directory belongs to
// this namespace (bpfrt.ClaimedHere: namespace identity, so a namespace
// deleted and created again under the same name does not inherit the old
// one's link pins) and the kernel has that link on ifindex here
// (bpfrt.LinkAttachedHere). A pin file alone proves nothing: the
// interface may have been recreated and the ifindex reused, or the link
// detached by hand. Another srchain_end on the hook is endForeign.
func endAttachment(ns *netns.NS, end *datapath.End, pin string, ifindex int) (endAttach, error) {
	st := endAbsent
	err := ns.Do(func() error {
		if ok, err := end.Attached(ifindex); err != nil {
			return err
		} else if ok {
			st = endOurs
			return nil
		}
		hook := bpfrt.Hook{Ifindex: ifindex}
		here, err := bpfrt.ClaimedHere(pin)
		if err != nil {
			return err
		}
		if here {
			if live, runs := bpfrt.PinnedLinkRuns(endLinkPin(pin, ifindex), hook, end.Program()); live {
				st = endOurs
				if !runs {
					st = endOld
				}
				return nil
			}
		}
		atts, err := bpfrt.TCXIngress(ifindex)
		if err != nil {
			return err
		}
		for _, a := range atts {
			name, err := bpfrt.ProgramName(a.Program)
			if err != nil {
				return err
			}
			if name == endProgName {
				st = endForeign
			}
		}
		return nil
	})
	return st, err
}

// endUndo is what one applyEnd did, to undo it from the pins alone: the
// End handle is closed when applyEnd succeeds, and undo opens it again.
type endUndo struct {
	pin        string
	pinExisted bool
	attached   []int // ifindexes whose link this apply created
	xdpPinned  bool  // this apply pinned the XDP pipeline stage
	sids       []sidUndo
}

type sidUndo struct {
	sid   netip.Addr
	prev  datapath.SIDEntry
	found bool // else the SID was added and goes again
}

// run undoes, with end if it is still open (nil: reopen from the pins);
// it closes end.
func (u *endUndo) run(end *datapath.End) error {
	var errs []error
	if u.pinExisted && len(u.sids) > 0 {
		if end == nil {
			var err error
			if end, err = datapath.LoadEnd(datapath.EndOptions{PinPath: u.pin}); err != nil {
				return fmt.Errorf("reopen end program: %w", err)
			}
		}
		for _, s := range slices.Backward(u.sids) {
			if s.found {
				errs = append(errs, end.SetSIDPrefix(netip.PrefixFrom(s.sid, s.prev.Bits), s.prev.Behavior, s.prev.OIF, s.prev.NH6),
					end.SetNextCSID(s.sid, s.prev.CSIDBlockBits, s.prev.CSIDBits))
			} else {
				errs = append(errs, end.DeleteSID(s.sid))
			}
		}
	}
	// Detach explicitly: a link whose last pin goes is only released
	// after an RCU grace period, and the program would run on until then.
	if u.xdpPinned {
		errs = append(errs, pipeline.UnpinStage(pipeline.Dir(u.pin), pipeline.End))
	}
	for _, idx := range slices.Backward(u.attached) {
		errs = append(errs, bpfrt.DetachPinned(endLinkPin(u.pin, idx)))
	}
	if end != nil {
		errs = append(errs, end.Close())
	}
	if !u.pinExisted {
		// Everything under the pin dir is this apply's.
		errs = append(errs, os.RemoveAll(u.pin))
	}
	return errors.Join(errs...)
}

// pinnedLinkID is the id of the link pinned at path (0: none).
func pinnedLinkID(path string) link.ID {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return 0
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		return 0
	}
	return info.ID
}

// applyEnd serves the node's "ebpf" SIDs with srchain's tc End program
// (internal/datapath): attach it to p.Interfaces and fill its SID map. Maps
// and links are pinned under PinDir(ns) so they outlive this process, and
// the handle is closed before it returns. An interface where the program
// does not really run (see endAttachment) gets it attached, a stale pin
// replaced; a SID whose entry differs is rewritten and its old entry
// journaled, so undo restores it.
func applyEnd(ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	sids, err := ebpfSIDs(ns, node)
	if err != nil {
		return nil, err
	}
	ifindexes, err := kind.Ifindexes(ns, p.Interfaces)
	if err != nil {
		return nil, err
	}

	cfg, err := configOf(p)
	if err != nil {
		return nil, err
	}

	pin := kind.PinDir(ns)
	_, statErr := os.Stat(pin)
	u := &endUndo{pin: pin, pinExisted: statErr == nil}
	pipe, err := pipeline.OpenMaps(pipeline.Dir(pin))
	if err != nil {
		if !u.pinExisted {
			err = errors.Join(err, os.RemoveAll(pin))
		}
		return nil, err
	}
	defer pipe.Close()
	var shared map[string]*ebpf.Map
	if cfg.OPoT {
		// The node's OPoT program (applied before this one) pinned them.
		if shared, err = opotdp.EndMaps(ns); err != nil {
			if !u.pinExisted {
				err = errors.Join(err, os.RemoveAll(pin))
			}
			return nil, fmt.Errorf("end: %w", err)
		}
		defer bpfrt.CloseMaps(shared)
	}
	// A program holds the OPoT maps it was loaded with, and the OPoT
	// driver replaces them when their layout changes: a link or XDP
	// stage reading other maps than the node's pinned ones is swapped.
	// One that reads them while the node no longer asks for it is
	// swapped too: it would hold the node's OPoT parameters in the
	// kernel after their pins are gone.
	var chains ebpf.MapID // the maps the End must read; 0: none
	if cfg.OPoT {
		if chains, err = opotdp.PinnedChains(ns); err != nil {
			return nil, fmt.Errorf("end: %w", err)
		}
	}
	swap := false
	for _, idx := range ifindexes {
		if id, _ := opotdp.LinkChains(endLinkPin(pin, idx)); id != chains {
			swap = true
		}
	}
	if p.XDP {
		if st, err := ebpf.LoadPinnedProgram(pipeline.StagePin(pipeline.Dir(pin), pipeline.End), nil); err == nil {
			id, _ := opotdp.ProgramChains(st)
			st.Close()
			swap = swap || id != chains
		}
	}
	end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: pin, Pipeline: pipe.Replacements(), OPoT: shared})
	if err != nil {
		if !u.pinExisted {
			// LoadEnd creates the directory before it can fail.
			err = errors.Join(err, os.RemoveAll(pin))
		}
		return nil, err
	}
	changed := false
	fail := func(err error) (func() error, error) { return nil, errors.Join(err, u.run(end)) }
	for _, idx := range ifindexes {
		st, err := endAttachment(ns, end, pin, idx)
		if err != nil {
			return fail(err)
		}
		if st == endOurs && !swap {
			continue // attached by an earlier apply
		}
		before := pinnedLinkID(endLinkPin(pin, idx))
		if err := ns.Do(func() error { return end.Attach(idx) }); err != nil {
			return fail(err)
		}
		// Swapping the program in our own link changes nothing the
		// state describes.
		changed = changed || st != endOurs
		if pinnedLinkID(endLinkPin(pin, idx)) != before {
			// A new link (none was pinned, or a stale pin was
			// replaced): undo detaches it.
			u.attached = append(u.attached, idx)
		}
		// Else Attach took over the live pinned link and updated it to
		// this program (an older End's); undo leaves an End attached, as
		// one was before.
	}
	// The XDP twin is the node pipeline's End stage (internal/pipeline,
	// whose driver runs after this one and puts the pinned stage in the
	// pipeline), or leaves it when the node no longer asks for XDP: the
	// tc program does the whole job either way, so nothing is lost.
	pdir := pipeline.Dir(pin)
	stale := p.XDP && !pipeline.StageRuns(pdir, pipeline.End, end.XDPProgram())
	switch {
	case p.XDP && (swap || stale):
		had := pipeline.StagePinned(pdir, pipeline.End)
		// An older build's stage: a change, kept on undo.
		changed = changed || (had && stale)
		for _, idx := range ifindexes {
			if err := ns.Do(func() error { return end.ServeXDP(idx) }); err != nil {
				return fail(err)
			}
		}
		if err := pipeline.PinStage(pdir, pipeline.End, end.XDPProgram()); err != nil {
			return fail(err)
		}
		if !had {
			u.xdpPinned, changed = true, true
		}
	case !p.XDP && pipeline.StagePinned(pdir, pipeline.End):
		if err := pipeline.UnpinStage(pdir, pipeline.End); err != nil {
			return fail(err)
		}
		changed = true
	}
	for _, s := range sids {
		prev, found, err := end.SID(s.sid)
		if err != nil {
			return fail(err)
		}
		if found && s.matches(prev) {
			continue
		}
		if err := end.SetSIDPrefix(netip.PrefixFrom(s.sid, s.bits), s.b, s.oif, s.nh6); err != nil {
			return fail(err)
		}
		if err := end.SetNextCSID(s.sid, s.csid.BlockBits, s.csid.NodeFunctionBits); err != nil {
			return fail(err)
		}
		changed = true
		u.sids = append(u.sids, sidUndo{sid: s.sid, prev: prev, found: found})
	}
	// The pins keep program, maps and links alive; the handle is not
	// needed any more (undo reopens it from the pins).
	if err := end.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("close end program: %w", err), u.run(nil))
	}
	if !changed {
		return nil, nil
	}
	return func() error { return u.run(nil) }, nil
}
