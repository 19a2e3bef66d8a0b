package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// TestEndPinned checks that a pinned End survives its process: a second
// LoadEnd on the same PinPath sees the SIDs, counter slots and the tcx
// link, and Unpin removes everything.
func TestEndPinned(t *testing.T) {
	env := newTestEnv(t)
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("srct-e-%d", os.Getpid()), "end")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(dir)) })

	e1, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	sid2 := netip.MustParseAddr("fc00:1::99")
	if err := e1.SetSID(sidEnd, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e1.SetSID(sid2, BehaviorEndX, env.out, nhAddr); err != nil {
		t.Fatal(err)
	}
	if err := env.ns.Do(func() error { return e1.Attach(env.in) }); err != nil {
		t.Fatal(err)
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sids", "drop_counters", "sid_counters", "fib_counters", fmt.Sprintf("tcx_ingress_%d", env.in)} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("pin %s missing after Close: %v", name, err)
		}
	}

	e2, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if got := len(e2.SIDs()); got != 2 {
		t.Errorf("reloaded %d SIDs, want 2", got)
	}
	// A new SID must not reuse a slot the pinned SIDs hold.
	sid3 := netip.MustParseAddr("fc00:1::100")
	if err := e2.SetSID(sid3, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if e2.slots[sid3] == e2.slots[sidEnd] || e2.slots[sid3] == e2.slots[sid2] {
		t.Errorf("slot reused: %v", e2.slots)
	}
	if err := env.ns.Do(func() error { return e2.Attach(env.in) }); err != nil {
		t.Fatalf("take over pinned link: %v", err)
	}
	if err := e2.Unpin(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("pins left after Unpin: %v", ents)
	}
}

// TestEndSharedPinsSlots: two Ends opened on the same pins (as two
// processes are) hand out distinct counter slots, and a SID one deletes
// is gone for the other. With slots kept only in each End's memory, both
// picked slot 0 and counted two SIDs in one slot.
func TestEndSharedPinsSlots(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("srct-s-%d", os.Getpid()), "end")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(dir)) })
	e1, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Close()
	e2, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	defer e2.Unpin()

	a, b, c := netip.MustParseAddr("fc00:5::a"), netip.MustParseAddr("fc00:5::b"), netip.MustParseAddr("fc00:5::c")
	if err := e1.SetSID(a, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e2.SetSID(b, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	ea, _, err := e2.SID(a)
	if err != nil {
		t.Fatal(err)
	}
	eb, _, err := e1.SID(b)
	if err != nil {
		t.Fatal(err)
	}
	if ea.Counter == eb.Counter {
		t.Fatalf("sids %s and %s share counter slot %d", a, b, ea.Counter)
	}
	// e2 frees a's slot; e1 must see it free and a gone.
	if err := e2.DeleteSID(a); err != nil {
		t.Fatalf("delete a sid the other opener set: %v", err)
	}
	if err := e1.SetSID(c, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	ec, _, err := e1.SID(c)
	if err != nil {
		t.Fatal(err)
	}
	if ec.Counter == eb.Counter {
		t.Fatalf("sid %s got %s's slot %d", c, b, eb.Counter)
	}
}

// TestEndFreshPinDirAtomic: a new pin directory appears whole or not at
// all. A load that fails after pinning leaves no directory (the old code
// left an empty one behind, which later loads took for a built one) and
// no temporary sibling; a successful one leaves exactly the maps.
func TestEndFreshPinDirAtomic(t *testing.T) {
	requireRoot(t)
	parent := filepath.Join("/sys/fs/bpf", fmt.Sprintf("srct-f-%d", os.Getpid()))
	dir := filepath.Join(parent, "end")
	t.Cleanup(func() { os.RemoveAll(parent) })

	loadEndTestHook = func() error { return errors.New("injected") }
	_, err := LoadEnd(EndOptions{PinPath: dir})
	loadEndTestHook = nil
	if err == nil {
		t.Fatal("load with the injected failure succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pin dir after a failed fresh load: stat %v, want not exist", err)
	}
	e, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "end" {
		t.Fatalf("parent holds %v, want only end", ents)
	}
	ents, _ = os.ReadDir(dir)
	if len(ents) != len(endSharedMaps) {
		t.Fatalf("pin dir holds %v, want the %d shared maps", ents, len(endSharedMaps))
	}
}
