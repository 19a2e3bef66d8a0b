package apply

import (
	"context"
	"fmt"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// ProgramDriver makes one kind of state.Program real on a node; NF kinds
// provide them (internal/kind, internal/kinds/...).
type ProgramDriver = kind.Driver

// CheckPrograms reports, changing nothing, what the drivers of the node's
// programs find missing or different (a program not attached, a SID
// missing from its map, another rule set), and programs nobody drives.
func CheckPrograms(ctx context.Context, ns *netns.NS, node state.Node) ([]string, error) {
	return CheckProgramsWith(ctx, ns, node, nil)
}

// CheckProgramsWith is CheckPrograms with the given drivers (nil: the
// registered ones), as Options.Drivers for Apply.
func CheckProgramsWith(ctx context.Context, ns *netns.NS, node state.Node, drivers map[string]ProgramDriver) ([]string, error) {
	if drivers == nil {
		drivers = kind.Drivers()
	}
	var missing []string
	for _, p := range node.Programs {
		d, ok := drivers[p.Kind]
		if !ok {
			missing = append(missing, fmt.Sprintf("program %s: %v", p.Kind, ErrNoDriver))
			continue
		}
		m, err := d.Check(ctx, ns, node, p)
		if err != nil {
			return missing, fmt.Errorf("check program %s: %w", p.Kind, err)
		}
		missing = append(missing, m...)
	}
	return missing, nil
}

// DriverFunc adapts an apply function to a ProgramDriver, for tests: its
// Check, Remove and Counters do nothing.
type DriverFunc func(ns *netns.NS, node state.Node, p state.Program) (func() error, error)

// Apply calls f.
func (f DriverFunc) Apply(_ context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	return f(ns, node, p)
}

// Check reports nothing.
func (DriverFunc) Check(context.Context, *netns.NS, state.Node, state.Program) ([]string, error) {
	return nil, nil
}

// Remove does nothing.
func (DriverFunc) Remove(context.Context, *netns.NS, state.Node, state.Program) error { return nil }

// Counters reports none.
func (DriverFunc) Counters(context.Context, *netns.NS, state.Node, state.Program) ([]kind.Counter, error) {
	return nil, nil
}

func registered() map[string]ProgramDriver { return kind.Drivers() }

// PinRoot is where drivers pin BPF objects, one directory per namespace.
const PinRoot = kind.PinRoot

// PinDir is the pin directory of the programs of one namespace; removing
// it (and the namespace) removes every program srchain attached there.
func PinDir(ns *netns.NS) string { return kind.PinDir(ns) }

func (a *applier) programs() error {
	if a.dry {
		// Drivers have no dry run; CheckPrograms asks them what differs.
		return nil
	}
	for _, p := range a.node.Programs {
		d, ok := a.drivers[p.Kind]
		if !ok {
			return fmt.Errorf("attach program %q: %w", p.Kind, ErrNoDriver)
		}
		undo, err := d.Apply(a.ctx, a.ns, a.node, p)
		if err != nil {
			return fmt.Errorf("attach program %q: %w", p.Kind, err)
		}
		if undo != nil {
			a.j.did("program "+p.Kind, undo)
		}
	}
	for _, p := range a.node.Programs {
		f, ok := a.drivers[p.Kind].(kind.Finisher)
		if !ok {
			continue
		}
		undo, err := f.Finish(a.ctx, a.ns, a.node, p)
		if err != nil {
			return fmt.Errorf("finish program %q: %w", p.Kind, err)
		}
		if undo != nil {
			a.j.did("finish program "+p.Kind, undo)
		}
	}
	return nil
}
