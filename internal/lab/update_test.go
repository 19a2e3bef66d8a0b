package lab

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/state"
)

// TestUpdateOldFormat: a lab recorded in another state format cannot be
// checked (state.ErrVersion), and `lab apply FILE` is how it is brought
// back: Update applies the new state in full and records it.
func TestUpdateOldFormat(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	net := quickstart(t, "v")
	cleanup(t, net, opts)
	if _, err := Up(ctx, net, UpOptions{Options: opts}); err != nil {
		t.Fatal(err)
	}
	rec, err := Load(net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec.Network.Version = state.FormatVersion - 1
	if err := writeRecord(opts, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := Status(ctx, net.Name, opts); !errors.Is(err, state.ErrVersion) {
		t.Fatalf("status of an old-format lab = %v, want ErrVersion", err)
	}
	if _, err := Reapply(ctx, net.Name, opts); !errors.Is(err, state.ErrVersion) {
		t.Errorf("reapply of an old-format lab = %v, want ErrVersion", err)
	}
	changes, err := Update(ctx, net, UpOptions{Options: opts})
	if err != nil {
		t.Fatalf("update an old-format lab: %v", err)
	}
	for n, c := range changes {
		if c != 0 {
			t.Errorf("node %s: %d changes, want 0 (the lab is as the new state wants)", n, c)
		}
	}
	sts, err := Status(ctx, net.Name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if !s.OK() {
			t.Errorf("%s: %v", s.Node, s.Problems)
		}
	}
}
