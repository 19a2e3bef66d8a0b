// Package controller is srchain's controller: a northbound REST API
// (/v1, JSON, docs/controller.md, api/openapi.json) through which an
// orchestrator submits topology, NFs and chains (seed 004's northbound
// interface), validated exactly as a YAML spec is, compiled with the same
// compiler, and stored as per-node desired state in etcd (internal/store)
// for the agents to watch.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/compile"
	_ "github.com/srchain/srchain/internal/kinds/all" // every NF kind
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// Errors handlers branch on.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	// ErrStale: the client's If-Match revision is no longer the spec's.
	ErrStale = errors.New("spec revision is stale")
)

// maxRetries bounds how often a write is rebuilt after losing a race
// with another controller sharing the etcd cluster.
const maxRetries = 100

// Controller turns spec changes into stored desired state.
type Controller struct {
	st *store.Store
	// mu serialises this process's writes so that they do not make each
	// other retry; writers in other processes are serialised by the
	// transaction in store.Commit.
	mu sync.Mutex
	// last is what the last write built (fast.go); nil when unknown.
	last *built
	// fastWrites counts the writes that took the fast path, fastOff
	// turns it off (tests).
	fastWrites int
	fastOff    bool
}

// New returns a controller on an open store.
func New(st *store.Store) *Controller { return &Controller{st: st} }

// Problem is one reason a spec was refused, located by its field path in
// the spec document (e.g. chains[3].nfs[0]) and the object it falls in.
type Problem struct {
	Path string `json:"path,omitempty"`
	// Object is KIND/ID, e.g. chains/web, when the path is inside one.
	Object  string `json:"object,omitempty"`
	Message string `json:"message"`
}

// InvalidError is a write that would make the spec invalid; nothing was
// stored.
type InvalidError struct{ Problems []Problem }

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
		if p.Path != "" {
			msgs[i] = p.Path + ": " + p.Message
		}
	}
	return "invalid spec: " + strings.Join(msgs, "; ")
}

// Result is what a successful write did.
type Result struct {
	// Revision is the spec's new revision (its ETag).
	Revision int64 `json:"revision"`
	// Changed lists nodes whose desired state (and generation) changed,
	// Removed nodes whose desired state was deleted.
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
}

// Spec returns the stored spec and its revision.
func (c *Controller) Spec(ctx context.Context) (*Doc, int64, error) {
	snap, err := c.st.Read(ctx)
	if err != nil {
		return nil, 0, err
	}
	d, err := decodeStored(snap.Spec, snap.Chains)
	return d, snap.SpecRevision, err
}

// Update applies edit to the current spec, validates and compiles the
// result, and stores it with the changed node states in one transaction.
// ifMatch > 0 requires the spec to still be at that revision (ErrStale
// otherwise); without it a write that lost a race is rebuilt on the
// newer spec.
func (c *Controller) Update(ctx context.Context, ifMatch int64, edit func(*Doc) error) (*Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res, err := c.fast(ctx, ifMatch, edit)
	if !errors.Is(err, errFull) && !errors.Is(err, spec.ErrNotAlone) {
		return res, err
	}
	slog.Debug("write takes the full way", "why", err)
	for range maxRetries {
		c.last = nil
		snap, err := c.st.Read(ctx)
		if err != nil {
			return nil, err
		}
		if ifMatch > 0 && snap.SpecRevision != ifMatch {
			return nil, fmt.Errorf("%w: client has %d, spec is at %d", ErrStale, ifMatch, snap.SpecRevision)
		}
		doc, err := decodeStored(snap.Spec, snap.Chains)
		if err != nil {
			return nil, err
		}
		if err := edit(doc); err != nil {
			return nil, err
		}
		specBytes, err := doc.encode()
		if err != nil {
			return nil, err
		}
		states, s, err := build(doc, specBytes, snap)
		if err != nil {
			return nil, err
		}
		w, res := diff(snap, states)
		if w.Spec, err = doc.encodeHead(); err != nil {
			return nil, err
		}
		w.Chains = chainWrites(snap.Chains, doc.Chains)
		rev, err := c.st.Commit(ctx, snap.SpecRevision, w)
		if errors.Is(err, store.ErrConflict) {
			if ifMatch > 0 {
				return nil, fmt.Errorf("%w: changed while this write was built", ErrStale)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Revision = rev
		c.last = newBuilt(rev, doc, s, states)
		return res, nil
	}
	return nil, fmt.Errorf("store spec: %d attempts lost a race: %w", maxRetries, store.ErrConflict)
}

// stored is one node's desired state in its stored form (internal/store):
// the base and the parts by chain name.
type stored struct {
	base  []byte
	parts map[string][]byte
}

// build validates the spec and compiles it to the stored form of every
// node's desired state: a state.Network holding that node's base and its
// links, so that an agent checks the format version as every consumer
// does, and the node's parts. OPoT chains whose nodes did not change keep
// the keys stored in prev (every compile draws new ones;
// compile.KeepOPoTKeys): a write that does not touch a chain's proof does
// not change its keys under packets in flight, nor its nodes' desired
// states.
func build(doc *Doc, specBytes []byte, prev *store.Snapshot) (map[string]stored, *spec.Spec, error) {
	out := map[string]stored{}
	if doc.empty() {
		return out, nil, nil
	}
	s, err := spec.Check(specBytes, "")
	if err != nil {
		return nil, nil, invalid(doc, err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		return nil, nil, &InvalidError{Problems: []Problem{{Message: clipText(err.Error())}}}
	}
	// Reading the stored states back costs as much as compiling (44 ms
	// at 10,000 chains): only when there are keys to keep.
	if hasOPoT(net) {
		if old := prevNetwork(prev); old != nil {
			if _, err := compile.KeepOPoTKeys(net, old); err != nil {
				return nil, nil, fmt.Errorf("keep opot keys: %w", err)
			}
		}
	}
	for _, n := range net.Nodes {
		st, err := encodeNode(net, n)
		if err != nil {
			return nil, nil, err
		}
		out[n.Name] = st
	}
	return out, s, nil
}

// encodeNode is node n of net in its stored form. The digest is left out:
// the node's generation identifies its state in the store, and sealing
// would cost an encoding of the whole node at every change.
func encodeNode(net *state.Network, n state.Node) (stored, error) {
	n.Digest = ""
	base, parts := state.Split(n)
	one := state.Network{Version: net.Version, Name: net.Name, Nodes: []state.Node{base}, Links: []state.Link{}}
	for _, l := range net.Links {
		if l.A.Node == n.Name || l.B.Node == n.Name {
			one.Links = append(one.Links, l)
		}
	}
	b, err := json.Marshal(one)
	if err != nil {
		return stored{}, fmt.Errorf("encode state of %s: %w", n.Name, err)
	}
	st := stored{base: b, parts: make(map[string][]byte, len(parts))}
	for chain, p := range parts {
		if st.parts[chain], err = json.Marshal(p); err != nil {
			return stored{}, fmt.Errorf("encode state of %s, chain %s: %w", n.Name, chain, err)
		}
	}
	return st, nil
}

// hasOPoT reports whether a node of net runs an OPoT program.
func hasOPoT(net *state.Network) bool {
	for _, n := range net.Nodes {
		for _, p := range n.Programs {
			if p.Kind == state.ProgramOPoT {
				return true
			}
		}
	}
	return false
}

// prevNetwork rebuilds the stored desired state of every node of snap as
// one network (nil when there is none, or a stored state is unreadable:
// then nothing is kept, which is always safe).
func prevNetwork(snap *store.Snapshot) *state.Network {
	if snap == nil || len(snap.Desired) == 0 {
		return nil
	}
	var net *state.Network
	for _, d := range snap.Desired {
		one, err := state.DecodeStored(d.State, d.Parts)
		if err != nil {
			return nil
		}
		if net == nil {
			net = &state.Network{Version: one.Version, Name: one.Name}
		}
		net.Nodes = append(net.Nodes, one.Nodes...)
	}
	return net
}

// maxProblems caps the problems of one answer; the rest are counted in
// a last problem. A body of 40,000 bad entries gets an answer of a few
// kilobytes, not one the size of the body times the problems (issue 38,
// item 7).
const maxProblems = 100

// maxMessage caps a problem's message and path in bytes.
const maxMessage = 512

// invalid turns spec errors into Problems, at most maxProblems and each
// clipped. Line and column are dropped: they point into the controller's
// JSON document, not the client's. Each object is decoded at most once
// for its id (objectIDs), so the work is linear in the body, not in the
// body times the problems (issue 38, item 6).
func invalid(doc *Doc, err error) error {
	fes := spec.FieldErrors(err)
	if len(fes) == 0 {
		return &InvalidError{Problems: []Problem{{Message: clipText(err.Error())}}}
	}
	ids := objectIDs{doc: doc}
	n := min(len(fes), maxProblems)
	ps := make([]Problem, 0, n+1)
	for _, fe := range fes[:n] {
		ps = append(ps, Problem{Path: clipText(fe.Path), Object: ids.of(fe.Path), Message: clipText(fe.Msg)})
	}
	if more := len(fes) - n; more > 0 {
		ps = append(ps, Problem{Message: fmt.Sprintf("and %d more problems", more)})
	}
	return &InvalidError{Problems: ps}
}

// clipText cuts s to maxMessage bytes (at a rune boundary) and says how
// long it was.
func clipText(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// objectIDs maps field paths to the objects they fall in, decoding each
// object once.
type objectIDs struct {
	doc *Doc
	ids map[string]map[int]string // kind -> position -> "kind/ID" ("" if none)
}

// idDecodes counts the objects objectIDs decoded (tests check the work
// is linear).
var idDecodes atomic.Int64

// of maps "chains[3].nfs[0]" to "chains/ID" of the fourth chain, the ID
// clipped as spec.Clip does (unquoted).
func (o *objectIDs) of(path string) string {
	kind, rest, ok := strings.Cut(path, "[")
	if !ok || o.doc.list(kind) == nil {
		return ""
	}
	num, _, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || i < 0 || i >= len(*o.doc.list(kind)) {
		return ""
	}
	if o.ids == nil {
		o.ids = map[string]map[int]string{}
	}
	if o.ids[kind] == nil {
		o.ids[kind] = map[int]string{}
	}
	if id, ok := o.ids[kind][i]; ok {
		return id
	}
	idDecodes.Add(1)
	id, err := objectID(kind, (*o.doc.list(kind))[i])
	obj := ""
	if err == nil {
		if len(id) > maxEcho {
			id = fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(id[:maxEcho], ""), len(id))
		}
		obj = kind + "/" + id
	}
	o.ids[kind][i] = obj
	return obj
}

// maxEcho is how much of an object's id a problem repeats.
const maxEcho = 64

// diff lists the node states whose bytes changed and the nodes that left.
// A node that changed at all gets its base written (its generation) and
// the parts that differ.
func diff(snap *store.Snapshot, states map[string]stored) (store.Write, *Result) {
	w := store.Write{Put: map[string]store.NodeWrite{}}
	res := &Result{Changed: []string{}, Removed: []string{}}
	for node, st := range states {
		old, had := snap.Desired[node]
		nw := store.NodeWrite{State: st.base, Parts: map[string][]byte{}}
		for chain, b := range st.parts {
			if ob, ok := old.Parts[chain]; !ok || string(ob) != string(b) {
				nw.Parts[chain] = b
			}
		}
		for chain := range old.Parts {
			if _, ok := st.parts[chain]; !ok {
				nw.Parts[chain] = nil
			}
		}
		if !had || string(old.State) != string(st.base) || len(nw.Parts) > 0 {
			w.Put[node] = nw
			res.Changed = append(res.Changed, node)
		}
	}
	for node := range snap.Desired {
		if _, ok := states[node]; !ok {
			w.Removed = append(w.Removed, node)
			res.Removed = append(res.Removed, node)
		}
	}
	slices.Sort(res.Changed)
	slices.Sort(res.Removed)
	slices.Sort(w.Removed)
	return w, res
}

// chainWrites are the chain keys to write for chains when old are stored:
// those that differ or are new, and deletions past the end.
func chainWrites(old [][]byte, chains []json.RawMessage) map[int][]byte {
	w := map[int][]byte{}
	for i, c := range chains {
		if i >= len(old) || string(old[i]) != string(c) {
			w[i] = c
		}
	}
	for i := len(chains); i < len(old); i++ {
		w[i] = nil
	}
	return w
}

// NodeState is a node's desired state as the API shows it.
type NodeState struct {
	Node       string `json:"node"`
	Generation int64  `json:"generation"`
	// State is a state.Network with this node and its links; secrets
	// (OPoT key material) are redacted: only the node's agent reads them,
	// from etcd.
	State *state.Network `json:"state"`
}

// Desired returns node's desired state, secrets redacted.
func (c *Controller) Desired(ctx context.Context, node string) (*NodeState, error) {
	d, ok, _, err := c.st.Node(ctx, node)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("node %s: %w", node, ErrNotFound)
	}
	net, err := state.DecodeStored(d.State, d.Parts)
	if err != nil {
		return nil, fmt.Errorf("state of %s: %w", node, err)
	}
	return &NodeState{Node: node, Generation: d.Generation, State: net.Redacted()}, nil
}

// Status is what the controller knows about a node's agent.
type Status struct {
	Node              string `json:"node"`
	DesiredGeneration int64  `json:"desired_generation"`
	// AppliedGeneration is the generation the agent last applied (null:
	// no agent up, or none applied yet).
	AppliedGeneration *int64 `json:"applied_generation"`
	// InSync: an agent is up and applied the desired generation.
	InSync bool `json:"in_sync"`
	// Agent is "up" (its status is there, kept alive by its lease),
	// "down" (an agent registered for the node but its lease expired)
	// or "unknown" (no agent ever registered).
	Agent string `json:"agent"`
	// LastError and Drift are the agent's (see Report).
	LastError string   `json:"last_error,omitempty"`
	Drift     []string `json:"drift,omitempty"`
	// Report is the agent's status document as written
	// (internal/agent.Status), when it is up.
	Report json.RawMessage `json:"report,omitempty"`
	// ReportError says why the agent's status document could not be
	// read (not JSON: an agent of another version, or a key written by
	// hand); Report is then left out and InSync is false.
	ReportError string `json:"report_error,omitempty"`
}

// Agent states of Status.Agent.
const (
	AgentUp      = "up"
	AgentDown    = "down"
	AgentUnknown = "unknown"
)

// NodeStatus reads node's status: its desired generation, and its agent's
// report (under the agent's lease) and registration in one read.
func (c *Controller) NodeStatus(ctx context.Context, node string) (*Status, error) {
	bctx, cancel := c.st.Bound(ctx)
	defer cancel()
	resp, err := c.st.Client().Txn(bctx).Then(
		clientv3.OpGet(store.DesiredKey(node)),
		clientv3.OpGet(store.StatusKey(node)),
		clientv3.OpGet(store.AgentKey(node), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return nil, store.Failed(bctx, fmt.Errorf("read status of %s: %w", node, err))
	}
	desired := resp.Responses[0].GetResponseRange().Kvs
	if len(desired) != 1 {
		return nil, fmt.Errorf("node %s: %w", node, ErrNotFound)
	}
	st := &Status{Node: node, DesiredGeneration: desired[0].ModRevision, Agent: AgentUnknown}
	if resp.Responses[2].GetResponseRange().Count > 0 {
		st.Agent = AgentDown
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		var r struct {
			AppliedGeneration *int64   `json:"applied_generation"`
			LastError         string   `json:"last_error"`
			Drift             []string `json:"drift"`
		}
		// An unreadable report is the agent's problem, told in the
		// answer (200): not the controller's (it answered 500 because
		// the raw bytes were embedded as a json.RawMessage).
		st.Agent = AgentUp
		if err := json.Unmarshal(kvs[0].Value, &r); err != nil {
			st.ReportError = clipText("unreadable agent status: " + err.Error())
		} else {
			st.AppliedGeneration, st.LastError, st.Drift = r.AppliedGeneration, r.LastError, r.Drift
			st.Report = kvs[0].Value
		}
		st.InSync = st.AppliedGeneration != nil && *st.AppliedGeneration == st.DesiredGeneration
	}
	return st, nil
}
