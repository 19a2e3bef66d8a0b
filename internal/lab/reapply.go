package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/srchain/srchain/internal/apply"
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
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	if rec.Network == nil {
		return nil, fmt.Errorf("reapply lab %s: record has no desired state", lab)
	}
	changes := map[string]int{}
	var errs []error
	for _, n := range rec.Network.Nodes {
		ns, err := Open(lab, n.Name, opts)
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
	if err := checkNotUp(opts.Options, net.Name); err != nil {
		return nil, err
	}
	rec, err := Load(net.Name, opts.Options)
	if err != nil {
		return nil, err
	}
	if rec.Network == nil {
		return nil, fmt.Errorf("lab apply %s: record has no desired state", net.Name)
	}
	if err := sameTopology(rec.Network, net); err != nil {
		return nil, fmt.Errorf("lab apply %s: %w (run `srchain lab down %s` and `lab up` to rebuild it)", net.Name, err, net.Name)
	}
	old := map[string]*state.Node{}
	for i := range rec.Network.Nodes {
		old[rec.Network.Nodes[i].Name] = &rec.Network.Nodes[i]
	}
	passes := []func(n, prev *state.Node) (state.Node, *state.Node){
		func(n, prev *state.Node) (state.Node, *state.Node) {
			x := *n
			x.Routes, x.Rules = prev.Routes, prev.Rules
			return x, nil
		},
		func(n, _ *state.Node) (state.Node, *state.Node) { return *n, nil },
		func(n, prev *state.Node) (state.Node, *state.Node) { return *n, prev },
	}
	changes := map[string]int{}
	touched := map[string]bool{}
	for _, pass := range passes {
		for i := range net.Nodes {
			n := &net.Nodes[i]
			want, prev := pass(n, old[n.Name])
			c, err := applyNode(ctx, rec, want, prev, opts.Options)
			if err != nil {
				// The failed node rolled itself back; put back the others.
				for _, m := range net.Nodes {
					if !touched[m.Name] {
						continue
					}
					if _, rerr := applyNode(context.WithoutCancel(ctx), rec, *old[m.Name], &m, opts.Options); rerr != nil {
						err = errors.Join(err, fmt.Errorf("restore %s: %w", m.Name, rerr))
					}
				}
				return nil, fmt.Errorf("lab apply %s: %w", net.Name, err)
			}
			changes[n.Name] += c
			touched[n.Name] = touched[n.Name] || c > 0
		}
	}
	rec.Network = net
	if opts.Source != "" {
		rec.Source = opts.Source
	}
	if err := writeRecord(opts.Options, rec); err != nil {
		return changes, fmt.Errorf("lab apply %s: nodes updated but the record was not: %w", net.Name, err)
	}
	return changes, nil
}

// applyNode applies node in its namespace, removing what prev had.
func applyNode(ctx context.Context, rec *Record, node state.Node, prev *state.Node, opts Options) (int, error) {
	name, ok := rec.Namespaces[node.Name]
	if !ok {
		return 0, fmt.Errorf("node %s: %w", node.Name, ErrNoNode)
	}
	ns, err := netns.Open(name)
	if err != nil {
		return 0, err
	}
	defer ns.Close()
	res, err := apply.ApplyWith(ctx, ns, node, apply.Options{Drivers: opts.Drivers, Logger: opts.Logger, Prev: prev})
	return res.Changes, err
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
		if !sameJSON(na.Interfaces, nb.Interfaces) {
			return fmt.Errorf("interfaces of node %s changed: %w", nb.Name, ErrTopologyChanged)
		}
	}
	if !sameJSON(a.Links, b.Links) {
		return fmt.Errorf("links changed: %w", ErrTopologyChanged)
	}
	return nil
}

// sameJSON compares two values as the record stores them (a record read
// back has empty slices where a compiled state may have nil ones).
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
