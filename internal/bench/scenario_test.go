package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	for _, sc := range Scenarios() {
		names := map[string]bool{}
		hasBase := false
		for _, c := range sc.Cases {
			if names[c.Name] {
				t.Errorf("%s: duplicate case %s", sc.Name, c.Name)
			}
			names[c.Name] = true
			hasBase = hasBase || c.Name == sc.Baseline
		}
		if !hasBase {
			t.Errorf("%s: baseline %q is not one of its cases", sc.Name, sc.Baseline)
		}
	}
	if _, err := Lookup("no-such"); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("Lookup err = %v", err)
	}
	b, err := Lookup("baseline")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := b.Select([]string{"end"})
	if err != nil || len(sel.Cases) != 2 || sel.Cases[0].Name != "plain" {
		t.Errorf("Select(end) = %+v, %v; want plain (baseline) and end", sel, err)
	}
	_, err = b.Select([]string{"nope"})
	if !errors.Is(err, ErrUnknownCase) || errors.Is(err, ErrUnknownScenario) ||
		!strings.Contains(err.Error(), "unknown case") || !strings.Contains(err.Error(), "valid: plain, end,") {
		t.Errorf("Select(nope) err = %v, want unknown case with the valid ones", err)
	}
}

// The rule-count cases follow seed 000's shape: n-1 rules that cannot
// match, the matching one last.
func TestNftForwardShape(t *testing.T) {
	s := nftForward(64, "ip6 daddr fc00:5::/64 accept")
	if got := strings.Count(s, " drop\n"); got != 63 {
		t.Errorf("%d non-matching rules, want 63", got)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if !strings.Contains(lines[len(lines)-3], "accept") {
		t.Errorf("matching rule is not last:\n%s", s)
	}
	if strings.Contains(s, "fc00:5::") && strings.Count(s, "fc00:5::") != 1 {
		t.Errorf("a non-matching rule names the traffic's prefix")
	}
	if strings.Count(nftForward(1, "x accept"), "drop") != 0 {
		t.Errorf("n=1 has non-matching rules")
	}
}

// Options that cannot run are refused before any namespace is built.
func TestRunRefusesBadOptions(t *testing.T) {
	sc, err := Lookup("smoke")
	if err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Options){
		"imix x 6 flows": func(o *Options) { o.IMIX, o.Flows = true, 6 },
		"65 flows":       func(o *Options) { o.Flows = 65 },
		"0 flows":        func(o *Options) { o.Flows = 0 },
		"negative flows": func(o *Options) { o.Flows = -1 },
		"huge size":      func(o *Options) { o.Sizes = []int{0, 9000} },
		"bad mode":       func(o *Options) { o.Mode = "fast" },
	} {
		o := DefaultOptions()
		o.Prefix = "srct-b-never"
		mod(&o)
		res, err := Run(context.Background(), sc, o)
		if !errors.Is(err, ErrBadOptions) || res != nil {
			t.Errorf("%s: Run = %v, %v; want ErrBadOptions", name, res, err)
		}
	}
	for name, mod := range map[string]func(*Options){
		"imix x 5 flows": func(o *Options) { o.IMIX, o.Flows = true, 5 },
		"64 flows":       func(o *Options) { o.Flows = 64 },
		"warmup 0":       func(o *Options) { o.Warmup = 0 },
		"sweep":          func(o *Options) { o.Sizes = SweepSizes() },
	} {
		o := DefaultOptions()
		mod(&o)
		if err := o.check(); err != nil {
			t.Errorf("%s: check = %v", name, err)
		}
	}
}

func TestDefaultLayout(t *testing.T) {
	for mode, want := range map[string]string{ModeMax: LayoutOne, ModeLatency: LayoutOne, ModePDR: LayoutTwo} {
		if got := DefaultLayout(mode); got != want {
			t.Errorf("DefaultLayout(%s) = %s, want %s", mode, got, want)
		}
	}
}

// TestGoalsNameCases: every goal of every scenario names two of its
// cases (a renamed case must not silently drop a goal from the reports).
func TestGoalsNameCases(t *testing.T) {
	for _, sc := range Scenarios() {
		for _, g := range sc.Goals {
			for _, n := range []string{g.Case, g.Base} {
				if !slices.ContainsFunc(sc.Cases, func(c Case) bool { return c.Name == n }) {
					t.Errorf("scenario %s: goal %s over %s names no case %q", sc.Name, g.Case, g.Base, n)
				}
			}
			if g.Min <= 0 {
				t.Errorf("scenario %s: goal %s over %s: min %v", sc.Name, g.Case, g.Base, g.Min)
			}
		}
	}
}
