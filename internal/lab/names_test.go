package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/state"
)

// TestNSNameUnambiguous: lab "rela" node "z-x" and lab "rela-z" node "x"
// both mapped to src-rela-z-x.
func TestNSNameUnambiguous(t *testing.T) {
	labs := []string{"rela", "rela-z", "a", "a-b", "a-b-c"}
	nodes := []string{"x", "z-x", "b-c", "c", "b"}
	seen := map[string][2]string{}
	for _, l := range labs {
		for _, n := range nodes {
			ns := NSName(l, n)
			if prev, ok := seen[ns]; ok {
				t.Errorf("lab %s node %s and lab %s node %s share namespace %s", prev[0], prev[1], l, n, ns)
			}
			seen[ns] = [2]string{l, n}
		}
	}
	if !strings.HasPrefix(NSName("rela-z", "x"), NSName("rela-z", "")) || strings.HasPrefix(NSName("rela-z", "x"), NSName("rela", "")) {
		t.Errorf("NSName(lab, \"\") must prefix exactly that lab's namespaces")
	}
}

// TestNamespaceCollision brings up lab P node "z-x" and lab P-z node "x"
// together: both must come up and go down without touching the other.
func TestNamespaceCollision(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	base := fmt.Sprintf("srct-c%d", os.Getpid())
	a := &state.Network{Version: state.FormatVersion, Name: base, Nodes: []state.Node{{Name: "z-x", Role: "host"}}, Links: []state.Link{}}
	b := &state.Network{Version: state.FormatVersion, Name: base + "-z", Nodes: []state.Node{{Name: "x", Role: "host"}}, Links: []state.Link{}}
	cleanup(t, a, opts)
	cleanup(t, b, opts)
	if _, err := Up(ctx, a, UpOptions{Options: opts}); err != nil {
		t.Fatalf("up %s: %v", a.Name, err)
	}
	if _, err := Up(ctx, b, UpOptions{Options: opts}); err != nil {
		t.Fatalf("up %s: %v", b.Name, err)
	}
	if err := Down(ctx, b.Name, opts); err != nil {
		t.Fatalf("down %s: %v", b.Name, err)
	}
	sts, err := Status(ctx, a.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("lab %s after removing lab %s: %s: %v", a.Name, b.Name, s.Node, s.Problems)
		}
	}
}

// TestUpLockRefusesSymlink: a symlink planted at <lab>.up.lock in a
// writable state dir must not be followed (its target was truncated).
func TestUpLockRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{StateDir: dir}
	if err := os.Symlink(target, upLockPath(opts, "lab1")); err != nil {
		t.Fatal(err)
	}
	if release, err := lockUp(opts, "lab1"); err == nil {
		release()
		t.Error("lockUp followed a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("symlink target now holds %q", b)
	}
	// A FIFO is refused too, without blocking.
	if err := syscallMkfifo(upLockPath(opts, "lab2")); err != nil {
		t.Fatal(err)
	}
	if release, err := lockUp(opts, "lab2"); err == nil {
		release()
		t.Error("lockUp took a FIFO")
	}
}

// TestStaleUpLock: the lock of an Up killed with SIGKILL (file left, no
// flock held) neither blocks Down nor survives it, and the next Up takes
// it.
func TestStaleUpLock(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	path := upLockPath(opts, "lab1")
	if err := os.WriteFile(path, []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkNotUp(opts, "lab down", "lab1"); err != nil {
		t.Fatalf("stale lock: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale lock left behind: %v", err)
	}
	if err := os.WriteFile(path, []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	release, err := lockUp(opts, "lab1")
	if err != nil {
		t.Fatalf("lockUp over a stale lock: %v", err)
	}
	// Held: Down refuses.
	if err := checkNotUp(opts, "lab down", "lab1"); !errors.Is(err, ErrBusy) {
		t.Errorf("checkNotUp while held = %v, want ErrBusy", err)
	}
	release()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("released lock left behind: %v", err)
	}
}

// TestLongNameClipped: a 10 MB lab name is not echoed in full.
func TestLongNameClipped(t *testing.T) {
	long := strings.Repeat("x", 10<<20)
	opts := Options{StateDir: t.TempDir()}
	for _, err := range []error{
		func() error { _, err := Load(long, opts); return err }(),
		Down(context.Background(), long, opts),
		func() error {
			_, err := Up(context.Background(), &state.Network{Name: long}, UpOptions{Options: opts})
			return err
		}(),
	} {
		if !errors.Is(err, ErrBadName) || len(err.Error()) > 300 {
			t.Errorf("error (%d bytes) %.200s, want a short ErrBadName", len(err.Error()), err)
		}
	}
}

func syscallMkfifo(path string) error { return unix.Mkfifo(path, 0o644) }
