package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srchain/srchain/internal/bench"
)

// TestBenchNoWarmup: with --warmup 0s the first snapshot must wait for
// the generator thread, and in round 2 it must read the new thread, not
// the previous round's: every round succeeds, and the generator's CPU
// time in a window is never more than the window (two threads' times
// mixed would be).
func TestBenchNoWarmup(t *testing.T) {
	benchSkipUnlessRoot(t)
	sc, err := bench.Lookup("smoke")
	if err != nil {
		t.Fatal(err)
	}
	prefix := benchPrefix(t, "w")
	t.Cleanup(func() { benchNoLeftovers(t, prefix) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := bench.DefaultOptions()
	o.Rounds, o.Warmup, o.Duration, o.Prefix = 2, 0, 300*time.Millisecond, prefix
	res, err := bench.Run(ctx, sc, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("warm-up 0: %v", err)
	}
	for _, p := range res.Points {
		if len(p.Rounds) != o.Rounds {
			t.Errorf("%s: %d rounds, want %d", p.Case, len(p.Rounds), o.Rounds)
		}
		for _, r := range p.Rounds {
			// The upper bound compares two clocks read at slightly
			// different times: checked only in live runs (-tags bench).
			if r.CPUSeconds <= 0 || (benchLive && r.CPUSeconds > r.Seconds*1.05) || r.DUTTx == 0 {
				t.Errorf("%s round %d: cpu %.3f s in a %.3f s window, DUT tx %d", p.Case, r.Round, r.CPUSeconds, r.Seconds, r.DUTTx)
			}
		}
	}
}

// TestBenchRoundFailure: a case whose rounds fail (here its frame cannot
// be built) is still attempted in every round, each failure recorded,
// while the other cases are measured; Result.Err reports it.
func TestBenchRoundFailure(t *testing.T) {
	benchSkipUnlessRoot(t)
	sc, err := bench.Lookup("smoke")
	if err != nil {
		t.Fatal(err)
	}
	prefix := benchPrefix(t, "f")
	t.Cleanup(func() { benchNoLeftovers(t, prefix) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bad := *sc
	bad.Cases = append(append([]bench.Case(nil), sc.Cases[:1]...), bench.Case{Name: "bad-frame",
		Frame: bench.FrameSpec{Inner4: true}}) // IPv4 without encap: not buildable
	o := bench.DefaultOptions()
	o.Rounds, o.Warmup, o.Duration, o.Prefix = 2, 0, 200*time.Millisecond, prefix
	res, err := bench.Run(ctx, &bad, o)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Points[0]; len(p.Rounds) != 2 || p.Err != "" {
		t.Errorf("%s: %d rounds, error %q", p.Case, len(p.Rounds), p.Err)
	}
	p := res.Points[1]
	if len(p.Rounds) != 0 || len(p.RoundErrors) != 2 || p.RoundErrors[1].Round != 1 {
		t.Errorf("bad-frame: %d rounds, round errors %+v: want both rounds attempted and failed", len(p.Rounds), p.RoundErrors)
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "bad-frame") {
		t.Errorf("Result.Err() = %v", err)
	}
}
