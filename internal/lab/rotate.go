package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/state"
)

// ErrAgentsLab: the lab's nodes are applied by agents from a controller
// (`lab up --agents`), so a change must go through the controller.
var ErrAgentsLab = errors.New("lab runs agents")

// RotateOPoT gives the OPoT chains named (every OPoT chain of the lab
// when none is) new keys without dropping a packet (docs/opot.md
// "Rotation"). The new profile goes to the slot the headend does not use,
// on every member node, which no packet in flight uses either; then each
// headend switches to that slot. Packets started with the old slot keep
// verifying: its keys stay installed until the next rotation replaces
// them, which must come after they drained (longer than the chain's
// largest delay). Each node gets only the difference (the changed
// secret, the headend's slot), so nothing else is touched; a fresh slot
// starts at sequence number 1 with an empty anti-replay window. The
// record is replaced once every node has applied; if one fails, the
// nodes are put back to the recorded state.
func RotateOPoT(ctx context.Context, lab string, chains []string, opts Options) ([]compile.OPoTRotation, error) {
	release, err := lockDir(opts)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := checkNotUp(opts, "lab rotate", lab); err != nil {
		return nil, err
	}
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	// A lab up with --agents takes its desired state from the controller:
	// keys written behind its back would be put back by the agents.
	if _, err := os.Stat(AgentsDir(opts, lab)); err == nil {
		return nil, fmt.Errorf("rotate opot keys in lab %s: %w: rotate through its controller (srchain rotate --server URL)", lab, ErrAgentsLab)
	}
	recorded, err := rec.desired()
	if err != nil {
		return nil, fmt.Errorf("rotate opot keys in lab %s: %w", lab, err)
	}
	keyed := *recorded
	keyed.Nodes = slices.Clone(recorded.Nodes)
	rs, err := compile.RotateOPoTKeys(&keyed, chains, nil)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", lab, err)
	}
	switched := keyed
	switched.Nodes = slices.Clone(keyed.Nodes)
	if err := compile.SwitchOPoTSlots(&switched, rs); err != nil {
		return nil, fmt.Errorf("lab %s: %w", lab, err)
	}
	// Two steps: every member's new keys, then the headends' switch.
	touched := map[string]bool{}
	steps := []struct{ from, to *state.Network }{{recorded, &keyed}, {&keyed, &switched}}
	for _, st := range steps {
		for i := range st.to.Nodes {
			n, prev := &st.to.Nodes[i], &st.from.Nodes[i]
			if n.Digest == prev.Digest {
				continue
			}
			touched[n.Name] = true
			if _, err := applyNode(ctx, rec, *n, apply.Options{Prev: prev}, opts); err != nil {
				old := map[string]*state.Node{}
				for j := range recorded.Nodes {
					old[recorded.Nodes[j].Name] = &recorded.Nodes[j]
				}
				err = errors.Join(err, restoreTouched(ctx, rec, old, switched.Nodes, touched, opts))
				return nil, fmt.Errorf("rotate opot keys in lab %s: %w", lab, err)
			}
		}
	}
	rec.Network = &switched
	if err := writeRecord(opts, rec); err != nil {
		return rs, fmt.Errorf("rotate opot keys in lab %s: nodes updated but the record was not: %w", lab, err)
	}
	return rs, nil
}
