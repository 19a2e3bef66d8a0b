package apply

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/srchain/srchain/internal/datapath"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

func init() { Register("end", endDriver{}) }

// endDriver attaches srchain's End program (see applyEnd).
type endDriver struct{}

func (endDriver) Apply(ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	return applyEnd(ns, node, p)
}

// Check reports the node's eBPF SIDs missing from the pinned SID map. It
// never creates pins: a node without them is reported, not repaired.
func (endDriver) Check(ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	var want []netip.Addr
	for _, s := range node.SIDs {
		if s.Datapath == state.EBPF {
			want = append(want, s.SID.Addr())
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	pin := PinDir(ns)
	if _, err := os.Stat(pin); err != nil {
		return []string{"end program maps not pinned at " + pin}, nil
	}
	end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: pin})
	if err != nil {
		return nil, err
	}
	defer end.Close()
	have := end.SIDs()
	var missing []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, "sid "+w.String()+" missing from the end program's map")
		}
	}
	return missing, nil
}

// endLinkPin is where datapath.End pins the tcx link of ifindex (see
// datapath.End.Attach); knowing it lets a re-apply see that the program is
// already attached and change nothing.
func endLinkPin(pin string, ifindex int) string {
	return filepath.Join(pin, fmt.Sprintf("tcx_ingress_%d", ifindex))
}

type ebpfSID struct {
	sid netip.Addr
	b   datapath.Behavior
	oif int
	nh6 netip.Addr
}

// applyEnd serves the node's "ebpf" SIDs with srchain's tc End program
// (internal/datapath): attach it to p.Interfaces and fill its SID map. Maps
// and links are pinned under PinDir(ns) so they outlive this process.
func applyEnd(ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	h := ns.Netlink()
	var sids []ebpfSID
	for _, s := range node.SIDs {
		if s.Datapath != state.EBPF {
			continue
		}
		b, err := datapath.BehaviorFromState(s.Behavior)
		if err != nil {
			return nil, err
		}
		e := ebpfSID{sid: s.SID.Addr(), b: b, nh6: s.NH6}
		if s.OIF != "" {
			l, err := h.LinkByName(s.OIF)
			if err != nil {
				return nil, fmt.Errorf("find interface %s: %w: %w", s.OIF, ErrNoInterface, err)
			}
			e.oif = l.Attrs().Index
		}
		sids = append(sids, e)
	}
	var ifindexes []int
	for _, name := range p.Interfaces {
		l, err := h.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("find interface %s: %w: %w", name, ErrNoInterface, err)
		}
		ifindexes = append(ifindexes, l.Attrs().Index)
	}

	pin := PinDir(ns)
	_, statErr := os.Stat(pin)
	pinExisted := statErr == nil
	end, err := datapath.LoadEnd(datapath.EndOptions{PinPath: pin})
	if err != nil {
		if !pinExisted {
			// LoadEnd creates the directory before it can fail.
			err = errors.Join(err, os.RemoveAll(pin))
		}
		return nil, err
	}
	have := end.SIDs()

	var undo []func() error
	rollback := func() error {
		var errs []error
		for _, u := range slices.Backward(undo) {
			errs = append(errs, u())
		}
		errs = append(errs, end.Close())
		if !pinExisted {
			errs = append(errs, os.RemoveAll(pin))
		}
		return errors.Join(errs...)
	}
	for _, idx := range ifindexes {
		if _, err := os.Stat(endLinkPin(pin, idx)); err == nil {
			continue // attached by an earlier apply
		}
		if err := ns.Do(func() error { return end.Attach(idx) }); err != nil {
			return nil, errors.Join(err, rollback())
		}
		undo = append(undo, func() error { return end.Detach(idx) })
	}
	for _, s := range sids {
		// Re-setting an existing SID only rewrites its entry; it is not
		// counted as a change so that a re-apply stays a no-op.
		existed := slices.Contains(have, s.sid)
		if err := end.SetSID(s.sid, s.b, s.oif, s.nh6); err != nil {
			return nil, errors.Join(err, rollback())
		}
		if !existed {
			undo = append(undo, func() error { return end.DeleteSID(s.sid) })
		}
	}
	if len(undo) == 0 {
		return nil, end.Close()
	}
	// The pins keep program, maps and links alive; the Go handles are only
	// needed again by undo.
	return rollback, nil
}
