package firewall

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
)

// ProgName is the kernel name of the tc program the driver attaches.
const ProgName = "srchain_fw"

// PinDir is where the driver pins an NF's links and maps in a namespace.
func PinDir(ns *netns.NS, nf string) string { return kind.PinDir(ns) + "/fw-" + nf }

// linkPin is where firewall.Firewall.Pin pins the tcx link of ifindex.
func linkPin(pin string, ifindex int) string {
	return fmt.Sprintf("%s/fw_tcx_ingress_%d", pin, ifindex)
}

type driver struct{}

// Apply loads the firewall, attaches it at the head of the interfaces'
// tcx ingress and pins links and maps under PinDir (the lab CLI exits
// after `lab up`). When it is already pinned, the rule set is updated in
// place if it changed, and every interface where the pinned program does
// not really run (its link detached by hand, say) gets it attached again:
// a pin is not proof that packets are filtered.
func (driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := p.NF
	cfg, err := ConfigFromProgram(p, nsIfindex(ns))
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	pin := PinDir(ns, name)
	ifindexes, err := kind.Ifindexes(ns, p.Interfaces)
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	pipe, err := pipeline.OpenMaps(pipeline.NodeDir(ns))
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	defer pipe.Close()
	if _, err := os.Stat(pin); err == nil {
		return applyPinned(ns, pin, name, cfg, ifindexes, p.XDP, pipe)
	}
	// Room for later rule sets (Update does not grow the maps).
	room := 512 + 4*len(cfg.Rules)
	fw, err := firewall.LoadCapacity(cfg, firewall.Capacity{Bitmaps: room, Prefixes: room, Pipeline: pipe.Replacements()})
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	defer fw.Close() // the pins keep what must survive
	undo := func() error { return os.RemoveAll(pin) }
	if err := os.MkdirAll(pin, 0o700); err != nil {
		return nil, fmt.Errorf("firewall %s: create pin dir: %w", name, err)
	}
	for _, idx := range ifindexes {
		if err := ns.Do(func() error { return fw.Attach(idx) }); err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
		}
	}
	if err := fw.Pin(pin); err != nil {
		return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
	}
	if _, err := setXDPStage(ns, pin, p.XDP, pipe); err != nil {
		return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
	}
	return undo, nil
}

// setXDPStage makes the node pipeline's firewall stage (pinned for the
// pipeline driver, which runs after this one) follow xdp: the XDP twin of
// the firewall pinned under pin, or none. It reports whether it changed
// anything.
func setXDPStage(ns *netns.NS, pin string, xdp bool, pipe *pipeline.Maps) (bool, error) {
	dir := pipeline.NodeDir(ns)
	have := pipeline.StagePinned(dir, pipeline.Firewall)
	switch {
	case xdp && !have:
		prog, err := firewall.LoadXDPStage(pin, pipe.Replacements())
		if err != nil {
			return false, err
		}
		defer prog.Close()
		return true, pipeline.PinStage(dir, pipeline.Firewall, prog)
	case !xdp && have:
		return true, pipeline.UnpinStage(dir, pipeline.Firewall)
	}
	return false, nil
}

// applyPinned brings a pinned firewall to cfg on ifindexes: rule set
// first, then missing links. The undo reverses both.
func applyPinned(ns *netns.NS, pin, name string, cfg firewall.Config, ifindexes []int, xdp bool, pipe *pipeline.Maps) (func() error, error) {
	undoRules, err := updatePinned(pin, name, cfg)
	if err != nil {
		return nil, err
	}
	var added []int
	stageChanged := false
	undo := func() error {
		var errs []error
		if stageChanged {
			m, err := pipeline.OpenMaps(pipeline.NodeDir(ns))
			if err == nil {
				_, err = setXDPStage(ns, pin, !xdp, m)
				m.Close()
			}
			errs = append(errs, err)
		}
		for _, idx := range slices.Backward(added) {
			errs = append(errs, bpfrt.DetachPinned(linkPin(pin, idx)))
		}
		if undoRules != nil {
			errs = append(errs, undoRules())
		}
		return errors.Join(errs...)
	}
	for _, idx := range ifindexes {
		ok, err := attached(ns, pin, idx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
		}
		if ok {
			continue
		}
		if err := reattach(ns, pin, idx); err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
		}
		added = append(added, idx)
	}
	if stageChanged, err = setXDPStage(ns, pin, xdp, pipe); err != nil {
		return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
	}
	if undoRules == nil && len(added) == 0 && !stageChanged {
		return nil, nil
	}
	return undo, nil
}

// attached reports whether the link pinned for ifindex under pin is a tcx
// link that runs on ifindex of ns, asking the kernel (the link's id among
// the interface's tcx ingress attachments), not the pin file.
func attached(ns *netns.NS, pin string, ifindex int) (bool, error) {
	l, err := link.LoadPinnedLink(linkPin(pin, ifindex), nil)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, nil // not a link: replaced by reattach
	}
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		return false, fmt.Errorf("read link info of ifindex %d: %w", ifindex, err)
	}
	if ti := info.TCX(); ti == nil || int(ti.Ifindex) != ifindex {
		return false, nil
	}
	found := false
	err = ns.Do(func() error {
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return fmt.Errorf("query tcx ingress of ifindex %d: %w", ifindex, err)
		}
		for _, ap := range res.Programs {
			if id, ok := ap.LinkID(); ok && id == info.ID {
				found = true
			}
		}
		return nil
	})
	return found, err
}

// pinnedProgram finds the firewall's program through any of its pinned
// links: a link detached by hand still holds its program (and the
// program its pinned maps).
func pinnedProgram(pin string) (*ebpf.Program, error) {
	ents, err := os.ReadDir(pin)
	if err != nil {
		return nil, fmt.Errorf("read pin dir: %w", err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "fw_tcx_ingress_") {
			continue
		}
		l, err := link.LoadPinnedLink(pin+"/"+e.Name(), nil)
		if err != nil {
			continue
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			continue
		}
		prog, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			continue
		}
		if pi, err := prog.Info(); err == nil && pi.Name == ProgName {
			return prog, nil
		}
		prog.Close()
	}
	return nil, fmt.Errorf("no pinned link holds the %s program (remove %s to reload): %w", ProgName, pin, os.ErrNotExist)
}

// reattach attaches the pinned firewall's program at the head of
// ifindex's tcx ingress and pins the new link in place of a stale one.
func reattach(ns *netns.NS, pin string, ifindex int) error {
	prog, err := pinnedProgram(pin)
	if err != nil {
		return err
	}
	defer prog.Close()
	path := linkPin(pin, ifindex)
	if err := bpfrt.DetachPinned(path); err != nil {
		// Not a link, or one that cannot be detached: only the pin goes.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale link pin: %w", err)
		}
	}
	var l link.Link
	if err := ns.Do(func() (err error) {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		return err
	}); err != nil {
		return fmt.Errorf("attach firewall to ifindex %d: %w", ifindex, err)
	}
	defer l.Close()
	if err := l.Pin(path); err != nil {
		return errors.Join(fmt.Errorf("pin firewall link: %w", err), l.Detach())
	}
	return nil
}

func nsIfindex(ns *netns.NS) func(string) (uint32, error) {
	return func(n string) (uint32, error) {
		l, err := ns.Netlink().LinkByName(n)
		if err != nil {
			return 0, err
		}
		return uint32(l.Attrs().Index), nil
	}
}

// updatePinned replaces a pinned firewall's rule set with cfg unless its
// hash shows it already runs; the mode switched at run time is kept. The
// undo (nil when nothing changed) flips fw_gen back to the previous rule
// set, still intact in the other generation; it fails with
// firewall.ErrStale if another Update came in between.
func updatePinned(pin, name string, cfg firewall.Config) (func() error, error) {
	want, err := cfg.Hash()
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	pm, err := firewall.OpenPinned(pin)
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	have, herr := pm.Hash()
	mode, _, merr := pm.Mode()
	pm.Close()
	if herr == nil && have == want {
		return nil, nil
	}
	if merr == nil {
		cfg.Mode = mode
	}
	fw, err := firewall.OpenPinnedFirewall(pin, cfg.Rules)
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	defer fw.Close()
	if err := fw.Update(cfg); err != nil {
		return nil, fmt.Errorf("firewall %s: %w (remove the pins to reload)", name, err)
	}
	gen := fw.Gen()
	return func() error {
		if err := firewall.RevertPinned(pin, gen); err != nil {
			return fmt.Errorf("firewall %s: %w", name, err)
		}
		return nil
	}, nil
}

// Check reports what of the firewall is missing on the node without
// changing anything: its pins, an attached link per interface (asking
// the kernel, see attached), and a rule set that differs from the
// desired one.
func (driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := p.NF
	pin := PinDir(ns, name)
	if _, err := os.Stat(pin); err != nil {
		return []string{"firewall " + name + " not pinned at " + pin}, nil
	}
	var missing []string
	for _, ifn := range p.Interfaces {
		l, err := ns.Netlink().LinkByName(ifn)
		if err != nil {
			missing = append(missing, "firewall "+name+": no interface "+ifn)
			continue
		}
		ok, err := attached(ns, pin, l.Attrs().Index)
		if err != nil {
			return missing, err
		}
		if !ok {
			missing = append(missing, fmt.Sprintf("firewall %s: program %s not attached on %s", name, ProgName, ifn))
		}
	}
	pm, err := firewall.OpenPinned(pin)
	if err != nil {
		return append(missing, "firewall "+name+": "+err.Error()), nil
	}
	defer pm.Close()
	_, n, err := pm.Mode()
	if err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p, nsIfindex(ns))
	if err != nil {
		return append(missing, fmt.Sprintf("firewall %s: %v", name, err)), nil
	}
	if p.XDP && !pipeline.StagePinned(pipeline.NodeDir(ns), pipeline.Firewall) {
		missing = append(missing, fmt.Sprintf("firewall %s: not loaded as the xdp pipeline's firewall stage", name))
	}
	if len(cfg.Rules) != n {
		missing = append(missing, fmt.Sprintf("firewall %s: %d rules loaded, %d desired", name, n, len(cfg.Rules)))
	} else if want, err := cfg.Hash(); err != nil {
		missing = append(missing, fmt.Sprintf("firewall %s: %v", name, err))
	} else if have, err := pm.Hash(); err != nil || have != want {
		missing = append(missing, fmt.Sprintf("firewall %s: loaded rule set differs from the desired one", name))
	}
	return missing, nil
}

// Remove detaches the firewall from every interface and removes its pins.
func (driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error
	if p.XDP {
		errs = append(errs, pipeline.UnpinStage(pipeline.NodeDir(ns), pipeline.Firewall))
	}
	errs = append(errs, bpfrt.RemovePinDir(PinDir(ns, p.NF), func(name string) bool {
		return strings.HasPrefix(name, "fw_tcx_ingress_")
	}))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove firewall %s: %w", p.NF, err)
	}
	return nil
}

// Counters reads the per-rule counters ("rule/N/packets", "rule/N/bytes",
// N from 0 in rule order; "policy/..." for the default policy) and the
// drop counters by reason ("drop/REASON").
func (driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pm, err := firewall.OpenPinned(PinDir(ns, p.NF))
	if err != nil {
		return nil, fmt.Errorf("read firewall %s counters: %w", p.NF, err)
	}
	defer pm.Close()
	rcs, err := pm.RuleCounts(nil)
	if err != nil {
		return nil, fmt.Errorf("read firewall %s counters: %w", p.NF, err)
	}
	var out []kind.Counter
	for _, rc := range rcs {
		what := fmt.Sprintf("rule/%d", rc.Rule)
		if rc.Rule < 0 {
			what = "policy"
		}
		out = append(out, kind.Counter{Name: what + "/packets", Value: rc.Packets}, kind.Counter{Name: what + "/bytes", Value: rc.Bytes})
	}
	drops, err := pm.DropCounts()
	if err != nil {
		return nil, fmt.Errorf("read firewall %s counters: %w", p.NF, err)
	}
	for i, v := range drops {
		if v != 0 {
			out = append(out, kind.Counter{Name: "drop/" + drop.Reason(i).String(), Value: v})
		}
	}
	return out, nil
}
