package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/srchain/srchain/internal/state"
)

// The agent keeps two files per node (Config.StateFile):
//
//   - the state file, NODE.json: the last desired state applied in full,
//     as stored in etcd (base and parts);
//   - the intent file, NODE.json.intent: written, durably, BEFORE an
//     apply starts and removed once it ended and the state file names its
//     result. It lists what the apply may put on the node beyond the
//     state file: the new base and the new parts of the chains it changes.
//
// An agent killed in the middle of an apply (issue 38 item 3: kill -9
// 0.7 s into a 3,000-chain PATCH) so finds on restart an intent file: the
// node may hold anything of the state file and the intent's states, and
// the first apply removes what of that union the desired state lacks
// (apply.Options.Remove), besides every route and rule tagged as
// srchain's (apply.Options.Owned). A missing, empty, truncated or
// unreadable file is not an error: the agent logs it and reconciles
// against the node alone (Owned), never trusting a record it cannot read.
//
// Both are written atomically and durably: a temporary file, fsync,
// rename, fsync of the directory (a rename is durable only once its
// directory is, rename(2) and fsync(2); ext4 and xfs document it so).

// storedState is a desired state as stored in etcd: the node's base and
// its parts by chain, the bytes received, not encoded again.
type storedState struct {
	Base  json.RawMessage            `json:"base"`
	Parts map[string]json.RawMessage `json:"parts"`
}

// stateFile is the state file's content.
type stateFile struct {
	Version int `json:"version"`
	storedState
}

// intentFile is the intent file's content: the states an apply under
// way may have put on the node.
type intentFile struct {
	Version int           `json:"version"`
	States  []storedState `json:"states"`
}

func intentPath(stateFile string) string { return stateFile + ".intent" }

// record is what the agent read from its files at start.
type record struct {
	// node is the union of everything the files say the node may hold;
	// nil when they say nothing (no files, or unreadable ones).
	node *state.Node
	// intent lists the states of an apply that did not end (the intent
	// file), carried into the next intent until an apply ends.
	intent []storedState
	// problems found reading the files (logged; the first apply then
	// reconciles against the node).
	problems []error
}

// readRecord reads the state and intent files at path.
func readRecord(path string) record {
	var rec record
	var nodes []state.Node
	if b, err := readIfExists(path); err != nil {
		rec.problems = append(rec.problems, err)
	} else if b != nil {
		var f stateFile
		if err := json.Unmarshal(b, &f); err != nil {
			rec.problems = append(rec.problems, fmt.Errorf("decode agent state %s: %w", path, err))
		} else if f.Version == state.FormatVersion {
			// Another format (another srchain) is not trusted to remove
			// anything; Owned still reconciles.
			n, err := f.node()
			if err != nil {
				rec.problems = append(rec.problems, fmt.Errorf("decode agent state %s: %w", path, err))
			} else {
				nodes = append(nodes, n)
			}
		}
	}
	ip := intentPath(path)
	if b, err := readIfExists(ip); err != nil {
		rec.problems = append(rec.problems, err)
	} else if b != nil {
		var f intentFile
		if err := json.Unmarshal(b, &f); err != nil {
			rec.problems = append(rec.problems, fmt.Errorf("decode agent intent %s: %w", ip, err))
		} else if f.Version == state.FormatVersion {
			for _, s := range f.States {
				n, err := s.node()
				if err != nil {
					rec.problems = append(rec.problems, fmt.Errorf("decode agent intent %s: %w", ip, err))
					continue
				}
				nodes = append(nodes, n)
				rec.intent = append(rec.intent, s)
			}
		}
	}
	if len(nodes) > 0 {
		u := union(nodes)
		rec.node = &u
	}
	return rec
}

func readIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent state: %w", err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("read agent state %s: empty file", path)
	}
	return b, nil
}

func (s storedState) node() (state.Node, error) {
	parts := make(map[string][]byte, len(s.Parts))
	for c, p := range s.Parts {
		parts[c] = p
	}
	net, err := state.DecodeStored(s.Base, parts)
	if err != nil {
		return state.Node{}, err
	}
	return net.Nodes[0], nil
}

// union is a node holding the routes, SIDs, rules and programs of every
// node of ns (the first one's for the rest): what apply.Options.Remove
// takes to remove whatever of them the desired state lacks.
func union(ns []state.Node) state.Node {
	u := ns[0]
	u.Routes, u.SIDs, u.Rules, u.Programs = slices.Clone(u.Routes), slices.Clone(u.SIDs), slices.Clone(u.Rules), slices.Clone(u.Programs)
	for _, n := range ns[1:] {
		u.Routes = append(u.Routes, n.Routes...)
		u.SIDs = append(u.SIDs, n.SIDs...)
		u.Rules = append(u.Rules, n.Rules...)
		for _, p := range n.Programs {
			// One program per kind and NF: a driver removes it once.
			if !slices.ContainsFunc(u.Programs, func(q state.Program) bool { return q.Kind == p.Kind && q.NF == p.NF }) {
				u.Programs = append(u.Programs, p)
			}
		}
	}
	return u
}

// equal reports whether s and t are the same stored state.
func (s storedState) equal(t storedState) bool {
	return string(s.Base) == string(t.Base) && maps.EqualFunc(s.Parts, t.Parts, func(a, b json.RawMessage) bool { return string(a) == string(b) })
}

// stored is d as stored, the parts of the chains listed only (all of
// them when chains is nil).
func (d *desiredState) stored(chains []string) storedState {
	s := storedState{Base: d.baseBytes, Parts: make(map[string]json.RawMessage, len(d.raw))}
	if chains == nil {
		for c, b := range d.raw {
			s.Parts[c] = b
		}
		return s
	}
	for _, c := range chains {
		if b, ok := d.raw[c]; ok {
			s.Parts[c] = b
		}
	}
	return s
}

// appendStored appends s as JSON to buf by hand: the stored bytes are
// copied, not encoded again, so a record costs a copy of the node's state
// (2.6 MB at 10,000 chains), not an encoding of it.
func appendStored(buf []byte, s storedState) []byte {
	return append(appendFields(append(buf, '{'), s), '}')
}

// appendFields appends s's members, "base":...,"parts":{...}.
func appendFields(buf []byte, s storedState) []byte {
	buf = append(buf, `"base":`...)
	buf = append(buf, s.Base...)
	buf = append(buf, `,"parts":{`...)
	first := true
	for c, b := range s.Parts {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		k, _ := json.Marshal(c)
		buf = append(append(append(buf, k...), ':'), b...)
	}
	return append(buf, '}')
}

func storedSize(s storedState) int {
	n := len(s.Base) + 32
	for c, b := range s.Parts {
		n += len(c) + len(b) + 4
	}
	return n
}

// writeStateFile replaces the state file at path with d, durably.
func writeStateFile(path string, d *desiredState) error {
	s := d.stored(nil)
	buf := make([]byte, 0, storedSize(s)+32)
	buf = fmt.Appendf(buf, `{"version":%d,`, state.FormatVersion)
	buf = append(appendFields(buf, s), '}')
	if err := writeDurably(path, buf); err != nil {
		return fmt.Errorf("write agent state: %w", err)
	}
	return nil
}

// writeIntent records, durably, that the node may now hold states too.
func writeIntent(path string, states []storedState) error {
	size := 64
	for _, s := range states {
		size += storedSize(s)
	}
	buf := make([]byte, 0, size)
	buf = fmt.Appendf(buf, `{"version":%d,"states":[`, state.FormatVersion)
	for i, s := range states {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendStored(buf, s)
	}
	buf = append(buf, "]}"...)
	if err := writeDurably(intentPath(path), buf); err != nil {
		return fmt.Errorf("write agent intent: %w", err)
	}
	return nil
}

// removeIntent removes the intent file, durably: the state file names
// what the node holds again.
func removeIntent(path string) error {
	err := os.Remove(intentPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove agent intent: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("remove agent intent: %w", err)
	}
	return nil
}

// writeDurably replaces path with b: never half a file, and on disk when
// it returns (write a temporary file, fsync it, rename it over path,
// fsync the directory).
func writeDurably(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
