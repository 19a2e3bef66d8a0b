package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
)

func testPinDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("srct-e-%d-%s", os.Getpid(), name), "end")
	_ = os.RemoveAll(filepath.Dir(dir))
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(dir)) })
	return dir
}

// TestEndSID reads entries back from the map, also through a second
// LoadEnd on the same pins.
func TestEndSID(t *testing.T) {
	env := newTestEnv(t)
	dir := testPinDir(t, "sid")
	e1, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Unpin()
	defer e1.Close()
	if err := e1.SetSID(sidEnd, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e1.SetSID(sidEndX, BehaviorEndX, env.out, nhAddr); err != nil {
		t.Fatal(err)
	}
	if err := e1.SetSID(sidEndXOnLink, BehaviorEndX, env.out, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	e2, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	for _, tc := range []struct {
		sid  netip.Addr
		ok   bool
		want SIDEntry
	}{
		{sidEnd, true, SIDEntry{Behavior: BehaviorEnd, Bits: 128}},
		{sidEndX, true, SIDEntry{Behavior: BehaviorEndX, OIF: env.out, NH6: nhAddr, Bits: 128}},
		{sidEndXOnLink, true, SIDEntry{Behavior: BehaviorEndX, OIF: env.out, Bits: 128}},
		{routed, false, SIDEntry{}},
	} {
		for _, e := range []*End{e1, e2} {
			got, ok, err := e.SID(tc.sid)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Counter = got.Counter
			if ok != tc.ok || got != tc.want {
				t.Errorf("SID(%s) = %+v, %v; want %+v, %v", tc.sid, got, ok, tc.want, tc.ok)
			}
		}
	}
	// Restoring from SID gives the same entry.
	before, _, _ := e1.SID(sidEndX)
	if err := e1.SetSID(sidEndX, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e1.SetSID(sidEndX, before.Behavior, before.OIF, before.NH6); err != nil {
		t.Fatal(err)
	}
	if after, _, _ := e2.SID(sidEndX); after != before {
		t.Errorf("restored %+v, want %+v", after, before)
	}
	if _, _, err := e1.SID(netip.MustParseAddr("10.0.0.1")); !errors.Is(err, ErrBadSID) {
		t.Errorf("SID(ipv4) error %v, want ErrBadSID", err)
	}
}

// TestEndIncompatiblePinnedMap: a pinned map of an older layout (here
// drop_counters sized DROP_MAX, as before SRCHAIN_DROP_SLOTS) is replaced,
// the compatible ones are reused.
func TestEndIncompatiblePinnedMap(t *testing.T) {
	requireRoot(t)
	dir := testPinDir(t, "compat")
	e1, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.SetSID(sidEnd, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	e1.Close()
	old := filepath.Join(dir, endProgMapDropCounters)
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 22})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(old); err != nil {
		t.Fatal(err)
	}
	m.Close()

	e2, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatalf("load over an incompatible pinned map: %v", err)
	}
	defer e2.Unpin()
	defer e2.Close()
	pinned, err := ebpf.LoadPinnedMap(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if pinned.MaxEntries() != 64 {
		t.Errorf("pinned drop_counters has %d entries, want the new map's 64", pinned.MaxEntries())
	}
	if _, ok, err := e2.SID(sidEnd); err != nil || !ok {
		t.Errorf("compatible pinned sids map not reused: %v %v", ok, err)
	}
	if _, err := e2.DropCounts(); err != nil {
		t.Error(err)
	}
}

// TestEndLoadFailureRemovesPins: pins a failed LoadEnd created are gone,
// pins that existed before stay.
func TestEndLoadFailureRemovesPins(t *testing.T) {
	requireRoot(t)
	dir := testPinDir(t, "fail")
	boom := errors.New("injected")
	loadEndTestHook = func() error { return boom }
	defer func() { loadEndTestHook = nil }()
	if _, err := LoadEnd(EndOptions{PinPath: dir}); !errors.Is(err, boom) {
		t.Fatalf("LoadEnd: %v, want the injected error", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("pins left after a failed load: %v", ents)
	}

	// With an existing pinned sids map: it stays, the others go. (The
	// failed fresh load left no directory: TestEndFreshPinDirAtomic.)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 16, ValueSize: uint32(binary.Size(sidEntry{})), MaxEntries: maxSIDs})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Pin(filepath.Join(dir, endProgMapSids)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEnd(EndOptions{PinPath: dir}); !errors.Is(err, boom) {
		t.Fatalf("LoadEnd: %v, want the injected error", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != endProgMapSids {
		t.Errorf("pins after a failed load: %v, want only the pre-existing sids", ents)
	}
}

// staleIfindex is the ifindex stalePinNS asks the kernel for: a fresh
// namespace has it free, so a recreated namespace reuses it for certain
// (the case the stale-pin test is about), not by the luck of allocation.
const staleIfindex = 4242

// stalePinNS creates namespace srct-e-<pid>-stale with a veth pair and
// returns it and the ifindex of one end (staleIfindex).
func stalePinNS(t *testing.T) (*netns.NS, int) {
	t.Helper()
	name := fmt.Sprintf("srct-e-%d-stale", os.Getpid())
	_ = netns.Delete(name)
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	a, b := fmt.Sprintf("srcte%dsa", os.Getpid()), fmt.Sprintf("srcte%dsb", os.Getpid())
	if err := ns.Netlink().LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a, Index: staleIfindex}, PeerName: b}); err != nil {
		ns.Delete()
		t.Fatal(err)
	}
	l, err := ns.Netlink().LinkByName(a)
	if err != nil {
		ns.Delete()
		t.Fatal(err)
	}
	return ns, l.Attrs().Index
}

// TestEndAttachStalePin: the namespace (and so the interface) of a pinned
// link is deleted and recreated with the same ifindex; a new End on the
// same pins must attach there (the old code failed updating the severed
// link), and Attached must say so.
func TestEndAttachStalePin(t *testing.T) {
	requireRoot(t)
	dir := testPinDir(t, "stale")
	ns, idx := stalePinNS(t)
	e1, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		ns.Delete()
		t.Fatal(err)
	}
	err = ns.Do(func() error {
		if err := e1.Attach(idx); err != nil {
			return err
		}
		return e1.AttachXDP(idx)
	})
	if err != nil {
		ns.Delete()
		t.Fatal(err)
	}
	e1.Close() // pinned links stay
	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}

	ns, idx2 := stalePinNS(t)
	defer func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	}()
	if idx2 != idx {
		t.Fatalf("recreated interface has ifindex %d, not %d", idx2, idx)
	}
	e2, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Unpin()
	defer e2.Close()
	var tcOK, xdpOK bool
	err = ns.Do(func() error {
		if err := e2.Attach(idx); err != nil {
			return err
		}
		if err := e2.AttachXDP(idx); err != nil {
			return err
		}
		var err error
		if tcOK, err = e2.Attached(idx); err != nil {
			return err
		}
		xdpOK, err = e2.AttachedXDP(idx)
		return err
	})
	if err != nil {
		t.Fatalf("attach over a stale pin: %v", err)
	}
	if !tcOK || !xdpOK {
		t.Errorf("Attached tc %v xdp %v after re-attach, want true", tcOK, xdpOK)
	}
}

// TestEndAttached: true only for the End whose program is on the
// interface in the caller's namespace.
func TestEndAttached(t *testing.T) {
	env := newTestEnv(t)
	other, err := LoadEnd(EndOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	check := func(when string, e *End, want bool) {
		t.Helper()
		var got bool
		err := env.ns.Do(func() error {
			var err error
			got, err = e.Attached(env.in)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got != want {
			t.Errorf("%s: Attached = %v, want %v", when, got, want)
		}
	}
	check("before attach", env.end, false)
	if err := env.ns.Do(func() error { return env.end.Attach(env.in) }); err != nil {
		t.Fatal(err)
	}
	check("attached", env.end, true)
	check("other End", other, false)
	// Outside the namespace the ifindex names another (or no) interface.
	if got, err := env.end.Attached(env.in); err == nil && got {
		t.Error("Attached outside the namespace = true")
	}
	if err := env.end.Detach(env.in); err != nil {
		t.Fatal(err)
	}
	check("detached", env.end, false)
	if err := env.ns.Do(func() error { _, err := env.end.Attached(999); return err }); err == nil {
		t.Error("Attached(missing ifindex): no error")
	}
}

// TestEndStackForward: with EndOptions.StackForward every rewritten
// packet goes to the stack (End and End.X), and XDP passes all untouched.
func TestEndStackForward(t *testing.T) {
	env := newTestEnv(t)
	e, err := LoadEnd(EndOptions{StackForward: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetSID(sidEnd, BehaviorEnd, 0, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSID(sidEndX, BehaviorEndX, env.out, nhAddr); err != nil {
		t.Fatal(err)
	}
	env.end = e
	for _, ip := range [][]byte{
		srv6Pkt(t, sidEnd, 64, srhFor(sidEnd, routed, routed2)),
		srv6Pkt(t, sidEndX, 64, srhFor(sidEndX, noRoute, routed2)),
	} {
		frame := ether(ip)
		ret, out := env.run(t, frame, false)
		ref, err := srv6.MutateEnd(ip)
		if err != nil {
			t.Fatal(err)
		}
		ref[7]++ // the stack decrements
		if ret != tcActOK || !bytes.Equal(out, ether(ref)) {
			t.Errorf("tc: verdict %d, want %d (stack)\n got %x\nwant %x", ret, tcActOK, out, ether(ref))
		}
		ret, out = env.run(t, frame, true)
		if ret != xdpPass || !bytes.Equal(out, frame) {
			t.Errorf("xdp: verdict %d, want %d untouched", ret, xdpPass)
		}
	}
	fib, err := e.FIBCounts()
	if err != nil {
		t.Fatal(err)
	}
	if fib["stack-forward"] != 2 || len(fib) != 1 {
		t.Errorf("fib counters %v, want stack-forward: 2 only", fib)
	}
}

// TestEndPinDirRecreatedNamespace: when the namespace of a pin directory
// is deleted and created again, the first Attach in the new namespace
// drops every link pin of the old one (decided by namespace identity),
// also those of hooks it does not attach: the old code kept the dead
// namespace's xdp pin until something attached XDP there again.
func TestEndPinDirRecreatedNamespace(t *testing.T) {
	requireRoot(t)
	dir := testPinDir(t, "renew")
	ns, idx := stalePinNS(t)
	e1, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		ns.Delete()
		t.Fatal(err)
	}
	err = ns.Do(func() error {
		if err := e1.Attach(idx); err != nil {
			return err
		}
		return e1.AttachXDP(idx)
	})
	e1.Close()
	if err != nil {
		ns.Delete()
		t.Fatal(err)
	}
	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}
	ns, idx = stalePinNS(t)
	defer func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	}()
	e2, err := LoadEnd(EndOptions{PinPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Unpin()
	defer e2.Close()
	if err := ns.Do(func() error { return e2.Attach(idx) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("xdp_%d", idx))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("xdp pin of the deleted namespace still there (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("tcx_ingress_%d", idx))); err != nil {
		t.Errorf("new tcx pin: %v", err)
	}
}
