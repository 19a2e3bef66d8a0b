package bpfrt

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
)

// tryLock attempts a non-blocking flock on a fresh descriptor of dir,
// as another process would, and reports whether it got it.
func tryLock(t *testing.T, dir string, mode int) bool {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), mode|syscall.LOCK_NB)
	if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatal(err)
	}
	return err == nil
}

func TestLockDirModes(t *testing.T) {
	dir := t.TempDir()
	release, err := LockDir(dir, Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if tryLock(t, dir, syscall.LOCK_SH) || tryLock(t, dir, syscall.LOCK_EX) {
		t.Fatal("exclusive lock let another opener in")
	}
	release()
	if !tryLock(t, dir, syscall.LOCK_EX) {
		t.Fatal("lock still held after release")
	}

	release, err = LockDir(dir, Shared)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if !tryLock(t, dir, syscall.LOCK_SH) {
		t.Fatal("shared lock kept another reader out")
	}
	if tryLock(t, dir, syscall.LOCK_EX) {
		t.Fatal("shared lock let a writer in")
	}
}

func TestLockDirNoDir(t *testing.T) {
	release, err := LockDir("", Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := LockDir(t.TempDir(), 99); !errors.Is(err, ErrBadMode) {
		t.Fatalf("mode 99: %v, want ErrBadMode", err)
	}
	if _, err := LockDir("/nonexistent/srchain", Exclusive); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing dir: %v, want ErrNotExist", err)
	}
}

// TestWrapLoadKeepsVerifierError: the loaders used to format the verifier
// error with %+v, which made errors.As to *ebpf.VerifierError impossible.
func TestWrapLoadKeepsVerifierError(t *testing.T) {
	ve := &ebpf.VerifierError{Cause: syscall.EACCES, Log: []string{"0: (b7) r0 = 0", "R1 invalid mem access"}}
	err := WrapLoad("load end program", fmt.Errorf("program srchain_end: %w", ve))
	var got *ebpf.VerifierError
	if !errors.As(err, &got) || got != ve {
		t.Fatalf("errors.As lost the verifier error: %v", err)
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Fatal("cause not reachable")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "load end program: ") || !strings.Contains(msg, "R1 invalid mem access") {
		t.Fatalf("message lacks the log: %q", msg)
	}
	if WrapLoad("x", nil) != nil {
		t.Fatal("nil wrapped")
	}
}

func TestNetnsIdentity(t *testing.T) {
	a, err := NetnsOf("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NetnsOf("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Ino == 0 {
		t.Fatalf("same namespace, ids %v and %v", a, b)
	}
	// Another namespace type is another nsfs inode.
	u, err := NetnsOf("/proc/self/ns/uts")
	if err != nil {
		t.Fatal(err)
	}
	if u == a {
		t.Fatal("net and uts namespaces share an id")
	}
	if _, err := NetnsOf("/nonexistent"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

func TestClaimPinDir(t *testing.T) {
	dir := t.TempDir()
	claimed := func(want bool) {
		t.Helper()
		if here, err := ClaimedHere(dir); err != nil || here != want {
			t.Fatalf("ClaimedHere = %v, %v; want %v", here, err, want)
		}
	}
	claimed(false)
	if re, err := ClaimPinDir(dir, IsHookPin); err != nil || re {
		t.Fatalf("fresh dir: reclaimed %v, %v", re, err)
	}
	claimed(true)
	for _, n := range []string{"tcx_ingress_5", "xdp_5", "sids", "fw_tcx_ingress_5"} {
		if err := os.WriteFile(dir+"/"+n, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Same namespace again: nothing removed.
	if re, err := ClaimPinDir(dir, IsHookPin); err != nil || re {
		t.Fatalf("same namespace: reclaimed %v, %v", re, err)
	}
	if _, err := os.Stat(dir + "/tcx_ingress_5"); err != nil {
		t.Fatal("link pin removed for the namespace that owns it")
	}
	// Pretend another (deleted) namespace claimed it.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "netns-") {
			if err := os.Rename(dir+"/"+e.Name(), dir+"/netns-1-2"); err != nil {
				t.Fatal(err)
			}
		}
	}
	claimed(false)
	if re, err := ClaimPinDir(dir, IsHookPin); err != nil || !re {
		t.Fatalf("recreated namespace: reclaimed %v, %v", re, err)
	}
	claimed(true)
	var left []string
	ents, _ = os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	id, err := CurrentNetns()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fw_tcx_ingress_5", fmt.Sprintf("netns-%d-%d", id.Dev, id.Ino), "sids"}
	if strings.Join(left, " ") != strings.Join(want, " ") {
		t.Fatalf("left %v, want %v", left, want)
	}
}
