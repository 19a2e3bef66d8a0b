package apply

import (
	"fmt"
	"maps"
	"sync"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// ProgramDriver attaches one kind of eBPF program (state.Program.Kind) on a
// node. Apply must be idempotent (attaching what is already attached changes
// nothing and returns a nil or no-op undo) and must leave nothing behind when
// it returns an error. The returned undo removes what this call added.
//
// Drivers that must outlive the process (the lab CLI exits after `lab up`)
// pin their links and maps under PinDir(ns).
type ProgramDriver interface {
	Apply(ns *netns.NS, node state.Node, p state.Program) (undo func() error, err error)
}

// ProgramChecker is implemented by drivers that can say, without changing
// anything, what of a program's configuration is missing on a node.
type ProgramChecker interface {
	Check(ns *netns.NS, node state.Node, p state.Program) (missing []string, err error)
}

// CheckPrograms reports the node's programs that are not attached to the
// tcx ingress of their interfaces, and what their drivers find missing.
func CheckPrograms(ns *netns.NS, node state.Node) ([]string, error) {
	ds := registered()
	var missing []string
	for _, p := range node.Programs {
		for _, ifn := range p.Interfaces {
			names, err := IngressPrograms(ns, ifn)
			if err != nil {
				return missing, err
			}
			if len(names) == 0 {
				missing = append(missing, fmt.Sprintf("program %s not attached on %s", p.Kind, ifn))
			}
		}
		d, ok := ds[p.Kind]
		if !ok {
			missing = append(missing, fmt.Sprintf("program %s: %v", p.Kind, ErrNoDriver))
			continue
		}
		if c, ok := d.(ProgramChecker); ok {
			m, err := c.Check(ns, node, p)
			if err != nil {
				return missing, fmt.Errorf("check program %s: %w", p.Kind, err)
			}
			missing = append(missing, m...)
		}
	}
	return missing, nil
}

// DriverFunc adapts a function to ProgramDriver.
type DriverFunc func(ns *netns.NS, node state.Node, p state.Program) (func() error, error)

// Apply calls f.
func (f DriverFunc) Apply(ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	return f(ns, node, p)
}

var (
	driversMu sync.Mutex
	drivers   = map[string]ProgramDriver{}
)

// Register makes d the driver for programs of kind; packages that implement
// a program register themselves from init or from the CLI.
func Register(kind string, d ProgramDriver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	drivers[kind] = d
}

// Registered reports whether a driver for kind exists.
func Registered(kind string) bool {
	driversMu.Lock()
	defer driversMu.Unlock()
	_, ok := drivers[kind]
	return ok
}

func registered() map[string]ProgramDriver {
	driversMu.Lock()
	defer driversMu.Unlock()
	return maps.Clone(drivers)
}

// PinRoot is where drivers pin BPF objects, one directory per namespace.
const PinRoot = "/sys/fs/bpf/srchain/netns"

// PinDir is the pin directory of the programs of one namespace; removing
// it (and the namespace) removes every program srchain attached there.
func PinDir(ns *netns.NS) string { return PinRoot + "/" + ns.Name }

func (a *applier) programs() error {
	if a.dry {
		// Drivers have no dry run; Check callers query attachments
		// themselves (IngressPrograms).
		return nil
	}
	for _, p := range a.node.Programs {
		d, ok := a.drivers[p.Kind]
		if !ok {
			return fmt.Errorf("attach program %q: %w", p.Kind, ErrNoDriver)
		}
		undo, err := d.Apply(a.ns, a.node, p)
		if err != nil {
			return fmt.Errorf("attach program %q: %w", p.Kind, err)
		}
		if undo != nil {
			a.j.did("program "+p.Kind, undo)
		}
	}
	return nil
}
