package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

func TestValidateCommand(t *testing.T) {
	out, _, err := runCLI(t, "validate", "../../examples/quickstart.yaml")
	if err != nil || !strings.Contains(out, "ok (5 nodes") {
		t.Errorf("valid spec: out %q err %v", out, err)
	}
	_, stderr, err := runCLI(t, "validate", "../../examples/bad/unknown-refs.yaml")
	if !errors.Is(err, errInvalidSpec) {
		t.Errorf("bad spec: err %v", err)
	}
	if want := `unknown-refs.yaml:27:15: chains[0].nfs[1]: unknown NF "ids9"`; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if n := strings.Count(stderr, "\n"); n != 6 {
		t.Errorf("want 6 error lines, got %d:\n%s", n, stderr)
	}
}

// TestMissingSpecFile: a file that cannot be read is reported as such,
// not as an invalid spec.
func TestMissingSpecFile(t *testing.T) {
	const want = "read spec /nonexistent.yaml: no such file or directory"
	for _, args := range [][]string{
		{"plan", "/nonexistent.yaml"},
		{"validate", "/nonexistent.yaml"},
	} {
		_, stderr, err := runCLI(t, args...)
		if err == nil || err.Error() != want || errors.Is(err, errInvalidSpec) || stderr != "" {
			t.Errorf("srchain %s: err %v, stderr %q; want only %q", strings.Join(args, " "), err, stderr, want)
		}
	}
	_, stderr, err := runCLI(t, "validate", "/nonexistent.yaml", "../../examples/quickstart.yaml", "../../examples/bad/empty-chain.yaml")
	if err == nil || err.Error() != "1 of 3 specs could not be read; 1 of 3: invalid spec" || !strings.Contains(stderr, want) {
		t.Errorf("validate with a missing file: err %v, stderr %q", err, stderr)
	}
}

func TestPlanCommand(t *testing.T) {
	out, _, err := runCLI(t, "plan", "../../examples/quickstart.yaml", "--node", "r1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"node r1 (router)",
		"10.0.4.0/24 encap seg6 mode encap segs fc00:2::1:0,fc00:3::1:0 dev eth1  [chain web4]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runCLI(t, "plan", "../../examples/quickstart.yaml", "--node=", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var net state.Network
	if err := json.Unmarshal([]byte(out), &net); err != nil || len(net.Nodes) != 5 {
		t.Errorf("plan --json: %v, %d nodes", err, len(net.Nodes))
	}
	if _, _, err := runCLI(t, "plan", "../../examples/quickstart.yaml", "--node", "nope"); err == nil {
		t.Error("unknown node accepted")
	}
}

func TestSchemaCommand(t *testing.T) {
	out, _, err := runCLI(t, "schema")
	if err != nil || out != string(spec.Schema) {
		t.Errorf("schema: err %v, %d bytes", err, len(out))
	}
}
