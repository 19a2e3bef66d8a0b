package nf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/spec"
)

func writeSpec(t *testing.T, nfConfig string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "sera-firewall.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "    config:\n")
	j := strings.Index(s, "  - name: ids")
	s = s[:i] + nfConfig + s[j:]
	p := filepath.Join(t.TempDir(), "fw.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpecErrors(t *testing.T) {
	p := writeSpec(t, `    config:
      mode: turbo
      colour: red
      args: {"x": go-next, "1": eval-args}
      rules:
        - "-p udp --dport 9 -j DROP"
        - "-s fc00::/200 -j DROP"
      rules_file: missing.rules
`)
	_, err := spec.Load(p)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"mode \"turbo\"", "unknown firewall config key \"colour\"", "args key \"x\"", "eval-args", "nfs[0].config.rules[1]", "prefix length 200", "missing.rules"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// The rule error points into the YAML line: "fc00::/200" is column 4
	// of the rule, whose quoted scalar starts at column 11.
	if !strings.Contains(msg, ":59:15") {
		t.Errorf("rule error position:\n%s", msg)
	}
}

func TestCompileAndParams(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "extra.rules"), []byte("-m srh --srh-tag 7 -j DROP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := writeSpec(t, `    config:
      mode: advanced
      policy: drop
      args: {"0x10": skip-next}
      rules: ["-i eth12 -j ACCEPT"]
      rules_file: extra.rules
`)
	b, _ := os.ReadFile(p)
	p2 := filepath.Join(dir, "fw.yaml")
	if err := os.WriteFile(p2, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p2)
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	var params map[string]string
	for _, n := range net.Nodes {
		for _, pr := range n.Programs {
			if pr.Kind == Kind {
				params = pr.Params
				if len(pr.Interfaces) != 3 {
					t.Errorf("interfaces %v", pr.Interfaces)
				}
			}
		}
	}
	if params == nil {
		t.Fatal("no firewall program")
	}
	cfg, err := ConfigFromParams(params, func(string) (uint32, error) { return 5, nil })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != firewall.Advanced || cfg.Policy != firewall.Drop || cfg.ArgsBits != 16 || cfg.Args[16] != firewall.SkipNext || len(cfg.Rules) != 2 {
		t.Errorf("config %+v", cfg)
	}
}
