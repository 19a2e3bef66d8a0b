package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/store"
)

// TestRotateOPoT: POST /v1/opot/rotate stores new keys for the free slot
// on every member of the OPoT testbed's chain, waits for their agents,
// then switches the headend. With r3's agent silent it stops after the
// keys (504, the headend still on slot 0); once every agent reports, a
// rotation switches the headend to slot 1 in a later generation than
// every member's new keys. Nodes outside the chain are not written, and
// an unknown chain is a 404.
func TestRotateOPoT(t *testing.T) {
	e := newEnv(t)
	e.putExample("opot-testbed.yaml")
	members := []string{"r1", "r2", "r3", "r6"}
	gens0 := e.generations()
	keys0 := e.opotSlotKeys(1)
	if len(keys0) != 4 || e.headendSlot() != 0 {
		t.Fatalf("before: slot 1 keys on %d nodes, headend slot %d", len(keys0), e.headendSlot())
	}

	silent := map[string]bool{"r3": true}
	var mu sync.Mutex
	stop := e.fakeAgents(members, func(n string) bool { mu.Lock(); defer mu.Unlock(); return silent[n] })
	defer stop()

	err := e.do("POST", "/v1/opot/rotate", `{"wait_seconds":0.5}`, nil)
	if status(err) != http.StatusGatewayTimeout {
		t.Fatalf("r3 silent: %v, want 504", err)
	}
	keys1 := e.opotSlotKeys(1)
	for _, n := range members {
		if keys1[n] == keys0[n] {
			t.Errorf("r3 silent: %s's slot 1 keys not stored", n)
		}
	}
	if e.headendSlot() != 0 {
		t.Errorf("r3 silent: the headend switched to slot %d", e.headendSlot())
	}

	mu.Lock()
	silent = nil
	mu.Unlock()
	var res RotateResult
	e.must("POST", "/v1/opot/rotate", `{"chains":["verified"]}`, &res)
	if len(res.Rotations) != 1 || res.Rotations[0].Slot != 1 || res.Rotations[0].Headend != "r1" || !slices.Equal(res.Rotations[0].Nodes, members) {
		t.Fatalf("rotations %+v", res.Rotations)
	}
	if e.headendSlot() != 1 || res.Switch <= res.Keys {
		t.Errorf("headend slot %d, revisions keys %d switch %d", e.headendSlot(), res.Keys, res.Switch)
	}
	keys2, gens := e.opotSlotKeys(1), e.generations()
	for _, n := range members {
		if keys2[n] == keys1[n] {
			t.Errorf("%s's slot 1 keys not rotated again", n)
		}
	}
	for n, g := range gens {
		switch {
		case n == "r1":
			if g != res.Switch {
				t.Errorf("r1 generation %d, want the switch's %d", g, res.Switch)
			}
		case slices.Contains(members, n):
			if g != res.Keys {
				t.Errorf("%s generation %d, want the keys' %d", n, g, res.Keys)
			}
		case g != gens0[n]:
			t.Errorf("%s (not in the chain) written: generation %d -> %d", n, gens0[n], g)
		}
	}
	if err := e.do("POST", "/v1/opot/rotate", `{"chains":["nope"]}`, nil); status(err) != http.StatusNotFound {
		t.Errorf("unknown chain: %v, want 404", err)
	}
	if err := e.do("POST", "/v1/opot/rotate", `{"wait_seconds":-1}`, nil); status(err) != http.StatusBadRequest {
		t.Errorf("negative wait: %v, want 400", err)
	}
	e.checkConsistent()
}

// fakeAgents reports, for each node that is not silent, that it applied
// its desired generation, until the returned stop is called.
func (e *env) fakeAgents(nodes []string, silent func(string) bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cli := e.st.Client()
		for ctx.Err() == nil {
			for _, n := range nodes {
				if silent(n) {
					continue
				}
				st, err := e.c.NodeStatus(ctx, n)
				if err != nil {
					continue
				}
				cli.Put(ctx, store.StatusKey(n), fmt.Sprintf(`{"applied_generation":%d}`, st.DesiredGeneration))
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// opotSlotKeys reads each node's stored parameters of the testbed
// chain's slot.
func (e *env) opotSlotKeys(slot int) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for name, n := range e.storedNodes() {
		for _, s := range n.Secrets {
			if s.Name == compile.OPoTSecretName("verified", 1, slot) {
				out[name] = string(s.Value)
			}
		}
	}
	return out
}

// headendSlot is the slot r1 starts the testbed chain's packets with.
func (e *env) headendSlot() uint8 {
	e.t.Helper()
	n := e.storedNodes()["r1"]
	for _, p := range n.Programs {
		if p.Kind != state.ProgramOPoT {
			continue
		}
		var cfg state.OPoTConfig
		if err := json.Unmarshal(p.Config, &cfg); err != nil {
			e.t.Fatal(err)
		}
		for _, c := range cfg.Chains {
			if c.Role == state.OPoTHeadend {
				return c.Slot
			}
		}
	}
	e.t.Fatal("r1 is no headend")
	return 0
}

func (e *env) storedNodes() map[string]state.Node {
	e.t.Helper()
	snap, err := e.st.Read(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]state.Node{}
	for name, d := range snap.Desired {
		one, err := state.DecodeStored(d.State, d.Parts)
		if err != nil {
			e.t.Fatal(err)
		}
		out[name] = one.Nodes[0]
	}
	return out
}
