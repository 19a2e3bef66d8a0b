package controller

import (
	"strings"
	"testing"
)

// TestTwentyThousandChainsAPI: the API takes the documented maximum,
// 20,000 chains of the benchmark's shape (benchChain), in one PATCH on
// top of the quickstart (issue 38 item 8: the spec decoder's fixed node
// bound refused them at ~18,170), and stores them all.
func TestTwentyThousandChainsAPI(t *testing.T) {
	e := newEnv(t)
	e.must("PUT", "/v1/spec", quickstart(t), nil)
	chains := make([]string, 20_000-2) // with quickstart's two
	for i := range chains {
		chains[i] = benchChain(i)
	}
	e.must("PATCH", "/v1/spec", `{"chains":[`+strings.Join(chains, ",")+`]}`, nil)
	var got struct {
		Chains []struct{ Name string } `json:"chains"`
	}
	e.must("GET", "/v1/spec", "", &got)
	if len(got.Chains) != 20_000 {
		t.Fatalf("%d chains stored, want 20000", len(got.Chains))
	}
}
