package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

// ErrTopologyChanged: a new desired state for a running lab changes its
// nodes, links or interfaces, which Update does not do in place.
var ErrTopologyChanged = errors.New("topology changed")

// Reapply applies the recorded desired state to every node of lab again,
// repairing what drifted (an interface set down, a route deleted). It
// returns the number of changes per node; nodes already as desired get 0.
// A node that fails is rolled back by the applier and reported; the
// others are still applied.
func Reapply(ctx context.Context, lab string, opts Options) (map[string]int, error) {
	// Under the state dir's lock, as Update: a re-apply that read the
	// record before a concurrent `lab apply FILE` finished would put the
	// old routes back over the new ones.
	release, err := lockDir(opts)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := checkNotUp(opts, "lab apply", lab); err != nil {
		return nil, err
	}
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	net, err := rec.desired()
	if err != nil {
		return nil, fmt.Errorf("reapply: %w", err)
	}
	changes := map[string]int{}
	var errs []error
	for _, n := range net.Nodes {
		ns, err := openNode(rec, n.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res, err := apply.ApplyWith(ctx, ns, n, apply.Options{Drivers: opts.Drivers, Logger: opts.Logger})
		ns.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes[n.Name] = res.Changes
	}
	if err := errors.Join(errs...); err != nil {
		return changes, fmt.Errorf("reapply lab %s: %w", lab, err)
	}
	return changes, nil
}

// Update makes the running lab net.Name match net, a new desired state
// (an edited spec): each node gets the difference between its recorded
// state and its new one, so chains, SIDs and rules that did not change are
// never touched and their traffic keeps flowing. It works in three passes
// over the nodes so that no packet meets a SID that is not there yet or
// no longer there: (1) the new SIDs and programs everywhere, with the old
// policies kept; (2) the new routes and rules (ingress policies move to
// the new segment lists); (3) what only the old state had is removed
// (apply.Options.Prev). The record is replaced only when every node
// succeeded; if one fails, the nodes are put back to the recorded state.
// Nodes, links and interfaces must be those of the running lab
// (ErrTopologyChanged: that takes `lab down` and `lab up`).
func Update(ctx context.Context, net *state.Network, opts UpOptions) (map[string]int, error) {
	if err := checkLabName("lab apply", net.Name); err != nil {
		return nil, err
	}
	// The state dir lock keeps Down and other updates out until the
	// record says what the nodes hold.
	unlock, err := lockDir(opts.Options)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkNotUp(opts.Options, "lab apply", net.Name); err != nil {
		return nil, err
	}
	t0 := time.Now()
	rec, err := Load(net.Name, opts.Options)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(AgentsDir(opts.Options, net.Name)); err == nil {
		return nil, fmt.Errorf("lab apply %s: %w: change it through its controller (srchain apply -f FILE --server URL)", net.Name, ErrAgentsLab)
	}
	recorded, err := rec.desired()
	// A lab recorded by an older srchain (another state format) is what
	// `lab apply FILE` is for: its routes, rules and SIDs still read
	// right, so FILE's state is applied in full (nothing taken as in
	// place) and what only the old state had is removed.
	full := false
	if errors.Is(err, state.ErrVersion) {
		recorded, full, err = rec.Network, true, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab apply: %w", err)
	}
	tLoad := time.Since(t0)
	if err := sameTopology(recorded, net); err != nil {
		return nil, fmt.Errorf("lab apply %s: %w (run `srchain lab down %s` and `lab up` to rebuild it)", net.Name, err, net.Name)
	}
	// The OPoT keys of chains whose proof did not change are those the
	// nodes run (every compile draws new ones): packets in flight keep
	// verifying, and those nodes' digests stay equal.
	kept, err := compile.KeepOPoTKeys(net, recorded)
	if err != nil {
		return nil, fmt.Errorf("lab apply %s: %w", net.Name, err)
	}
	if len(kept) > 0 {
		opts.log().Debug("lab apply: opot keys kept", "lab", net.Name, "chains", kept)
	}
	old := map[string]*state.Node{}
	for i := range recorded.Nodes {
		old[recorded.Nodes[i].Name] = &recorded.Nodes[i]
	}
	// Each pass gives every node a state to reach, the state it is known
	// to hold (apply.Options.Prev: only the difference is applied) and
	// the state whose leftovers go (Options.Remove).
	type pass func(n, old *state.Node) (want state.Node, prev, remove *state.Node)
	mid := func(n, old *state.Node) *state.Node {
		x := *n
		x.Routes, x.Rules = old.Routes, old.Rules
		return &x
	}
	passes := []pass{
		func(n, old *state.Node) (state.Node, *state.Node, *state.Node) { return *mid(n, old), old, nil },
		func(n, old *state.Node) (state.Node, *state.Node, *state.Node) { return *n, mid(n, old), nil },
		func(n, old *state.Node) (state.Node, *state.Node, *state.Node) { return *n, n, old },
	}
	if full {
		passes = []pass{func(n, old *state.Node) (state.Node, *state.Node, *state.Node) { return *n, nil, old }}
	}
	changes := map[string]int{}
	touched := map[string]bool{}
	same := map[string]bool{} // nodes whose desired state did not change
	for i := range net.Nodes {
		n := &net.Nodes[i]
		// The compiler seals every node (state.Node.Digest): equal
		// digests are equal states, without comparing 10,000 routes.
		o := old[n.Name]
		same[n.Name] = !full && ((n.Digest != "" && n.Digest == o.Digest) || (n.Digest == "" && reflect.DeepEqual(n, o)))
		changes[n.Name] = 0
	}
	for _, pass := range passes {
		for i := range net.Nodes {
			n := &net.Nodes[i]
			if same[n.Name] {
				continue // nothing to do: not even read back
			}
			touched[n.Name] = true
			want, prev, remove := pass(n, old[n.Name])
			c, err := applyNode(ctx, rec, want, apply.Options{Prev: prev, Remove: remove}, opts.Options)
			if err != nil {
				err = errors.Join(err, restoreTouched(ctx, rec, old, net.Nodes, touched, opts.Options))
				return nil, fmt.Errorf("lab apply %s: %w", net.Name, err)
			}
			changes[n.Name] += c
		}
	}
	tApply := time.Since(t0) - tLoad
	rec.Network = net
	if opts.Source != "" {
		rec.Source = opts.Source
	}
	if err := writeRecord(opts.Options, rec); err != nil {
		return changes, fmt.Errorf("lab apply %s: nodes updated but the record was not: %w", net.Name, err)
	}
	opts.log().Debug("lab apply", "lab", net.Name, "load_record", tLoad, "diff_and_apply", tApply,
		"write_record", time.Since(t0)-tLoad-tApply)
	return changes, nil
}

// restoreTouched puts the touched nodes of a failed change back to
// their recorded state old (a full apply, removing what the new state
// in nodes added). The node that failed rolled itself back already.
func restoreTouched(ctx context.Context, rec *Record, old map[string]*state.Node, nodes []state.Node, touched map[string]bool, opts Options) error {
	var errs []error
	for _, m := range nodes {
		if !touched[m.Name] {
			continue
		}
		if _, err := applyNode(context.WithoutCancel(ctx), rec, *old[m.Name], apply.Options{Remove: &m}, opts); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// applyNode applies node in its namespace with ao (its Drivers and
// Logger come from opts).
func applyNode(ctx context.Context, rec *Record, node state.Node, ao apply.Options, opts Options) (int, error) {
	ns, err := openNode(rec, node.Name)
	if err != nil {
		return 0, err
	}
	defer ns.Close()
	ao.Drivers, ao.Logger = opts.Drivers, opts.Logger
	res, err := apply.ApplyWith(ctx, ns, node, ao)
	return res.Changes, err
}

// openNode opens the namespace of a node of a loaded record.
func openNode(rec *Record, node string) (*netns.NS, error) {
	name, ok := rec.Namespaces[node]
	if !ok {
		return nil, fmt.Errorf("open %s in lab %s: %w", node, rec.Name, ErrNoNode)
	}
	return netns.Open(name)
}

// sameTopology reports what differs between the nodes, links and
// interfaces of a and b.
func sameTopology(a, b *state.Network) error {
	if a.Name != b.Name {
		return fmt.Errorf("lab name %s is not %s: %w", b.Name, a.Name, ErrTopologyChanged)
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Errorf("%d nodes, the lab has %d: %w", len(b.Nodes), len(a.Nodes), ErrTopologyChanged)
	}
	for i := range a.Nodes {
		na, nb := &a.Nodes[i], &b.Nodes[i]
		if na.Name != nb.Name {
			return fmt.Errorf("node %s is not in the lab: %w", nb.Name, ErrTopologyChanged)
		}
		if !sameJSON(wires(na.Interfaces), wires(nb.Interfaces)) {
			return fmt.Errorf("interfaces of node %s changed: %w", nb.Name, ErrTopologyChanged)
		}
	}
	if !sameJSON(a.Links, b.Links) {
		return fmt.Errorf("links changed: %w", ErrTopologyChanged)
	}
	return nil
}

// wires is ifs without the offload settings apply changes on a running
// lab (for the peers of an XDP node, around an OPoT headend): what the
// lab built.
func wires(ifs []state.Interface) []state.Interface {
	out := slices.Clone(ifs)
	for i := range out {
		out[i].GRO, out[i].NoGRO, out[i].NoGSO, out[i].SoftwareChecksum = false, false, false, false
	}
	return out
}

// sameJSON compares two values as the record stores them (a record read
// back has empty slices where a compiled state may have nil ones).
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
