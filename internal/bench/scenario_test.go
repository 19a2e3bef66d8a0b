package bench

import (
	"errors"
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
	if _, err := b.Select([]string{"nope"}); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("Select(nope) err = %v", err)
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
