// Package apply makes one node look like its desired state (internal/state):
// sysctls, interfaces, addresses, the SRv6 tunnel source, routes (plain,
// seg6 encap, seg6local SIDs), policy rules and eBPF programs.
//
// Apply works on a namespace handle (internal/netns), so the same code
// serves the lab (one namespace per node) and a host (the agent opens the
// root namespace). It is a diff: what is already as desired is left alone,
// so a second Apply changes nothing. Everything it changes is journaled; on
// any error the journal is replayed backwards and the node is left as it
// was before the call.
//
// Apply only adds and modifies; it never removes configuration it was not
// asked about, because on a host that configuration belongs to someone else.
// The one exception is Options.Prev: routes, SIDs and rules that the
// previous desired state named and this one drops are removed.
//
// Apply is linear in the size of the state: it dumps the routes and rules
// of each family once and diffs in memory (routes.go).
package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/mss"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// Errors callers branch on.
var (
	// ErrNoInterface: the state names an interface the node does not have.
	ErrNoInterface = errors.New("no such interface")
	// ErrNoDriver: a program kind nobody registered a driver for.
	ErrNoDriver = errors.New("no driver for program kind")
	// ErrBadState: the desired state cannot be expressed (e.g. a behavior
	// without its next hop).
	ErrBadState = errors.New("invalid desired state")
	// ErrUnmanaged: an interface the state says is not srchain's to
	// configure (state.Node.InterfacesUnmanaged) differs from it.
	ErrUnmanaged = errors.New("interface differs and is not managed by srchain")
)

// Result tells what Apply did.
type Result struct {
	// Changes is the number of changes made (0 on an idempotent re-apply).
	Changes int
	// Pending lists, in a dry run, the changes Apply would make.
	Pending []string
}

// journal records how to undo each change, newest last.
type journal struct {
	log   *slog.Logger
	steps []step
}

type step struct {
	what string
	undo func() error
}

func (j *journal) did(what string, undo func() error) {
	j.log.Debug("applied", "change", what)
	j.steps = append(j.steps, step{what, undo})
}

// rollback undoes every recorded change, newest first, and reports the
// undo steps that failed.
func (j *journal) rollback() error {
	var errs []error
	for i := len(j.steps) - 1; i >= 0; i-- {
		s := j.steps[i]
		if s.undo == nil {
			continue
		}
		if err := s.undo(); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.what, err))
		} else {
			j.log.Debug("undone", "change", s.what)
		}
	}
	return errors.Join(errs...)
}

// Options tune Apply; the zero value is fine.
type Options struct {
	// Drivers to use for programs; nil means the registered ones.
	Drivers map[string]ProgramDriver
	Logger  *slog.Logger
	// DryRun changes nothing and reports what would change (programs
	// are not checked).
	DryRun bool
	// Prev is the desired state the node was last applied with. Apply
	// then applies only the difference: what Prev has too is taken to be
	// in place and not read back, so the cost is that of the change
	// (applying without Prev, as `lab apply NAME` does, repairs drift).
	Prev *state.Node
	// Clamps, when set, are the node's TCP MSS clamps (internal/mss) for
	// an Apply given only part of the node's desired state (the agent's
	// apply of the chains that changed): the clamp table is node-wide, so
	// it is derived from every chain, not from the part.
	Clamps *[]mss.Clamp
	// Remove is a desired state the node held: its routes, SIDs and
	// rules that node lacks are removed. Nil removes nothing (see the
	// package comment).
	Remove *state.Node
	// Owned removes every route and rule tagged RTProto (srchain's) that
	// node lacks, whether or not a previous state names it: the node's
	// srchain part then is node, whatever it held (owned.go). Only for a
	// whole node: a subset would remove the other chains'.
	Owned bool
}

// Apply makes node ns match node. See the package comment.
func Apply(ctx context.Context, ns *netns.NS, node state.Node) error {
	_, err := ApplyWith(ctx, ns, node, Options{})
	return err
}

// ApplyWith is Apply with options, returning what was done.
func ApplyWith(ctx context.Context, ns *netns.NS, node state.Node, opts Options) (Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node", node.Name, "netns", ns.Name)
	drivers := opts.Drivers
	if drivers == nil {
		drivers = registered()
	}
	a := &applier{ctx: ctx, ns: ns, node: node, j: &journal{log: log}, drivers: drivers, dry: opts.DryRun,
		prev: newPrevSet(opts.Prev), remove: opts.Remove, owned: opts.Owned, clamps: opts.Clamps}
	p := opts.Prev
	stages := []struct {
		name string
		fn   func() error
		same bool // unchanged since Prev: skipped
	}{
		{"sysctls", a.sysctls, false},
		{"interfaces", a.interfaces, p != nil && equal(p.Interfaces, node.Interfaces)},
		{"addresses", a.addresses, p != nil && equal(p.Interfaces, node.Interfaces) && equal(p.Loopback, node.Loopback)},
		{"tunsrc", a.tunsrc, p != nil && p.TunSrc == node.TunSrc},
		{"routes", a.routes, false},
		{"sids", a.sids, false},
		{"rules", a.rules, false},
		// The TCP MSS clamp of the chains the node is the ingress of.
		{"mss", a.mss, opts.Clamps == nil && p != nil && equal(mss.Clamps(*p), mss.Clamps(node))},
		// Secrets feed the programs (OPoT keys): a rotated key re-applies them.
		{"programs", a.programs, p != nil && equal(p.Programs, node.Programs) && equal(p.SIDs, node.SIDs) && equal(p.Secrets, node.Secrets)},
		{"prune", a.prune, false},
		{"owned", a.pruneOwned, false},
	}
	defer func() {
		if a.strict != nil {
			a.strict.Close()
		}
	}()
	for _, s := range stages {
		if s.same {
			continue
		}
		if err := ctx.Err(); err != nil {
			return Result{}, a.fail(fmt.Errorf("apply %s: %w", node.Name, err))
		}
		if err := s.fn(); err != nil {
			return Result{}, a.fail(fmt.Errorf("apply %s %s: %w", node.Name, s.name, err))
		}
	}
	if a.dry {
		var pending []string
		for _, s := range a.j.steps {
			pending = append(pending, s.what)
		}
		return Result{Pending: pending}, nil
	}
	if len(a.j.steps) > 0 {
		log.Debug("node applied", "changes", len(a.j.steps))
	}
	return Result{Changes: len(a.j.steps)}, nil
}

// Check reports what Apply would change on the node, changing nothing:
// an empty list means the node is as desired (programs aside).
func Check(ctx context.Context, ns *netns.NS, node state.Node) ([]string, error) {
	res, err := ApplyWith(ctx, ns, node, Options{DryRun: true})
	return res.Pending, err
}

// CheckOwned is Check that also reports the routes and rules tagged
// RTProto that node lacks (Options.Owned): an empty list means srchain's
// part of the node is node, read from the kernel, not from any record.
func CheckOwned(ctx context.Context, ns *netns.NS, node state.Node) ([]string, error) {
	res, err := ApplyWith(ctx, ns, node, Options{DryRun: true, Owned: true})
	return res.Pending, err
}

type applier struct {
	ctx     context.Context
	ns      *netns.NS
	node    state.Node
	j       *journal
	drivers map[string]ProgramDriver
	dry     bool
	prev    *prevSet
	remove  *state.Node
	clamps  *[]mss.Clamp // Options.Clamps
	owned   bool

	// What the node's namespace holds, read once per Apply (routes.go).
	views      map[int]*routeView
	strict     *netlink.Handle // for per-table dumps (listTable)
	fibLookups int             // single-route lookups so far (lookupRoute)
	ruleViews  map[int]map[string]netlink.Rule
	ifindexes  map[string]int
}

// hostChange is change for the interfaces, addresses and MTUs of a node
// whose interfaces are its operator's (state.Node.InterfacesUnmanaged):
// there the difference is reported, never written (issue 32 item 1), in
// a dry run as a pending item, else as ErrUnmanaged.
func (a *applier) hostChange(what string, do, undo func() error) error {
	if !a.node.InterfacesUnmanaged {
		return a.change(what, do, undo)
	}
	if a.dry {
		a.j.steps = append(a.j.steps, step{what: "mismatch (not managed): " + what})
		return nil
	}
	return fmt.Errorf("%s: %w", what, ErrUnmanaged)
}

// change runs do and journals undo; in a dry run it only records what.
func (a *applier) change(what string, do, undo func() error) error {
	if a.dry {
		a.j.steps = append(a.j.steps, step{what: what})
		return nil
	}
	if err := do(); err != nil {
		return err
	}
	a.j.did(what, undo)
	return nil
}

// wrap annotates err, or returns nil.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func (a *applier) fail(err error) error {
	if rerr := a.j.rollback(); rerr != nil {
		return errors.Join(err, fmt.Errorf("roll back %s: %w", a.node.Name, rerr))
	}
	return err
}

// prevSet is Options.Prev as sets, to tell unchanged items in O(1).
type prevSet struct {
	sysctls map[state.Sysctl]bool
	routes  map[slot]state.Route
	sids    map[string]bool
	rules   map[state.Rule]bool
}

// slot is where a desired route goes: its table and destination.
type slot struct {
	table int
	dst   netip.Prefix
}

func routeSlot(r state.Route) slot  { return slot{tableID(r.Table), r.Dst.Masked()} }
func sidSlot(s state.LocalSID) slot { return slot{tableID(0), s.SID.Masked()} }

func newPrevSet(n *state.Node) *prevSet {
	if n == nil {
		return nil
	}
	p := &prevSet{sysctls: map[state.Sysctl]bool{}, routes: make(map[slot]state.Route, len(n.Routes)),
		sids: make(map[string]bool, len(n.SIDs)), rules: make(map[state.Rule]bool, len(n.Rules))}
	for _, s := range n.Sysctls {
		p.sysctls[s] = true
	}
	for _, r := range n.Routes {
		p.routes[routeSlot(r)] = r
	}
	for _, s := range n.SIDs {
		p.sids[sidID(s)] = true
	}
	for _, r := range n.Rules {
		p.rules[r] = true
	}
	return p
}

// sameRoute reports whether two desired routes program the same kernel
// route (the chain label aside).
func sameRoute(a, b state.Route) bool {
	if a.Table != b.Table || a.Dst != b.Dst || a.Via != b.Via || a.Dev != b.Dev || (a.Encap == nil) != (b.Encap == nil) {
		return false
	}
	return a.Encap == nil || (a.Encap.Mode == b.Encap.Mode && slices.Equal(a.Encap.Segments, b.Encap.Segments) &&
		bytes.Equal(a.Encap.TLVs, b.Encap.TLVs))
}

// hasSysctl and friends report whether Options.Prev has the item.
func (p *prevSet) hasSysctl(s state.Sysctl) bool { return p != nil && p.sysctls[s] }
func (p *prevSet) hasRoute(r state.Route) bool {
	if p == nil {
		return false
	}
	q, ok := p.routes[routeSlot(r)]
	return ok && sameRoute(q, r)
}
func (p *prevSet) hasSID(s state.LocalSID) bool { return p != nil && p.sids[sidID(s)] }

// sidID identifies a LocalSID with every field (it holds a slice, so it
// cannot be a map key itself).
func sidID(s state.LocalSID) string {
	b, _ := json.Marshal(s)
	return string(b)
}
func (p *prevSet) hasRule(r state.Rule) bool { return p != nil && p.rules[r] }

// equal compares two parts of a desired state; nil and empty are equal.
func equal[T any](a, b []T) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
