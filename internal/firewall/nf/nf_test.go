package nf

import (
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/testutil"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/srv6"
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
	if cfg.Mode != firewall.Advanced || cfg.Policy != firewall.Drop || cfg.ArgsBits != 16 || cfg.Args[16] != firewall.SkipNext || len(cfg.Rules) != 2 ||
		cfg.SID != netip.MustParsePrefix("fc00:2::f1:0/112") {
		t.Errorf("config %+v", cfg)
	}
}

func TestSpecArgsErrors(t *testing.T) {
	var many strings.Builder
	many.WriteString("{")
	for i := 0; i < 257; i++ {
		if i > 0 {
			many.WriteString(", ")
		}
		many.WriteString(`"` + strconv.Itoa(i) + `": drop`)
	}
	many.WriteString("}")
	p := writeSpec(t, `    config:
      args_bits: 0
      args: `+many.String()+`
      rules:
        - "-j SEG6 --seg6-action eval-args"
`)
	_, err := spec.Load(p)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"eval-args with args_bits 0", "257 args values: at most 256"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseModeWraps(t *testing.T) {
	_, err := firewall.ParseMode("turbo")
	if !errors.Is(err, firewall.ErrSyntax) || !strings.Contains(err.Error(), "turbo") {
		t.Errorf("ParseMode: %v", err)
	}
}

func TestDefaultArgsNotShared(t *testing.T) {
	before := firewall.DefaultArgs[0]
	cfg := firewall.Config{}
	h1, err := cfg.Hash()
	if err != nil {
		t.Fatal(err)
	}
	_ = h1
	if cfg.Args != nil {
		t.Fatal("Hash changed its argument")
	}
	if firewall.DefaultArgs[0] != before {
		t.Fatal("DefaultArgs changed")
	}
}

// TestUpdatePinned: re-applying a changed rule set to a pinned firewall
// updates it in place (the hash tells), an unchanged one is left alone.
func TestUpdatePinned(t *testing.T) {
	testutil.RequireRoot(t)
	pin := fmt.Sprintf("/sys/fs/bpf/srct-f%d-nf", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(pin) })
	if err := os.MkdirAll(pin, 0o700); err != nil {
		t.Fatal(err)
	}
	parse := func(src string) firewall.Config {
		rules, err := firewall.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		return firewall.Config{Rules: rules, ArgsBits: 16}
	}
	a, b := parse("-p udp -j DROP"), parse("-p tcp -j DROP\n-s fc00::/16 -j ACCEPT")
	fw, err := firewall.LoadCapacity(a, firewall.Capacity{Bitmaps: 64, Prefixes: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	if err := fw.Pin(pin); err != nil {
		t.Fatal(err)
	}
	hashOf := func() [32]byte {
		pm, err := firewall.OpenPinned(pin)
		if err != nil {
			t.Fatal(err)
		}
		defer pm.Close()
		h, err := pm.Hash()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ha, _ := a.Hash()
	hb, _ := b.Hash()
	if hashOf() != ha || ha == hb {
		t.Fatal("loaded hash is not the config's")
	}
	if undo, err := updatePinned(pin, "t", a); err != nil || undo != nil {
		t.Fatalf("unchanged re-apply: undo %v, err %v", undo != nil, err)
	}
	undoB, err := updatePinned(pin, "t", b)
	if err != nil {
		t.Fatal(err)
	}
	if undoB == nil {
		t.Fatal("in-place update returned no undo")
	}
	if hashOf() != hb {
		t.Fatal("changed rule set not applied")
	}
	// The running program uses the new rules: UDP passes now.
	pkt := srv6.Ether(net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 1}, srv6.EtherTypeIPv6,
		srv6.UDP6(netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 1, 2, nil))
	ret, err := fw.Program().Run(&ebpf.RunOptions{Data: pkt})
	if err != nil {
		t.Fatal(err)
	}
	if ret == 2 {
		t.Fatal("old rule set still drops UDP")
	}
	// The undo restores the previous rule set (its generation is
	// intact): UDP dropped again, a's hash; a second undo is stale.
	if err := undoB(); err != nil {
		t.Fatal(err)
	}
	if ret, _ := fw.Program().Run(&ebpf.RunOptions{Data: pkt}); ret != 2 {
		t.Fatal("UDP not dropped after undoing the update")
	}
	if hashOf() != ha {
		t.Fatal("undo did not restore the previous rule set's hash")
	}
	if err := undoB(); !errors.Is(err, firewall.ErrStale) {
		t.Fatalf("second undo: %v, want ErrStale", err)
	}
	// Forward again, then back by a re-apply (the other generation,
	// cleared from the pins).
	if _, err := updatePinned(pin, "t", b); err != nil {
		t.Fatal(err)
	}
	if ret, _ := fw.Program().Run(&ebpf.RunOptions{Data: pkt}); ret == 2 {
		t.Fatal("UDP still dropped after re-applying the second rule set")
	}
	if _, err := updatePinned(pin, "t", a); err != nil {
		t.Fatal(err)
	}
	if ret, _ := fw.Program().Run(&ebpf.RunOptions{Data: pkt}); ret != 2 {
		t.Fatal("UDP not dropped after re-applying the first rule set")
	}
}
