// Package kind is the one place an NF kind plugs into srchain. A kind is a
// package (internal/kinds/<name>) that implements Kind and calls Register
// from its init function; internal/kinds/all imports every kind, and the
// CLI, the lab and the tests import that. Nothing else in the pipeline
// (spec, compile, apply) names a kind: validate asks the registry which
// kinds exist and how to check their config, the compiler asks it how to
// compile an NF, and the applier asks it for the driver of a program.
//
// docs/CONTRIBUTING.md walks through adding a kind.
package kind

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Kind is one NF kind: what `kind:` names in a spec.
type Kind interface {
	// Name is the spec's kind name (e.g. "forward", "firewall").
	Name() string
	// Check validates nf.Config; path is the config's field path (e.g.
	// "nfs[2].config"). Errors are *spec.FieldError made with
	// s.ErrorAt, so they carry file:line:col and the field path. Check
	// may read the files the config names, only through s.ReadFile.
	Check(s *spec.Spec, nf *spec.NF, path string) []error
	// Compile adds what the NF needs to its node's desired state: it may
	// change sid (the NF's SID as compiled, e.g. its datapath) and add
	// programs (with their typed config) to node. It must be
	// deterministic and read files only through s.ReadFile.
	Compile(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error
	// Drivers maps each state.Program kind this NF kind provides to its
	// driver (none: the kind needs only kernel state).
	Drivers() map[string]Driver
}

// LegacyProxy is implemented by a kind that serves an SR-unaware NF
// (`sr_aware: false`) through an SR proxy (seed 001): the compiler
// accepts such an NF only when its kind says so.
type LegacyProxy interface {
	ServesLegacy() bool
}

// ChainBlind is implemented by a kind whose Check and Compile read no
// chain: what it validates and compiles for an NF is the same whatever
// the chains are. A change to a chain whose NFs are all of such kinds can
// be validated and compiled alone (spec.ValidateChain, the controller's
// fast path). Kinds that do read chains must read only the chains that
// cross their NF.
type ChainBlind interface {
	IgnoresChains() bool
}

// Driver makes one kind of state.Program real on a node.
//
// Apply must be idempotent: what is already as desired (loaded, pinned,
// AND attached) is left alone and a nil undo returned; what is missing
// (e.g. a link detached by hand) is put back. On error it leaves nothing
// behind. The undo removes what this call added. Drivers whose objects
// must outlive the process (the lab CLI exits after `lab up`) pin them
// under PinDir(ns).
type Driver interface {
	Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (undo func() error, err error)
	// Check reports, changing nothing, how the node differs from p
	// (empty: as desired). A pin that exists but whose link is not
	// attached is drift.
	Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (drift []string, err error)
	// Remove detaches and unpins what Apply made for p.
	Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error
	// Counters reads p's counters (drops by reason, rule hits...).
	Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]Counter, error)
}

// Finisher is a Driver with a second step. Finish runs once every
// program of the node was applied (in the node's program order, after
// the last Apply), for a change that may only be made once the programs
// after the driver's own are in place; its undo is journaled like an
// Apply's. The OPoT driver marks a chain's transit as done by the End
// there, once the End reads its maps (docs/opot.md "Changing sides").
type Finisher interface {
	Finish(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (undo func() error, err error)
}

// ErrNoInterface: the state names an interface the node does not have.
var ErrNoInterface = errors.New("no such interface")

// Counter is one named counter of a program.
type Counter struct {
	// Name says what is counted, e.g. "drop/srh_bad_sl" or "rule/3/packets".
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

var (
	mu      sync.RWMutex
	kinds   = map[string]Kind{}
	drivers = map[string]Driver{}
)

// Register adds k. It is called from init functions; registering a kind
// or a program twice is a programming error and panics at start-up.
func Register(k Kind) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[k.Name()]; dup {
		panic(fmt.Sprintf("kind %q registered twice", k.Name()))
	}
	for p := range k.Drivers() {
		if _, dup := drivers[p]; dup {
			panic(fmt.Sprintf("program %q of kind %q already has a driver", p, k.Name()))
		}
	}
	kinds[k.Name()] = k
	for p, d := range k.Drivers() {
		drivers[p] = d
	}
}

// RegisterDriver adds the driver of a node-wide program that no NF kind
// fronts (the eBPF ingress, internal/ingress). Called from init
// functions; a program with a driver already panics at start-up.
func RegisterDriver(program string, d Driver) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := drivers[program]; dup {
		panic(fmt.Sprintf("program %q already has a driver", program))
	}
	drivers[program] = d
}

// Lookup returns the kind called name.
func Lookup(name string) (Kind, bool) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Names lists the registered kinds, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(kinds))
	for n := range kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DriverFor returns the driver of a state.Program kind.
func DriverFor(program string) (Driver, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := drivers[program]
	return d, ok
}

// Drivers returns a copy of every registered program driver.
func Drivers() map[string]Driver {
	mu.RLock()
	defer mu.RUnlock()
	out := make(map[string]Driver, len(drivers))
	for p, d := range drivers {
		out[p] = d
	}
	return out
}

// registry is what spec.Validate sees of the kinds (spec cannot import
// this package: it imports spec).
type registry struct{}

func (registry) Names() []string { return Names() }

// ServesLegacy reports whether kind name fronts SR-unaware NFs
// (spec.LegacyKinds).
func (registry) ServesLegacy(name string) bool {
	lp, ok := lookupAs[LegacyProxy](name)
	return ok && lp.ServesLegacy()
}

// IgnoresChains reports whether kind name reads no chain
// (spec.ChainBlindKinds).
func (registry) IgnoresChains(name string) bool {
	cb, ok := lookupAs[ChainBlind](name)
	return ok && cb.IgnoresChains()
}

// lookupAs is kind name as the optional interface T, if it implements it.
func lookupAs[T any](name string) (T, bool) {
	k, _ := Lookup(name)
	t, ok := k.(T)
	return t, ok
}

func (registry) Check(s *spec.Spec, nf *spec.NF, path string) (bool, []error) {
	k, ok := Lookup(nf.Kind)
	if !ok {
		return false, nil
	}
	return true, k.Check(s, nf, path)
}

func init() { spec.SetKinds(registry{}) }

// PinRoot is where drivers pin BPF objects, one directory per namespace.
const PinRoot = "/sys/fs/bpf/srchain/netns"

// PinDir is the pin directory of the programs of one namespace; removing
// it (and the namespace) removes every program srchain attached there.
func PinDir(ns *netns.NS) string { return PinRoot + "/" + ns.Name }

// Ifindexes resolves interface names in ns, in order; a missing one is
// ErrNoInterface (drivers attach to every interface of a program).
func Ifindexes(ns *netns.NS, names []string) ([]int, error) {
	out := make([]int, 0, len(names))
	for _, ifn := range names {
		l, err := ns.Netlink().LinkByName(ifn)
		if err != nil {
			return nil, fmt.Errorf("find interface %s: %w: %w", ifn, ErrNoInterface, err)
		}
		out = append(out, l.Attrs().Index)
	}
	return out, nil
}

// LinkRuns asks the kernel, in ns, whether the link pinned at pin is
// attached at h (live: a pin file alone proves nothing, the link may
// have been detached by hand or its interface recreated) and, when prog
// is not nil, whether it runs prog's code (runs: false for an older
// srchain build's program under the same pin, which a driver swaps;
// bpfrt.PinnedLinkRuns).
func LinkRuns(ns *netns.NS, pin string, h bpfrt.Hook, prog *ebpf.Program) (live, runs bool, err error) {
	err = ns.Do(func() error {
		live, runs = bpfrt.PinnedLinkRuns(pin, h, prog)
		return nil
	})
	return live, runs, err
}

// Event is one thing a program reported on its own (e.g. an OPoT
// verifier's drop, read from its ring buffer).
type Event struct {
	// Subject is what it is about, e.g. "chain/NAME".
	Subject string `json:"subject"`
	// Reason is the named reason (a drop reason of internal/drop).
	Reason string `json:"reason"`
	// Detail is the rest, for people.
	Detail string `json:"detail,omitempty"`
}

// EventSource is a Driver whose program reports events: Events drains
// those pending (each is returned once).
type EventSource interface {
	Events(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]Event, error)
}

// Summarizer is a Driver with a result worth a line each after a demo
// (e.g. an OPoT chain's verified and dropped packets).
type Summarizer interface {
	Summary(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error)
}

// Undo collects the steps that take back what one Apply did; Run takes
// them back in reverse order. Drivers return Result as their undo.
type Undo struct{ steps []func() error }

// Add records the step that takes back what was just done.
func (u *Undo) Add(step func() error) { u.steps = append(u.steps, step) }

// Run takes every step back, last first, and joins their errors.
func (u *Undo) Run() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		errs = append(errs, u.steps[i]())
	}
	return errors.Join(errs...)
}

// Result is Apply's undo: nil when Apply changed nothing.
func (u *Undo) Result() func() error {
	if len(u.steps) == 0 {
		return nil
	}
	return u.Run
}

// Fail is Apply's result for a failure: nothing to undo, err joined with
// the errors of taking back what was done.
func (u *Undo) Fail(err error) (func() error, error) { return nil, errors.Join(err, u.Run()) }
