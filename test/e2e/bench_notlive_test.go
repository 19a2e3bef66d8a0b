//go:build !bench

package e2e

// benchLive is false in the default test run: see bench_live_test.go.
const benchLive = false
