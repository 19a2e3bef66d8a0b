package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func benchChain(i int) string {
	return fmt.Sprintf(`{"name":"c%d","ingress":"r1","egress":"r3","match":{"dst":["fc00:a4::/64"],"proto":"udp","dport":"%d"},"nfs":["fw"]}`, i, 1000+i)
}

// BenchmarkSubmitChains submits 1,000 (and 10,000) chains on top of the quickstart
// topology through HTTP, validation, compilation and etcd:
//   - post-each: one POST per chain, as an orchestrator adding chains one
//     at a time; every write revalidates and recompiles the whole spec,
//     so a write costs O(chains stored) and the run O(n^2);
//   - one-patch-N: one PATCH /v1/spec carrying N chains (srchain apply):
//     one validation, one compile, one transaction.
//
// Results in docs/controller.md.
//
//	go test ./internal/controller/ -run '^$' -bench SubmitChains -benchtime 1x
func BenchmarkSubmitChains(b *testing.B) {
	const n = 1000
	b.Run("post-each", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			e := newEnv(b)
			e.must("PUT", "/v1/spec", quickstart(b), nil)
			b.StartTimer()
			start := time.Now()
			var last time.Duration
			for i := range n {
				t0 := time.Now()
				e.must("POST", "/v1/chains", benchChain(i), nil)
				last = time.Since(t0)
			}
			b.ReportMetric(time.Since(start).Seconds(), "s/1000chains")
			b.ReportMetric(float64(last.Microseconds())/1000, "ms/last-chain")
		}
	})
	for _, n := range []int{n, 10 * n} {
		b.Run(fmt.Sprintf("one-patch-%d", n), func(b *testing.B) { benchPatch(b, n) })
	}
}

// benchPatch submits n chains in one PATCH.
func benchPatch(b *testing.B, n int) {
	chains := make([]string, n)
	for i := range chains {
		chains[i] = benchChain(i)
	}
	body := `{"chains":[` + strings.Join(chains, ",") + `]}`
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		e.must("PUT", "/v1/spec", quickstart(b), nil)
		b.StartTimer()
		start := time.Now()
		e.must("PATCH", "/v1/spec", body, nil)
		b.ReportMetric(time.Since(start).Seconds(), "s/op")
	}
}

// BenchmarkChangeChain times one chain change (PUT /v1/chains/<c>: its
// match changes) with 10,000 chains stored: the controller's share of
// `srchain bench api`'s change time.
//
//	go test ./internal/controller/ -run '^$' -bench ChangeChain -benchtime 20x
func BenchmarkChangeChain(b *testing.B) {
	const n = 10000
	chains := make([]string, n)
	for i := range chains {
		chains[i] = benchChain(i)
	}
	e := newEnv(b)
	e.must("PUT", "/v1/spec", quickstart(b), nil)
	e.must("PATCH", "/v1/spec", `{"chains":[`+strings.Join(chains, ",")+`]}`, nil)
	b.ResetTimer()
	for i := range b.N {
		body := benchChain(7)
		if i%2 == 0 {
			body = strings.Replace(body, `"dport":"1007"`, `"dport":"60007"`, 1)
		}
		e.must("PUT", "/v1/chains/c7", body, nil)
	}
}
