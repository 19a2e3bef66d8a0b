package lab

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/srchain/srchain/internal/state"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadRefusesForeignNames: a record (possibly planted in a writable
// state dir) that names another lab or a namespace that is not
// src-<lab>_<node> is refused by Load, so Down never deletes what it
// names (before, Down ran RemoveAll on a pin path built from it).
func TestLoadRefusesForeignNames(t *testing.T) {
	for name, rec := range map[string]Record{
		"traversal": {Name: "lab1", Namespaces: map[string]string{"x": "../../../../tmp/victim"}},
		"other ns":  {Name: "lab1", Namespaces: map[string]string{"x": "src-other_x"}},
		"other lab": {Name: "lab2", Namespaces: map[string]string{"x": "src-lab2_x"}},
		"bad node":  {Name: "lab1", Namespaces: map[string]string{"../x": "src-lab1_../x"}},
	} {
		t.Run(name, func(t *testing.T) {
			opts := Options{StateDir: t.TempDir()}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(opts.StateDir, "lab1.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load("lab1", opts); !errors.Is(err, ErrBadName) {
				t.Errorf("Load = %v, want ErrBadName", err)
			}
			if err := Down(context.Background(), "lab1", opts); err == nil {
				t.Error("Down of a tampered record succeeded")
			}
		})
	}
	opts := Options{StateDir: t.TempDir()}
	b, _ := json.Marshal(Record{Name: "lab1", Namespaces: map[string]string{"x": NSName("lab1", "x")}})
	if err := os.WriteFile(filepath.Join(opts.StateDir, "lab1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("lab1", opts); err != nil && errors.Is(err, ErrBadName) {
		t.Errorf("a well-formed record is refused: %v", err)
	}
}

// TestReapplyWaitsForStateLock: `lab apply NAME` takes the state dir's
// lock, as `lab apply FILE` (Update) does, so it cannot re-apply a record
// that a concurrent update is replacing. While the test holds the lock,
// the record on disk is unusable (it names another lab); it is replaced
// by a good one before the lock is released. A Reapply that waits for
// the lock reads only the good record; one that does not may read the
// bad one and fail. No sleeps: correct code passes every time.
func TestReapplyWaitsForStateLock(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	path := filepath.Join(opts.StateDir, "lab1.json")
	write := func(name string) {
		t.Helper()
		b, _ := json.Marshal(Record{Name: name, Namespaces: map[string]string{},
			Network: &state.Network{Name: name, Version: state.FormatVersion}})
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("other")
	release, err := lockDir(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Reapply(context.Background(), "lab1", opts)
		done <- err
	}()
	write("lab1")
	release()
	if err := <-done; err != nil {
		t.Errorf("Reapply read the record while the state dir was locked: %v", err)
	}
}

// TestUpLockRefusesHardLink: an up lock that is a hard link to another
// file is refused and that file keeps its content (the lock would
// truncate it).
func TestUpLockRefusesHardLink(t *testing.T) {
	opts := Options{StateDir: t.TempDir()}
	victim := filepath.Join(opts.StateDir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, upLockPath(opts, "lab1")); err != nil {
		t.Fatal(err)
	}
	if release, err := lockUp(opts, "lab1"); err == nil {
		release()
		t.Error("lockUp took a hard-linked lock file")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Errorf("victim now holds %q", b)
	}
}
