package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDashboard: examples/grafana-srchain.json is valid JSON, every
// metric its queries name is one the collector emits (a renamed metric
// breaks the test, not the dashboard), and every metric has a panel.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("../../examples/grafana-srchain.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-srchain.json: %v", err)
	}
	var queries []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries = append(queries, q.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		queries = append(queries, v.Definition)
	}
	names := New(Config{Node: "x"}).Names()
	used := map[string]bool{}
	metric := regexp.MustCompile(`srchain_[a-z_]+`)
	for _, q := range queries {
		for _, m := range metric.FindAllString(q, -1) {
			// A histogram's series: name_bucket, name_sum, name_count.
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(m, suf); ok && slices.Contains(names, base) {
					m = base
				}
			}
			used[m] = true
			if !slices.Contains(names, m) {
				t.Errorf("dashboard query %q names %s, which the collector does not emit", q, m)
			}
		}
	}
	for _, n := range names {
		if !used[n] {
			t.Errorf("no dashboard panel shows %s", n)
		}
	}
}
