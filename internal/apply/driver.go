package apply

import (
	"fmt"
	"maps"
	"slices"
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

// ProgramNamer is implemented by drivers that can say which program (its
// kernel name, at most 15 characters) they attach to the tcx ingress of
// p.Interfaces, so that CheckPrograms requires that program and not just
// any.
type ProgramNamer interface {
	ProgramName(p state.Program) string
}

// CheckPrograms reports the node's programs that are not attached to the
// tcx ingress of their interfaces (the driver's ProgramName there; any
// program when the driver does not name one), and what their drivers find
// missing.
func CheckPrograms(ns *netns.NS, node state.Node) ([]string, error) {
	return checkPrograms(ns, node, registered())
}

// CheckProgramsWith is CheckPrograms with the given drivers (nil: the
// registered ones), as Options.Drivers for Apply.
func CheckProgramsWith(ns *netns.NS, node state.Node, drivers map[string]ProgramDriver) ([]string, error) {
	if drivers == nil {
		drivers = registered()
	}
	return checkPrograms(ns, node, drivers)
}

func checkPrograms(ns *netns.NS, node state.Node, ds map[string]ProgramDriver) ([]string, error) {
	var missing []string
	for _, p := range node.Programs {
		d, ok := ds[p.Kind]
		want := ""
		if n, isNamer := d.(ProgramNamer); ok && isNamer {
			want = n.ProgramName(p)
		}
		for _, ifn := range p.Interfaces {
			names, err := IngressPrograms(ns, ifn)
			if err != nil {
				return missing, err
			}
			switch {
			case want == "" && len(names) == 0:
				missing = append(missing, fmt.Sprintf("program %s not attached on %s", p.Kind, ifn))
			case want != "" && !slices.Contains(names, want):
				missing = append(missing, fmt.Sprintf("program %s (%s) not attached on %s", p.Kind, want, ifn))
			}
		}
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
