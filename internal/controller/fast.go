package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/store"
)

// The fast path of a write that changes one chain (issue 12: one chain
// change in under 50 ms at 10,000 chains). A full write re-reads,
// re-validates and re-compiles the whole stored spec: O(chains). The
// controller keeps what its last write (or read) built, by spec revision,
// and a write that replaces one chain, appends one or removes the last
// one is validated and compiled alone (spec.ValidateChain,
// compile.ChainParts) and stores only that chain's parts and the bases of
// the nodes they are on. What the fast path cannot decide alone
// (spec.ErrNotAlone: pools, pathlets, compression, OPoT, an eBPF ingress,
// an NF kind that reads chains, a chain in the middle removed, a changed
// egress, ...) and any invalid chain go the full way, which also gives
// the reference error report. TestFastPathSameAsFull checks both ways
// give the same stored bytes.

// built is the last spec this controller stored or read, parsed, checked
// and compiled, at spec revision rev.
type built struct {
	rev   int64
	doc   *Doc
	spec  *spec.Spec
	plan  spec.SIDPlan
	nodes map[string]stored
	// splits: a chain of spec splits into pathlets (their binding SIDs
	// are allocated after every egress SID, so adding or removing a
	// chain moves them).
	splits bool
}

func newBuilt(rev int64, doc *Doc, s *spec.Spec, nodes map[string]stored) *built {
	if s == nil {
		return nil
	}
	return &built{rev: rev, doc: doc, spec: s, plan: s.SIDs(), nodes: nodes,
		splits: slices.ContainsFunc(s.Chains, func(c spec.Chain) bool { return c.Splits() })}
}

// errFull: the write goes the full way.
var errFull = errors.New("not a one-chain write")

// fast tries the write on c.last. errFull (or a wrapped spec.ErrNotAlone)
// means nothing was written and the full way must be taken.
func (c *Controller) fast(ctx context.Context, ifMatch int64, edit func(*Doc) error) (*Result, error) {
	b := c.last
	if b == nil || c.fastOff {
		return nil, errFull
	}
	bctx, cancel := c.st.Bound(ctx)
	resp, err := c.st.Client().Get(bctx, store.SpecKey, clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return nil, store.Failed(bctx, fmt.Errorf("read spec revision: %w", err))
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != b.rev {
		c.last = nil // another writer: read it all again
		return nil, errFull
	}
	if ifMatch > 0 && ifMatch != b.rev {
		return nil, fmt.Errorf("%w: client has %d, spec is at %d", ErrStale, ifMatch, b.rev)
	}
	doc := b.doc.clone()
	if err := edit(doc); err != nil {
		return nil, err
	}
	i, op := oneChain(b.doc, doc)
	if op == "" {
		return nil, errFull
	}
	s, plan, err := b.change(doc, i, op)
	if err != nil {
		return nil, err
	}
	var name string
	if op == opAppend {
		name = s.Chains[i].Name
	} else {
		name = b.spec.Chains[i].Name
	}
	w := store.Write{Put: map[string]store.NodeWrite{}}
	res := &Result{Changed: []string{}, Removed: []string{}}
	newParts := map[string][]byte{}
	if op != opRemove {
		parts, err := compile.ChainParts(s, plan, i)
		if err != nil {
			return nil, err
		}
		for node, p := range parts {
			if newParts[node], err = json.Marshal(p); err != nil {
				return nil, fmt.Errorf("encode state of %s, chain %s: %w", node, name, err)
			}
		}
	}
	for node, st := range b.nodes {
		old, had := st.parts[name]
		nb, has := newParts[node]
		if had == has && string(old) == string(nb) {
			continue
		}
		w.Put[node] = store.NodeWrite{State: st.base, Parts: map[string][]byte{name: nb}} // nil deletes
		res.Changed = append(res.Changed, node)
	}
	for node := range newParts {
		if _, ok := b.nodes[node]; !ok {
			return nil, fmt.Errorf("chain %s on node %s, which has no state: %w", name, node, errFull)
		}
	}
	if w.Spec, err = doc.encodeHead(); err != nil {
		return nil, err
	}
	if op == opRemove {
		w.Chains = map[int][]byte{i: nil}
	} else {
		w.Chains = map[int][]byte{i: doc.Chains[i]}
	}
	rev, err := c.st.Commit(ctx, b.rev, w)
	if errors.Is(err, store.ErrConflict) {
		c.last = nil
		if ifMatch > 0 {
			return nil, fmt.Errorf("%w: changed while this write was built", ErrStale)
		}
		return nil, errFull
	}
	if err != nil {
		return nil, err
	}
	// Stored: b becomes the new build, its node parts changed in place
	// (only this write, under c.mu, uses it).
	for node, nw := range w.Put {
		st := b.nodes[node]
		if nb := nw.Parts[name]; nb == nil {
			delete(st.parts, name)
		} else if st.parts == nil {
			st.parts = map[string][]byte{name: nb}
		} else {
			st.parts[name] = nb
		}
		b.nodes[node] = st
	}
	slices.Sort(res.Changed)
	res.Revision = rev
	c.last = &built{rev: rev, doc: doc, spec: s, plan: plan, nodes: b.nodes, splits: b.splits}
	c.fastWrites++
	return res, nil
}

// One-chain operations.
const (
	opReplace = "replace"
	opAppend  = "append"
	opRemove  = "remove" // the last chain
)

// oneChain finds the one chain change from old to doc: chain i replaced,
// appended (i = its position) or the last one removed; op "" for any
// other change (a chain in the middle removed renumbers every chain after
// it: their tables and rule priorities move).
func oneChain(old, doc *Doc) (int, string) {
	if doc.Name != old.Name || doc.Routing != old.Routing || string(doc.SIDFormat) != string(old.SIDFormat) ||
		!sameRaw(doc.Nodes, old.Nodes) || !sameRaw(doc.Links, old.Links) || !sameRaw(doc.NFs, old.NFs) || !sameRaw(doc.Pools, old.Pools) {
		return 0, ""
	}
	n, m := len(old.Chains), len(doc.Chains)
	switch {
	case m == n+1 && sameRaw(doc.Chains[:n], old.Chains):
		return n, opAppend
	case m == n-1 && n > 0 && sameRaw(doc.Chains, old.Chains[:m]):
		return m, opRemove
	case m != n:
		return 0, ""
	}
	i := -1
	for k := range doc.Chains {
		if string(doc.Chains[k]) != string(old.Chains[k]) {
			if i >= 0 {
				return 0, ""
			}
			i = k
		}
	}
	if i < 0 {
		return 0, ""
	}
	return i, opReplace
}

func sameRaw(a, b []json.RawMessage) bool {
	return slices.EqualFunc(a, b, func(x, y json.RawMessage) bool { return string(x) == string(y) })
}

// change is b's spec with doc's chain change applied, checked alone, and
// its SID plan.
func (b *built) change(doc *Doc, i int, op string) (*spec.Spec, spec.SIDPlan, error) {
	chains := slices.Clone(b.spec.Chains)
	if op != opAppend {
		if err := b.spec.ChainAlone(&chains[i]); err != nil {
			return nil, spec.SIDPlan{}, err
		}
	}
	if op == opRemove {
		if b.splits {
			return nil, spec.SIDPlan{}, errFull
		}
		s := b.spec.WithChains(chains[:i])
		return s, s.SIDs(), nil
	}
	c, err := spec.ParseChain(doc.Chains[i])
	if err != nil {
		return nil, spec.SIDPlan{}, fmt.Errorf("%w: %v", errFull, err)
	}
	plan := b.plan
	if op == opAppend {
		if b.splits {
			return nil, spec.SIDPlan{}, errFull
		}
		chains = append(chains, c)
	} else {
		old := &chains[i]
		if old.Name != c.Name || old.Mode != c.Mode || old.Egress != c.Egress || c.EgressSID.IsValid() {
			return nil, spec.SIDPlan{}, errFull // the SID plan would move
		}
		chains[i] = c
	}
	s := b.spec.WithChains(chains)
	if op == opAppend {
		plan = s.SIDs()
	}
	if err := s.ValidateChain(i, plan); err != nil {
		return nil, spec.SIDPlan{}, fmt.Errorf("%w: %v", errFull, err)
	}
	return s, plan, nil
}
