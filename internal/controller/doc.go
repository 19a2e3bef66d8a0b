package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Kinds of objects the API manages, named as the spec's top-level lists.
const (
	KindNodes  = "nodes"
	KindLinks  = "links"
	KindNFs    = "nfs"
	KindChains = "chains"
)

// Kinds in spec order.
var Kinds = []string{KindNodes, KindLinks, KindNFs, KindChains}

// Doc is the stored spec: the YAML spec's fields as JSON (JSON is YAML,
// so internal/spec decodes and validates it as it does a file). Objects
// are kept as the client sent them, in the order they arrived: the
// compiler numbers chains by position, so an append changes no other
// chain's tables. Lab traffic (probes) is not the controller's business.
type Doc struct {
	Name      string            `json:"name,omitempty"`
	SIDFormat json.RawMessage   `json:"sid_format,omitempty"`
	Routing   string            `json:"routing,omitempty"`
	Nodes     []json.RawMessage `json:"nodes"`
	Links     []json.RawMessage `json:"links"`
	NFs       []json.RawMessage `json:"nfs"`
	// Pools are kept as given (PUT /v1/spec); no route manages them
	// one by one yet.
	Pools  []json.RawMessage `json:"pools,omitempty"`
	Chains []json.RawMessage `json:"chains"`

	// ids indexes each kind's objects by id (find), built on first use.
	// Its maps are never changed in place, so clones share them.
	ids map[string]map[string]int
}

// clone is a copy of d whose lists can be edited without changing d's.
func (d *Doc) clone() *Doc {
	c := *d
	for _, k := range Kinds {
		*c.list(k) = slices.Clone(*d.list(k))
	}
	c.Pools = slices.Clone(d.Pools)
	c.ids = maps.Clone(d.ids)
	return &c
}

// list returns the slice of one kind.
func (d *Doc) list(kind string) *[]json.RawMessage {
	switch kind {
	case KindNodes:
		return &d.Nodes
	case KindLinks:
		return &d.Links
	case KindNFs:
		return &d.NFs
	case KindChains:
		return &d.Chains
	}
	return nil
}

// empty reports whether the spec holds no object (a fresh controller, or
// everything deleted): valid by definition, nothing to compile.
func (d *Doc) empty() bool {
	return len(d.Nodes)+len(d.Links)+len(d.NFs)+len(d.Chains) == 0
}

// decodeStored is the spec stored as head and chains (store.Snapshot).
// A head written by a build that kept the chains in the document has them
// and no chain keys.
func decodeStored(head []byte, chains [][]byte) (*Doc, error) {
	d, err := decodeDoc(head)
	if err != nil || chains == nil {
		return d, err
	}
	d.Chains = make([]json.RawMessage, len(chains))
	for i, c := range chains {
		d.Chains[i] = c
	}
	return d, nil
}

func decodeDoc(b []byte) (*Doc, error) {
	d := &Doc{}
	if len(b) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("decode stored spec: %w", err)
	}
	return d, nil
}

// encode is the whole document: what json.Marshal gives, written by
// hand because json.Marshal compacts every object again (16 ms for a spec
// of 10,000 chains, at every full write and GET /v1/spec). The objects of the lists are kept in
// that form from the start (canonical), so they are copied as they are.
func (d *Doc) encode() ([]byte, error) { return d.encodeWith(d.Chains) }

// encodeHead is d as stored in the spec key: without its chains, which
// are stored one per key (store.SpecChainKey).
func (d *Doc) encodeHead() ([]byte, error) { return d.encodeWith(nil) }

func (d *Doc) encodeWith(chains []json.RawMessage) ([]byte, error) {
	buf := []byte{'{'}
	field := func(key string, v []byte) {
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(append(append(buf, '"'), key...), `":`...)
		buf = append(buf, v...)
	}
	value := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode spec: %w", err)
		}
		field(key, b)
		return nil
	}
	list := func(key string, l []json.RawMessage) {
		field(key, nil)
		buf = append(buf, '[')
		for i, raw := range l {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, raw...)
		}
		buf = append(buf, ']')
	}
	if d.Name != "" {
		if err := value("name", d.Name); err != nil {
			return nil, err
		}
	}
	if len(d.SIDFormat) > 0 {
		if err := value("sid_format", d.SIDFormat); err != nil {
			return nil, err
		}
	}
	if d.Routing != "" {
		if err := value("routing", d.Routing); err != nil {
			return nil, err
		}
	}
	list("nodes", d.Nodes)
	list("links", d.Links)
	list("nfs", d.NFs)
	if len(d.Pools) > 0 {
		if err := value("pools", d.Pools); err != nil {
			return nil, err
		}
	}
	list("chains", chains)
	return append(buf, '}'), nil
}

// find returns the index of the object with that id, or -1.
func (d *Doc) find(kind, id string) int {
	if d.ids == nil {
		d.ids = map[string]map[string]int{}
	}
	m, ok := d.ids[kind]
	if !ok {
		m = d.index(kind)
		d.ids[kind] = m
	}
	if i, ok := m[id]; ok {
		return i
	}
	return -1
}

// index maps the ids of one kind to their positions (the first, for an
// id given twice).
func (d *Doc) index(kind string) map[string]int {
	m := map[string]int{}
	for i, raw := range *d.list(kind) {
		if id, err := objectID(kind, raw); err == nil {
			if _, dup := m[id]; !dup {
				m[id] = i
			}
		}
	}
	return m
}

// upsert replaces the object with the same id in place, or appends it.
// It reports whether the object is new.
func (d *Doc) upsert(kind, id string, raw json.RawMessage) bool {
	l := d.list(kind)
	if i := d.find(kind, id); i >= 0 {
		(*l)[i] = raw
		return false
	}
	*l = append(*l, raw)
	m := maps.Clone(d.ids[kind])
	m[id] = len(*l) - 1
	d.ids[kind] = m
	return true
}

// remove deletes the object at position i of kind.
func (d *Doc) remove(kind string, i int) {
	l := d.list(kind)
	*l = append((*l)[:i:i], (*l)[i+1:]...)
	delete(d.ids, kind)
}

// errBadObject: the body is not a JSON object or has no usable id.
var errBadObject = errors.New("bad object")

// objectID is an object's name; a link without a name is known by its
// endpoints, "NODE:IF,NODE:IF" in the order given (docs/controller.md).
func objectID(kind string, raw json.RawMessage) (string, error) {
	var o struct {
		Name      string `json:"name"`
		Endpoints []struct {
			Node      string `json:"node"`
			Interface string `json:"interface"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("%w: %v", errBadObject, err)
	}
	if o.Name != "" || kind != KindLinks {
		if o.Name == "" {
			return "", fmt.Errorf("%w: name is required", errBadObject)
		}
		return o.Name, nil
	}
	if len(o.Endpoints) != 2 {
		return "", fmt.Errorf("%w: a link needs a name or two endpoints", errBadObject)
	}
	e := o.Endpoints
	return e[0].Node + ":" + e[0].Interface + "," + e[1].Node + ":" + e[1].Interface, nil
}

// compactObject checks that b is one JSON object and returns it in the
// form json.Marshal gives a json.RawMessage (compacted, HTML characters
// escaped), which Doc.encode relies on.
func compactObject(b []byte) (json.RawMessage, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: the body must be a JSON object", errBadObject)
	}
	out, err := json.Marshal(json.RawMessage(b))
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u // the syntax error, not the marshaler's wrapping
		}
		return nil, fmt.Errorf("%w: %v", errBadObject, err)
	}
	return out, nil
}

// withName returns raw with "name" set to name when it has none, so that
// PUT /v1/chains/web needs no name in its body.
func withName(raw json.RawMessage, name string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadObject, err)
	}
	if _, ok := m["name"]; ok {
		return raw, nil
	}
	m["name"], _ = json.Marshal(name)
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadObject, err)
	}
	return b, nil
}
