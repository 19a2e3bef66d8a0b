package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestControlSpec: the control benchmark's spec is valid at every size it
// is run with, and the changed spec differs in one chain's policy only.
func TestControlSpec(t *testing.T) {
	for _, n := range []int{1, 2, 100} {
		a, err := compileSpec(ControlSpec("cb", n, false), "cb.yaml")
		if err != nil {
			t.Fatalf("%d chains: %v", n, err)
		}
		b, err := compileSpec(ControlSpec("cb", n, true), "cb.yaml")
		if err != nil {
			t.Fatalf("%d chains, changed: %v", n, err)
		}
		changed := 0
		for i := range a.Nodes {
			if a.Nodes[i].Digest != b.Nodes[i].Digest {
				changed++
				if a.Nodes[i].Name != "r1" {
					t.Errorf("%d chains: node %s changed", n, a.Nodes[i].Name)
				}
			}
		}
		if changed != 1 {
			t.Errorf("%d chains: %d nodes changed, want r1 only", n, changed)
		}
	}
}

func TestRunControlOptions(t *testing.T) {
	for _, o := range []ControlOptions{
		{Chains: []int{10}, Rounds: 0, Lab: "x"},
		{Rounds: 1, Lab: "x"},
		{Chains: []int{10}, Rounds: 1},
		{Chains: []int{0}, Rounds: 1, Lab: "x"},
	} {
		if _, err := RunControl(context.Background(), o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("RunControl(%+v) = %v, want ErrBadOptions", o, err)
		}
	}
}

func TestWriteControl(t *testing.T) {
	var b bytes.Buffer
	pts := []ControlPoint{{Chains: 10, Step: StepUp, Rounds: []time.Duration{time.Second},
		Summary: Summary{N: 1, Median: 1.5, Min: 0.0005, Max: 0.25}}}
	if err := WriteControl(&b, pts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 10     | lab up | 1.50 s | 500 µs .. 250.0 ms | 1      |") {
		t.Errorf("table:\n%s", b.String())
	}
}
