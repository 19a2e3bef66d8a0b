package e2e

import (
	"context"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"os"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/bench"
	"github.com/srchain/srchain/internal/netns"
)

// benchPrefix names this test process's bench namespaces.
func benchPrefix(t *testing.T, tag string) string {
	return fmt.Sprintf("srct-b%d%s", os.Getpid(), tag)
}

func benchSkipUnlessRoot(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
}

// benchNoLeftovers fails if any namespace with prefix survived.
func benchNoLeftovers(t *testing.T, prefix string) {
	t.Helper()
	left, err := netns.List(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
		for _, n := range left {
			_ = netns.Delete(n)
		}
	}
}

// TestBenchSmoke runs the smoke scenario for a fraction of a second per
// case: packets must be counted at the DUT and at the sink, agree, and
// the harness must remove everything it made. Not a timed assertion.
func TestBenchSmoke(t *testing.T) {
	benchSkipUnlessRoot(t)
	sc, err := bench.Lookup("smoke")
	if err != nil {
		t.Fatal(err)
	}
	prefix := benchPrefix(t, "s")
	t.Cleanup(func() { benchNoLeftovers(t, prefix) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A case whose set-up fails is reported in its point, not fatal.
	withBroken := *sc
	withBroken.Cases = append(append([]bench.Case(nil), sc.Cases...), bench.Case{Name: "broken",
		Setup: func(context.Context, *bench.DUT) error { return errors.New("deliberately broken") }})
	for _, mode := range []string{bench.ModeMax, bench.ModeLatency} {
		sc := sc
		if mode == bench.ModeMax {
			sc = &withBroken
		}
		o := bench.DefaultOptions()
		o.Mode, o.Rounds, o.Warmup, o.Duration, o.Prefix = mode, 1, 200*time.Millisecond, 500*time.Millisecond, prefix
		res, err := bench.Run(ctx, sc, o)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(res.Points) != len(sc.Cases) {
			t.Fatalf("%s: %d points for %d cases", mode, len(res.Points), len(sc.Cases))
		}
		for _, p := range res.Points {
			if p.Case == "broken" {
				if p.Err == "" || len(p.Rounds) != 0 {
					t.Errorf("broken case: error %q, %d rounds", p.Err, len(p.Rounds))
				}
				continue
			}
			if p.Err != "" || len(p.Rounds) != 1 {
				t.Errorf("%s/%s: error %q, %d rounds", mode, p.Case, p.Err, len(p.Rounds))
				continue
			}
			r := p.Rounds[0]
			if r.DUTTx == 0 || r.Sink == 0 || r.Offered == 0 {
				t.Errorf("%s/%s: offered %d, DUT tx %d, sink %d: want all counted", mode, p.Case, r.Offered, r.DUTTx, r.Sink)
			}
			// The sink's count cross-checks the DUT's tx counter; the
			// windows are read a few microseconds apart, so allow 5%,
			// and only in live runs (-tags bench): on a loaded machine
			// the reads can be further apart.
			if d := float64(r.Sink) - float64(r.DUTTx); benchLive && d*d > 0.0025*float64(r.DUTTx)*float64(r.DUTTx) {
				t.Errorf("%s/%s: sink %d vs DUT tx %d", mode, p.Case, r.Sink, r.DUTTx)
			}
			if mode == bench.ModeLatency && (r.LatN == 0 || r.LatP50 <= 0 || r.LatP99 < r.LatP50) {
				t.Errorf("%s: latency n=%d p50=%v p99=%v", p.Case, r.LatN, r.LatP50, r.LatP99)
			}
		}
		if p := res.Points[0]; p.Case != res.Baseline || p.Ratio != 1 {
			t.Errorf("%s: baseline %s ratio %v", mode, p.Case, p.Ratio)
		}
		dir := t.TempDir()
		if err := bench.WriteResult(dir, res); err != nil {
			t.Fatal(err)
		}
		benchNoLeftovers(t, prefix)
	}
}

// TestBenchCancelCleansUp cancels a run in its first measurement (as
// Ctrl-C does through signal.NotifyContext) and checks nothing remains.
func TestBenchCancelCleansUp(t *testing.T) {
	benchSkipUnlessRoot(t)
	sc, err := bench.Lookup("smoke")
	if err != nil {
		t.Fatal(err)
	}
	prefix := benchPrefix(t, "c")
	t.Cleanup(func() { benchNoLeftovers(t, prefix) })
	o := bench.DefaultOptions()
	o.Rounds, o.Warmup, o.Duration, o.Prefix = 5, time.Second, 10*time.Second, prefix
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the namespaces exist, mid-measurement.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if n, _ := netns.List(prefix); len(n) >= 3*len(sc.Cases) {
				time.Sleep(1500 * time.Millisecond)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	_, err = bench.Run(ctx, sc, o)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: err = %v, want context.Canceled", err)
	}
	benchNoLeftovers(t, prefix)
}

// TestBenchCleanupStale: namespaces of a dead run (killed with SIGKILL,
// no chance to clean) are removed by the next run; a live run's are kept.
func TestBenchCleanupStale(t *testing.T) {
	benchSkipUnlessRoot(t)
	prefix := benchPrefix(t, "z-")
	t.Cleanup(func() { benchNoLeftovers(t, prefix) })
	for _, n := range []string{prefix + "101-0-g", prefix + "202-0-g"} {
		ns, err := netns.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		ns.Close()
	}
	bench.CleanupStale(prefix, func(pid int) bool { return pid == 202 })
	left, err := netns.List(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != prefix+"202-0-g" {
		t.Errorf("after cleanup: %v, want only the live run's namespace", left)
	}
	if err := netns.Delete(prefix + "202-0-g"); err != nil {
		t.Error(err)
	}
}
