package firewall

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

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

// stageChange is what setXDPStage did.
type stageChange int

const (
	stageSame    stageChange = iota
	stageFlipped             // pinned or unpinned: undone by the opposite
	stageSwapped             // an older build's stage replaced: kept on undo
)

// setXDPStage makes the node pipeline's firewall stage (pinned for the
// pipeline driver, which runs after this one) follow xdp: this build's
// XDP twin of the firewall pinned under pin (an older srchain's stage is
// pinned again), or none.
func setXDPStage(ns *netns.NS, pin string, xdp bool, pipe *pipeline.Maps) (stageChange, error) {
	dir := pipeline.NodeDir(ns)
	have := pipeline.StagePinned(dir, pipeline.Firewall)
	if !xdp {
		if !have {
			return stageSame, nil
		}
		return stageFlipped, pipeline.UnpinStage(dir, pipeline.Firewall)
	}
	prog, err := firewall.LoadPinnedProgram(pin, pipe.Replacements(), true)
	if err != nil {
		return stageSame, err
	}
	defer prog.Close()
	switch {
	case !have:
		return stageFlipped, pipeline.PinStage(dir, pipeline.Firewall, prog)
	case !pipeline.StageRuns(dir, pipeline.Firewall, prog):
		return stageSwapped, pipeline.PinStage(dir, pipeline.Firewall, prog)
	}
	return stageSame, nil
}

// applyPinned brings a pinned firewall to cfg on ifindexes: rule set
// first, then missing links, and this build's program in links that run
// an older srchain's (an upgrade). The undo reverses the rule set and
// the new links; a swapped program stays (the old build's code is what
// an upgrade replaces).
func applyPinned(ns *netns.NS, pin, name string, cfg firewall.Config, ifindexes []int, xdp bool, pipe *pipeline.Maps) (func() error, error) {
	undoRules, err := updatePinned(pin, name, cfg)
	if err != nil {
		return nil, err
	}
	var added []int
	stage, swapped := stageSame, false
	undo := func() error {
		var errs []error
		if stage == stageFlipped {
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
	prog, err := firewall.LoadPinnedProgram(pin, pipe.Replacements(), false)
	if err != nil {
		// Tables an older build laid out otherwise: this build cannot
		// run over them.
		return nil, errors.Join(fmt.Errorf("firewall %s: %w (remove the pins at %s to reload)", name, err, pin), undo())
	}
	defer prog.Close()
	for _, idx := range ifindexes {
		live, runs, err := kind.LinkRuns(ns, linkPin(pin, idx), bpfrt.Hook{Ifindex: idx}, prog)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
		}
		if live && runs {
			continue
		}
		if err := attachPinned(ns, pin, idx, prog); err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
		}
		if live {
			swapped = true
		} else {
			added = append(added, idx)
		}
	}
	if stage, err = setXDPStage(ns, pin, xdp, pipe); err != nil {
		return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
	}
	if undoRules == nil && len(added) == 0 && stage == stageSame && !swapped {
		return nil, nil
	}
	return undo, nil
}

// attachPinned puts prog at the head of ifindex's tcx ingress, its link
// pinned for ifindex under pin: a live pinned link takes prog in place
// (no gap), a stale pin is replaced (bpfrt.Attach).
func attachPinned(ns *netns.NS, pin string, ifindex int, prog *ebpf.Program) error {
	return ns.Do(func() error {
		if err := bpfrt.AttachPinned(bpfrt.Hook{Ifindex: ifindex}, prog, bpfrt.AttachOptions{Pin: linkPin(pin, ifindex), Head: true}); err != nil {
			return fmt.Errorf("attach firewall to ifindex %d: %w", ifindex, err)
		}
		return nil
	})
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
// changing anything: its pins, an attached link per interface running
// this build's program (asking the kernel, kind.LinkRuns), the XDP
// stage, and a rule set that differs from the desired one.
func (driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := p.NF
	pin := PinDir(ns, name)
	if _, err := os.Stat(pin); err != nil {
		return []string{"firewall " + name + " not pinned at " + pin}, nil
	}
	// This build's programs, only to compare code: loaded over private
	// pipeline maps (the tag leaves map references out), so Check
	// changes nothing.
	prog, err := firewall.LoadPinnedProgram(pin, nil, false)
	if err != nil {
		return []string{fmt.Sprintf("firewall %s: %v", name, err)}, nil
	}
	defer prog.Close()
	var missing []string
	for _, ifn := range p.Interfaces {
		l, err := ns.Netlink().LinkByName(ifn)
		if err != nil {
			missing = append(missing, "firewall "+name+": no interface "+ifn)
			continue
		}
		live, runs, err := kind.LinkRuns(ns, linkPin(pin, l.Attrs().Index), bpfrt.Hook{Ifindex: l.Attrs().Index}, prog)
		switch {
		case err != nil:
			return missing, err
		case !live:
			missing = append(missing, fmt.Sprintf("firewall %s: program %s not attached on %s", name, ProgName, ifn))
		case !runs:
			missing = append(missing, fmt.Sprintf("firewall %s: program %s on %s runs another build's code", name, ProgName, ifn))
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
	if p.XDP {
		xprog, err := firewall.LoadPinnedProgram(pin, nil, true)
		if err != nil {
			return append(missing, fmt.Sprintf("firewall %s: %v", name, err)), nil
		}
		defer xprog.Close()
		if !pipeline.StageRuns(pipeline.NodeDir(ns), pipeline.Firewall, xprog) {
			missing = append(missing, fmt.Sprintf("firewall %s: not loaded as the xdp pipeline's firewall stage (or an older build's)", name))
		}
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
