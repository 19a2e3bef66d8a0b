package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// storedOf is n as a stored state (base only, no parts).
func storedOf(t *testing.T, n state.Node) storedState {
	t.Helper()
	b, err := json.Marshal(state.Network{Version: state.FormatVersion, Name: "t", Nodes: []state.Node{n}, Links: []state.Link{}})
	if err != nil {
		t.Fatal(err)
	}
	return storedState{Base: b, Parts: map[string]json.RawMessage{}}
}

// TestRecord: the state file and an intent file left by an apply that
// did not end read back as the union of their states; the files are
// written whole (no temporary file left); a missing, empty, truncated or
// undecodable file is a problem to log, never an error that stops the
// agent (issue 38: an empty or truncated state file stopped it, rc 1).
func TestRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r1.json")
	a := state.Node{Name: "r1", Routes: []state.Route{{Dst: netip.MustParsePrefix("10.0.1.0/24"), Dev: "eth0"}}}
	b := state.Node{Name: "r1", Routes: []state.Route{{Dst: netip.MustParsePrefix("10.0.2.0/24"), Dev: "eth0"}},
		Rules: []state.Rule{{Priority: 100, Family: 4, Table: 100}}}
	if rec := readRecord(path); rec.node != nil || len(rec.problems) != 0 {
		t.Fatalf("no files: %+v", rec)
	}
	da := &desiredState{baseBytes: storedOf(t, a).Base}
	if err := writeStateFile(path, da); err != nil {
		t.Fatal(err)
	}
	if err := writeIntent(path, []storedState{storedOf(t, b)}); err != nil {
		t.Fatal(err)
	}
	rec := readRecord(path)
	if len(rec.problems) != 0 || rec.node == nil || len(rec.intent) != 1 {
		t.Fatalf("state and intent: %+v", rec)
	}
	if len(rec.node.Routes) != 2 || len(rec.node.Rules) != 1 {
		t.Errorf("union: %d routes, %d rules; want 2 and 1", len(rec.node.Routes), len(rec.node.Rules))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := removeIntent(path); err != nil {
		t.Fatal(err)
	}
	if rec := readRecord(path); len(rec.problems) != 0 || rec.node == nil || len(rec.node.Routes) != 1 || rec.intent != nil {
		t.Fatalf("state alone: %+v", rec)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"empty":     {},
		"truncated": good[:len(good)/2],
		"garbage":   []byte("\x00\x01not json"),
	} {
		for _, f := range []string{path, intentPath(path)} {
			if err := os.WriteFile(path, good, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(intentPath(path))
			if err := os.WriteFile(f, content, 0o600); err != nil {
				t.Fatal(err)
			}
			rec := readRecord(path)
			if len(rec.problems) != 1 {
				t.Errorf("%s %s: problems %v, want one", name, filepath.Base(f), rec.problems)
			}
		}
	}
}

// TestStateFileUnreadable: an agent whose state file is empty, truncated
// or not JSON starts anyway, logs it, and reconciles against the node:
// srchain's routes and rules there that its desired state lacks (which
// only the lost file named) are removed, and the file is written anew.
func TestStateFileUnreadable(t *testing.T) {
	w := newWorld(t)
	w.put()
	w.build()
	path := filepath.Join(w.dir, "agent", "r1.json")
	w.start("r1")
	w.inSync("r1")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ns := w.nss["r1"]
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"empty", func() error { return os.WriteFile(path, nil, 0o600) }},
		{"truncated", func() error { return os.WriteFile(path, good[:len(good)/2], 0o600) }},
		{"not json", func() error { return os.WriteFile(path, []byte("\x00\x01not json"), 0o600) }},
	} {
		w.stop("r1")
		if err := c.write(); err != nil {
			t.Fatal(err)
		}
		// What the lost file named: a policy route and its rule, as
		// srchain writes them (proto 83).
		for _, argv := range [][]string{
			{"ip", "-4", "route", "add", "blackhole", "10.0.99.0/24", "table", "999", "proto", "83"},
			{"ip", "-4", "rule", "add", "pref", "30999", "to", "10.0.99.0/24", "table", "999", "proto", "83"},
		} {
			if _, err := ns.Run(ctx, argv[0], argv[1:]...); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		since := time.Now()
		w.start("r1")
		w.until(c.name+": r1's restarted agent applies its node", func() bool {
			st, rep := w.status("r1")
			return rep.Started.After(since) && st.InSync
		})
		if _, rep := w.status("r1"); rep.LastError != "" {
			t.Errorf("%s: %s", c.name, rep.LastError)
		}
		if r := w.routes("r1", "-4"); strings.Contains(r, "10.0.99.0") {
			t.Errorf("%s: srchain's route the lost file named is left:\n%s", c.name, r)
		}
		if out, _ := ns.Run(ctx, "ip", "-4", "rule"); strings.Contains(out, "30999") {
			t.Errorf("%s: srchain's rule the lost file named is left:\n%s", c.name, out)
		}
		w.noDrift("r1")
		// Written just after the status is reported.
		w.until(c.name+": the state file written anew", func() bool {
			rec := readRecord(path)
			return len(rec.problems) == 0 && rec.node != nil && rec.intent == nil
		})
	}
}

// BenchmarkRecord: what recording costs per apply at 10,000 chains (parts
// of ~260 bytes, as the bench's chains store): the intent of a one-chain
// change, and the state file written durably after it. Results in
// docs/controller.md ("Agent").
//
//	go test ./internal/agent/ -run '^$' -bench Record -benchtime 20x
func BenchmarkRecord(b *testing.B) {
	d := &desiredState{baseBytes: []byte(`{"version":3,"name":"t","nodes":[{"name":"r1"}],"links":[]}`), raw: map[string][]byte{}}
	part := []byte(`{"routes":[{"table":1000,"dst":"fc00:a4::/64","dev":"eth1","encap":{"mode":"encap","segments":["fc00:2::1:0","fc00:3::2:0"]},"chain":"cX"}],"rules":[{"priority":1000,"family":6,"dst":"fc00:a4::/64","ipproto":17,"dport":{"from":1000},"table":1000,"chain":"cX"}]}`)
	for i := range 10000 {
		d.raw["c"+strconv.Itoa(i)] = part
	}
	path := filepath.Join(b.TempDir(), "r1.json")
	b.Run("intent-one-chain", func(b *testing.B) {
		for range b.N {
			if err := writeIntent(path, []storedState{d.stored([]string{"c1"})}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("state-file", func(b *testing.B) {
		for range b.N {
			if err := writeStateFile(path, d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// flakyDriver is a program driver whose program a test can "detach"
// (Check reports it missing) and whose Apply a test can make fail.
type flakyDriver struct {
	apply.DriverFunc
	detached, broken *atomic.Bool
}

func (d flakyDriver) Check(context.Context, *netns.NS, state.Node, state.Program) ([]string, error) {
	if d.detached.Load() {
		return []string{"program flaky: detached"}, nil
	}
	return nil, nil
}

// TestInSyncFromNode: in_sync says what the node holds. A drift the agent
// cannot repair (the program detached, its driver failing) turns in_sync
// false, with the error, until a check finds the node as desired again;
// before, the agent went on reporting the generation applied.
func TestInSyncFromNode(t *testing.T) {
	w := newWorld(t)
	ns, err := netns.Create(w.prefix + "x")
	if err != nil {
		t.Fatal(err)
	}
	w.nss["x"] = ns
	var detached, broken atomic.Bool
	drv := flakyDriver{DriverFunc: func(*netns.NS, state.Node, state.Program) (func() error, error) {
		if broken.Load() {
			return nil, errors.New("flaky driver fails")
		}
		return nil, nil
	}, detached: &detached, broken: &broken}
	n := state.Node{Name: "x", Role: "router", Interfaces: []state.Interface{}, Programs: []state.Program{{Kind: "flaky"}}}
	raw, err := json.Marshal(state.Network{Version: state.FormatVersion, Name: "t", Nodes: []state.Node{n}, Links: []state.Link{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Client().Put(context.Background(), store.DesiredKey("x"), string(raw)); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Node: "x", NS: ns, Client: w.st.Client(), TTL: testTTL, Resync: testResync,
		Drivers: map[string]apply.ProgramDriver{"flaky": drv}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{agent: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	w.agents["x"] = r
	w.inSync("x")

	detached.Store(true)
	broken.Store(true)
	w.until("x reports the drift it cannot repair, not in sync", func() bool {
		st, _ := w.status("x")
		return !st.InSync && strings.Contains(st.LastError, "flaky driver fails")
	})
	broken.Store(false)
	w.until("x repairs the drift and is in sync again", func() bool {
		st, _ := w.status("x")
		return st.InSync && st.LastError == ""
	})
	detached.Store(false)
	w.until("x in sync after a clean check", func() bool {
		st, rep := w.status("x")
		return st.InSync && len(rep.Drift) == 0
	})
}

// countDriver counts the programs it removed, by NF.
type countDriver struct {
	apply.DriverFunc
	removed *sync.Map
}

func (d countDriver) Remove(_ context.Context, _ *netns.NS, _ state.Node, p state.Program) error {
	d.removed.Store(p.NF, true)
	return nil
}

// TestIntentRemovesPrograms: an apply killed after it attached an NF's
// program, whose intent record names it, leaves nothing once the agent
// restarts on a desired state without that NF: the program is removed
// through its driver, which only the record can tell (programs carry no
// routing protocol tag).
func TestIntentRemovesPrograms(t *testing.T) {
	w := newWorld(t)
	ns, err := netns.Create(w.prefix + "x")
	if err != nil {
		t.Fatal(err)
	}
	w.nss["x"] = ns
	var removed sync.Map
	drv := countDriver{DriverFunc: func(*netns.NS, state.Node, state.Program) (func() error, error) { return nil, nil }, removed: &removed}
	path := filepath.Join(w.dir, "agent", "x.json")
	node := func(progs ...state.Program) []byte {
		n := state.Node{Name: "x", Role: "router", Interfaces: []state.Interface{}, Programs: progs}
		raw, err := json.Marshal(state.Network{Version: state.FormatVersion, Name: "t", Nodes: []state.Node{n}, Links: []state.Link{}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if _, err := w.st.Client().Put(context.Background(), store.DesiredKey("x"), string(node())); err != nil {
		t.Fatal(err)
	}
	start := func() {
		a, err := New(Config{Node: "x", NS: ns, Client: w.st.Client(), TTL: testTTL, Resync: testResync, StateFile: path,
			Drivers: map[string]apply.ProgramDriver{"count": drv}, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{agent: a, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- a.Run(ctx) }()
		w.agents["x"] = r
	}
	start()
	w.inSync("x")
	w.until("the state file written", func() bool { return readRecord(path).node != nil })
	w.stop("x")
	// What an agent killed in the middle of applying NF nf1 leaves: its
	// intent record (the program attached, the state file not updated).
	if err := writeIntent(path, []storedState{{Base: node(state.Program{Kind: "count", NF: "nf1"}), Parts: map[string]json.RawMessage{}}}); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	start()
	w.until("x's restarted agent applies its node", func() bool {
		st, rep := w.status("x")
		return rep.Started.After(since) && st.InSync
	})
	if _, ok := removed.Load("nf1"); !ok {
		t.Error("the program the intent record named was not removed")
	}
	w.until("the intent record gone", func() bool {
		_, err := os.Stat(intentPath(path))
		return os.IsNotExist(err)
	})
}
