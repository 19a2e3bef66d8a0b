package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// ErrNotApplied: a rotation's member nodes did not all apply their new
// keys in time, so the headends were not switched.
var ErrNotApplied = errors.New("not applied in time")

// Rotation is one chain's key rotation (compile.OPoTRotation).
type Rotation struct {
	Chain   string   `json:"chain"`
	Slot    uint8    `json:"slot"`
	Headend string   `json:"headend"`
	Nodes   []string `json:"nodes"`
}

// RotateResult is what RotateOPoT did: the rotations, and the spec
// revisions of its two writes (keys, then the headends' switch).
type RotateResult struct {
	Rotations []Rotation `json:"rotations"`
	Keys      int64      `json:"keys_revision"`
	Switch    int64      `json:"switch_revision"`
}

// DefaultRotateWait bounds how long RotateOPoT waits for the agents.
const DefaultRotateWait = time.Minute

// rotatePoll is how often RotateOPoT reads the agents' status.
const rotatePoll = 100 * time.Millisecond

// RotateOPoT gives the OPoT chains named (all when none is) new keys
// through the agents, without dropping a packet (docs/opot.md
// "Rotation"; lab.RotateOPoT is the lab's twin): first the new profile
// goes to the free slot of every member node's desired state; once every
// member's agent has applied that generation (within wait), the headends
// switch to it in a second write. If an agent does not report in time,
// the first write stays (keys in a slot no packet uses: harmless) and
// ErrNotApplied says which nodes lag; running the rotation again draws
// new keys for the same slot. Other writes wait meanwhile (the
// controller's lock), so nothing comes between the two steps.
func (c *Controller) RotateOPoT(ctx context.Context, chains []string, wait time.Duration) (*RotateResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = nil // the fast path's build would hold the old keys
	snap, err := c.st.Read(ctx)
	if err != nil {
		return nil, err
	}
	net := prevNetwork(snap)
	if net == nil {
		return nil, fmt.Errorf("rotate opot keys: %w: no desired state stored", ErrNotFound)
	}
	keyed := *net
	keyed.Nodes = slices.Clone(net.Nodes)
	rs, err := compile.RotateOPoTKeys(&keyed, chains, nil)
	if errors.Is(err, compile.ErrNoOPoTChain) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	res := &RotateResult{}
	members := map[string]bool{}
	for _, r := range rs {
		res.Rotations = append(res.Rotations, Rotation{Chain: r.Chain, Slot: r.Slot, Headend: r.Headend, Nodes: r.Nodes})
		for _, n := range r.Nodes {
			members[n] = true
		}
	}
	if res.Keys, err = c.commitNodes(ctx, snap, &keyed); err != nil {
		return nil, fmt.Errorf("rotate opot keys: %w", err)
	}
	if err := c.waitApplied(ctx, slices.Sorted(maps.Keys(members)), res.Keys, wait); err != nil {
		return res, fmt.Errorf("rotate opot keys: new keys stored (revision %d), headends not switched: %w", res.Keys, err)
	}
	switched := keyed
	switched.Nodes = slices.Clone(keyed.Nodes)
	if err := compile.SwitchOPoTSlots(&switched, rs); err != nil {
		return res, err
	}
	snap, err = c.st.Read(ctx)
	if err != nil {
		return res, err
	}
	if res.Switch, err = c.commitNodes(ctx, snap, &switched); err != nil {
		return res, fmt.Errorf("rotate opot keys: new keys applied, headends not switched: %w", err)
	}
	return res, nil
}

// commitNodes stores the desired states of net's nodes that differ from
// snap's, with the spec as it is, and returns the new revision. Each
// node is encoded with the links stored with it (net has none).
func (c *Controller) commitNodes(ctx context.Context, snap *store.Snapshot, net *state.Network) (int64, error) {
	states := map[string]stored{}
	for _, n := range net.Nodes {
		d, ok := snap.Desired[n.Name]
		if !ok {
			return 0, fmt.Errorf("node %s: %w", n.Name, ErrNotFound)
		}
		one, err := state.DecodeStored(d.State, d.Parts)
		if err != nil {
			return 0, err
		}
		if states[n.Name], err = encodeNode(one, n); err != nil {
			return 0, err
		}
	}
	w, _ := diff(snap, states)
	w.Spec = snap.Spec
	rev, err := c.st.Commit(ctx, snap.SpecRevision, w)
	if errors.Is(err, store.ErrConflict) {
		return 0, fmt.Errorf("%w: the spec changed meanwhile", ErrStale)
	}
	return rev, err
}

// waitApplied waits until the agent of every node reports a generation
// at or after gen.
func (c *Controller) waitApplied(ctx context.Context, nodes []string, gen int64, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		var lag []string
		for _, n := range nodes {
			st, err := c.NodeStatus(ctx, n)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if st == nil || st.AppliedGeneration == nil || *st.AppliedGeneration < gen {
				lag = append(lag, n)
			}
		}
		if len(lag) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: nodes %v have not applied generation %d within %v", ErrNotApplied, lag, gen, wait)
		case <-time.After(rotatePoll):
		}
	}
}

// rotateRequest is the body of POST /v1/opot/rotate.
type rotateRequest struct {
	Chains      []string `json:"chains"`
	WaitSeconds float64  `json:"wait_seconds"`
}

func (c *Controller) postRotate(w http.ResponseWriter, r *http.Request) {
	var req rotateRequest
	b, err := readBody(w, r)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		err = checkJSON(b) // one object: `null` or `{}x` are not "rotate all"
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	if len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			fail(w, r, fmt.Errorf("%w: %v", errBadObject, err))
			return
		}
	}
	wait := DefaultRotateWait
	if req.WaitSeconds < 0 || req.WaitSeconds > 600 {
		fail(w, r, fmt.Errorf("%w: wait_seconds %v: want 0..600", errBadObject, req.WaitSeconds))
		return
	}
	if req.WaitSeconds > 0 {
		wait = time.Duration(req.WaitSeconds * float64(time.Second))
	}
	res, err := c.RotateOPoT(r.Context(), req.Chains, wait)
	if errors.Is(err, ErrNotApplied) {
		writeJSON(w, http.StatusGatewayTimeout, errorBody{Error: err.Error()})
		return
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	setETag(w, res.Switch)
	writeJSON(w, http.StatusOK, res)
}
