package netfilter

import (
	"encoding/json"
	"errors"
	"github.com/srchain/srchain/internal/nft"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
)

// example returns examples/anf-testbed.yaml with the NF's config block
// replaced by config (and extra appended to the file, if any).
func example(t *testing.T, config string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "anf-testbed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "    config:\n")
	j := strings.Index(s, "chains:\n")
	if i < 0 || j < 0 {
		t.Fatal("example lacks the config block")
	}
	return s[:i] + config + s[j:]
}

func write(t *testing.T, text string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "anf.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"no config", "", []string{"nfs[0].config: netfilter needs a config with ruleset or ruleset_file"}},
		{"unknown key", "    config:\n      ruleset: \"chain c {}\"\n      colour: red\n", []string{`nfs[0].config.colour: unknown netfilter config key "colour"`}},
		{"both", "    config:\n      ruleset: \"chain c {}\"\n      ruleset_file: x.nft\n", []string{"nfs[0].config.ruleset_file: give ruleset or ruleset_file, not both"}},
		{"neither", "    config:\n      args_bits: 4\n", []string{"nfs[0].config: netfilter needs ruleset or ruleset_file"}},
		{"args_bits", "    config:\n      args_bits: 17\n      ruleset: \"chain c {}\"\n", []string{"nfs[0].config.args_bits: args_bits 17: want 0..16"}},
		{"missing file", "    config:\n      ruleset_file: missing.nft\n", []string{"nfs[0].config.ruleset_file: ruleset_file:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spec.Load(write(t, example(t, tc.config), nil))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestCheckInsertModeAndSecondNF: an insert-mode chain through the NF is
// accepted (docs/netfilter.md "Insert mode"); a second netfilter NF on
// the same node is refused.
func TestCheckInsertModeAndSecondNF(t *testing.T) {
	s := example(t, "    config:\n      ruleset: \"chain c {}\"\n")
	s = strings.Replace(s, "  - name: to-sink6           # IPv6 in IPv6: End.DT6 at egress\n    ingress: ingress\n    egress: egress\n    match: {dst: [\"fc00:a4::/64\"]}\n    nfs: [anf]\n",
		"  - name: to-sink6\n    ingress: ingress\n    egress: egress\n    match: {dst: [\"fc00:a4::/64\"]}\n    nfs: [anf]\n    mode: insert\n", 1)
	if !strings.Contains(s, "mode: insert") {
		t.Fatal("the example's to-sink6 chain changed; update this test")
	}
	if _, err := spec.Load(write(t, s, nil)); err != nil {
		t.Fatalf("insert-mode chain through the netfilter NF refused: %v", err)
	}
	s = strings.Replace(s, "chains:\n", "  - {name: anf2, kind: netfilter, node: nfv, config: {ruleset: \"chain d {}\"}}\nchains:\n", 1)
	_, err := spec.Load(write(t, s, nil))
	for _, w := range []string{`node "nfv" already has netfilter NF "anf"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "insert") {
		t.Errorf("insert mode still refused: %v", err)
	}
}

// TestCheckNftRejects: a ruleset nft rejects is a validate error with
// nft's message and the line in the spec (inline) or the file.
func TestCheckNftRejects(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "nft")
	inline := example(t, "    config:\n      ruleset: |\n        chain forward {\n          type filter hook forward priority filter;\n          tcp dport 22 frobnicate\n        }\n")
	_, err := spec.Load(write(t, inline, nil))
	fes := spec.FieldErrors(err)
	if len(fes) != 1 || !strings.Contains(fes[0].Msg, "ruleset line 3: nft: Error:") {
		t.Fatalf("errors %v, want one nft error at ruleset line 3", err)
	}
	// The literal block starts on the line after "ruleset: |".
	lines := strings.Split(inline, "\n")
	if got := lines[fes[0].Line-1]; !strings.Contains(got, "frobnicate") {
		t.Errorf("error at spec line %d (%q), want the frobnicate line", fes[0].Line, got)
	}
	file := example(t, "    config:\n      ruleset_file: bad.nft\n")
	_, err = spec.Load(write(t, file, map[string]string{"bad.nft": "chain c {\n  type filter hook input priority 0;\n  meta nonsense 1\n}\n"}))
	if err == nil || !strings.Contains(err.Error(), "ruleset_file line 3: nft: Error:") {
		t.Errorf("file: %v, want an nft error at file line 3", err)
	}
	good := example(t, "    config:\n      ruleset_file: good.nft\n")
	if _, err := spec.Load(write(t, good, map[string]string{"good.nft": "chain c {\n  type filter hook forward priority 0;\n  counter accept\n}\n"})); err != nil {
		t.Errorf("good ruleset file: %v", err)
	}
}

func TestCompile(t *testing.T) {
	p := write(t, example(t, "    config:\n      args_bits: 8\n      ruleset_file: r.nft\n"), map[string]string{"r.nft": "chain c {\n  type filter hook forward priority 0;\n}\n"})
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	var progs []state.Program
	var sid state.LocalSID
	for _, n := range net.Nodes {
		if n.Name != "nfv" {
			continue
		}
		progs = n.Programs
		for _, x := range n.SIDs {
			if x.NF == "anf" {
				sid = x
			}
		}
	}
	if len(progs) != 1 || progs[0].Kind != Name || strings.Join(progs[0].Interfaces, ",") != "eth0,eth1" {
		t.Fatalf("programs %+v, want one netfilter program on eth0,eth1", progs)
	}
	if sid.Datapath != state.Kernel || sid.Behavior != state.End || sid.SID.String() != "fc00:2::f1:0/112" {
		t.Errorf("SID %+v, want a kernel End route fc00:2::f1:0/112", sid)
	}
	prog, err := Decode(progs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := Program{ArgsBits: 8, SID: sid.SID, Ruleset: "chain c {\n  type filter hook forward priority 0;\n}\n", RulesetFile: "r.nft", RestoreMTU: 1600 - Overhead(2)}
	if prog != want {
		t.Errorf("program %+v, want %+v", prog, want)
	}
	// Deterministic bytes.
	net2, _ := compile.Compile(s)
	for i, n := range net.Nodes {
		a, _ := json.Marshal(n)
		b, _ := json.Marshal(net2.Nodes[i])
		if string(a) != string(b) {
			t.Errorf("node %s compiles to different bytes", n.Name)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"args_bits":17,"sid":"fc00::/112","ruleset":"x"}`, `{"sid":"fc00::/112","ruleset":" "}`, `[`} {
		_, err := Decode(state.Program{Kind: Name, NF: "n", Config: json.RawMessage(cfg)})
		if !errors.Is(err, ErrBadConfig) {
			t.Errorf("Decode(%s) = %v, want ErrBadConfig", cfg, err)
		}
	}
}

func TestTransaction(t *testing.T) {
	tx := Transaction("chain c {\n}")
	lines := strings.Split(tx, "\n")
	if lines[nft.Prologue] != "chain c {" {
		t.Errorf("ruleset starts at line %d of the transaction, want %d:\n%s", strings.Index(tx, "chain"), nft.Prologue+1, tx)
	}
	if !strings.HasPrefix(tx, "table inet "+Table+"\ndelete table inet "+Table+"\n") || !strings.Contains(tx, nft.Digest("chain c {\n}")) {
		t.Errorf("transaction:\n%s", tx)
	}
}
