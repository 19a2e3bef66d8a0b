package firewall

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/firewall"
	_ "github.com/srchain/srchain/internal/kinds/end" // the example's forward NF
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
	"github.com/srchain/srchain/internal/testutil"
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

// firewallProgram compiles the spec at path and returns its firewall
// program.
func firewallProgram(t *testing.T, path string) state.Program {
	t.Helper()
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	net, err := compile.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range net.Nodes {
		for _, pr := range n.Programs {
			if pr.Kind == Name {
				return pr
			}
		}
	}
	t.Fatal("no firewall program")
	return state.Program{}
}

func TestCompileTyped(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "extra.rules"), []byte("-m srh --srh-tag 7 -j DROP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := writeSpec(t, `    config:
      mode: advanced
      policy: drop
      args: {"0x10": skip-next, "3": drop}
      rules: ["-i eth12 -j ACCEPT"]
      rules_file: extra.rules
`)
	b, _ := os.ReadFile(p)
	p2 := filepath.Join(dir, "fw.yaml")
	if err := os.WriteFile(p2, b, 0o644); err != nil {
		t.Fatal(err)
	}
	pr := firewallProgram(t, p2)
	if pr.NF != "sera" || len(pr.Interfaces) != 3 {
		t.Errorf("program %+v", pr)
	}
	want := `{"mode":"advanced","policy":"drop","args_bits":16,"sid":"fc00:2::f1:0/112",` +
		`"args":[{"value":3,"action":"drop"},{"value":16,"action":"skip-next"}],"rules":["-i eth12 -j ACCEPT"],` +
		`"rules_file":{"name":"extra.rules","text":"-m srh --srh-tag 7 -j DROP\n"}}`
	if string(pr.Config) != want {
		t.Errorf("config\n got %s\nwant %s", pr.Config, want)
	}
	cfg, err := ConfigFromProgram(pr, func(string) (uint32, error) { return 5, nil })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != firewall.Advanced || cfg.Policy != firewall.Drop || cfg.ArgsBits != 16 || cfg.Args[16] != firewall.SkipNext || len(cfg.Rules) != 2 ||
		cfg.SID != netip.MustParsePrefix("fc00:2::f1:0/112") {
		t.Errorf("config %+v", cfg)
	}
}

// TestArgsDuplicates: one ARGS value written three ways is refused at
// the later keys (it used to pass, and map order decided the action).
func TestArgsDuplicates(t *testing.T) {
	p := writeSpec(t, `    config:
      args_bits: 16
      args: {"16": go-next, "0x10": drop, "020": accept}
`)
	_, err := spec.Load(p)
	var got []string
	for _, fe := range spec.FieldErrors(err) {
		got = append(got, fe.Path+": "+fe.Msg)
	}
	want := []string{
		`nfs[0].config.args.0x10: args key "0x10": ARGS value 16 already given as "16"`,
		`nfs[0].config.args.020: args key "020": ARGS value 16 already given as "16"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors\n got %q\nwant %q", got, want)
	}
}

// TestCompileDeterministic: the same spec compiles to the same bytes,
// every time (args used to come from a map).
func TestCompileDeterministic(t *testing.T) {
	p := writeSpec(t, `    config:
      args_bits: 16
      args: {"9": drop, "0x10": skip-next, "2": go-last, "1": accept, "7": go-next, "5": reject}
`)
	first := firewallProgram(t, p)
	for range 20 {
		if again := firewallProgram(t, p); string(again.Config) != string(first.Config) {
			t.Fatalf("config changed between compiles:\n%s\n%s", first.Config, again.Config)
		}
	}
}

// TestAliases: YAML aliases in rules mean the anchored value, both for a
// whole list (rules: *x) and for one rule (- *r9), in validate and in the
// compiled state; an error inside aliased content is still reported.
func TestAliases(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "sera-firewall.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(b)
	i := strings.Index(base, "    config:\n")
	j := strings.Index(base, "  - name: ids")
	for _, c := range []struct {
		name, config string
		want         []string
		err          string
	}{
		{"list", `    config:
      args_bits: 16
      rules: &x ["-p udp --dport 9 -j DROP", "-p tcp -j ACCEPT"]
  - name: sera2
    kind: firewall
    node: nfv
    config:
      rules: *x
`, []string{"-p udp --dport 9 -j DROP", "-p tcp -j ACCEPT"}, ""},
		{"item", `    config:
      args_bits: 16
      rules: [&r9 "-p udp --dport 9 -j DROP"]
  - name: sera2
    kind: firewall
    node: nfv
    config:
      rules: ["-p tcp -j ACCEPT", *r9]
`, []string{"-p tcp -j ACCEPT", "-p udp --dport 9 -j DROP"}, ""},
		{"bad-list", `    config:
      rules: &bad ["-p udp --dport 99999 -j DROP"]
  - name: sera2
    kind: firewall
    node: nfv
    config:
      rules: *bad
`, nil, "nfs[1].config.rules[0]: rule: "},
		{"bad-item", `    config:
      rules: [&bad "-p udp --dport 99999 -j DROP"]
  - name: sera2
    kind: firewall
    node: nfv
    config:
      rules: [*bad]
`, nil, "nfs[1].config.rules[0]: rule: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "al.yaml")
			if err := os.WriteFile(p, []byte(base[:i]+c.config+base[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := spec.Load(p)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "99999") {
					t.Fatalf("load = %v, want an error about port 99999 at %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			net, err := compile.Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range net.Nodes {
				for _, pr := range n.Programs {
					if pr.NF != "sera2" {
						continue
					}
					prog, err := Decode(pr)
					if err != nil {
						t.Fatal(err)
					}
					if strings.Join(prog.Rules, "|") != strings.Join(c.want, "|") {
						t.Errorf("rules %q, want %q", prog.Rules, c.want)
					}
					return
				}
			}
			t.Fatal("no sera2 program")
		})
	}
}

// TestRulesFileInlined: rules_file is read relative to the spec file at
// compile time and its text is in the state: compiling from another
// directory gives the same state (it used to be resolved against the
// current directory at apply time).
func TestRulesFileInlined(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sera.rules"), []byte("-p icmpv6 -j DROP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(writeSpec(t, "    config:\n      rules_file: sera.rules\n"))
	spec := filepath.Join(dir, "fw.yaml")
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	first := firewallProgram(t, spec)
	// A decoy with the same name in the current directory is not read.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "sera.rules"), []byte("-j ACCEPT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(other)
	again := firewallProgram(t, spec)
	if string(first.Config) != string(again.Config) {
		t.Errorf("state depends on the current directory:\n%s\n%s", first.Config, again.Config)
	}
	prog, err := Decode(again)
	if err != nil {
		t.Fatal(err)
	}
	if prog.RulesFile == nil || prog.RulesFile.Text != "-p icmpv6 -j DROP\n" {
		t.Errorf("rules file not inlined: %+v", prog.RulesFile)
	}
	// The driver needs no file: the rules come from the state.
	os.Remove(filepath.Join(dir, "sera.rules"))
	cfg, err := ConfigFromProgram(again, nil)
	if err != nil || len(cfg.Rules) != 1 {
		t.Errorf("config from state = %d rules, %v", len(cfg.Rules), err)
	}
}

// TestRulesFileBounds: what rules_file may name is bounded: a device, a
// FIFO or a huge file is a clean error (not a hang, not out of memory),
// and a file that does not parse is reported by position without its
// text (it may be any readable file, e.g. a password hash).
func TestRulesFileBounds(t *testing.T) {
	dir := t.TempDir()
	secret := "$6$Zq8sEcReT$hashhashhash"
	if err := os.WriteFile(filepath.Join(dir, "shadow"), []byte("root:"+secret+":19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, spec.MaxFileSize+1)
	if err := os.WriteFile(filepath.Join(dir, "big.rules"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want, not string }{
		{"/dev/zero", "not a regular file", ""},
		{fifo, "not a regular file", ""},
		{dir, "not a regular file", ""},
		{"big.rules", "file too large", ""},
		{"shadow", "line 1 column 1: rule does not parse", "Zq8sEcReT"},
		{"missing.rules", "no such file", ""},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			b, _ := os.ReadFile(writeSpec(t, "    config:\n      rules_file: "+c.file+"\n"))
			p := filepath.Join(dir, "fw.yaml")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := spec.Load(p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("load = %v, want %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "nfs[0].config.rules_file") {
				t.Errorf("error lacks the field path: %v", err)
			}
			if c.not != "" && strings.Contains(err.Error(), c.not) {
				t.Errorf("error echoes the file's content: %v", err)
			}
		})
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

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// TestRulesAndFileTogether: validate checks the rule set the driver will
// load, the inline rules and the file as one text: each part may parse
// while the whole has more than firewall.MaxRules rules (it used to pass
// validate and plan and fail at apply).
func TestRulesAndFileTogether(t *testing.T) {
	dir := t.TempDir()
	var rules strings.Builder
	for i := 0; i < firewall.MaxRules; i++ {
		fmt.Fprintf(&rules, "-p udp --dport %d -j DROP\n", 1+i%60000)
	}
	if err := os.WriteFile(filepath.Join(dir, "many.rules"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		config string
		ok     bool
	}{
		{"    config:\n      rules_file: many.rules\n", true},
		{"    config:\n      rules: [\"-p tcp -j DROP\"]\n      rules_file: many.rules\n", false},
	} {
		b, _ := os.ReadFile(writeSpec(t, c.config))
		p := filepath.Join(dir, "fw.yaml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := spec.Load(p)
		switch {
		case c.ok && err != nil:
			t.Errorf("%d rules in the file alone: %v", firewall.MaxRules, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "too many rules")):
			t.Errorf("%d+1 rules: err = %v, want too many rules", firewall.MaxRules, err)
		}
	}
}

// TestRuleErrorNotCut: the parser's explanation reaches the user whole
// (it was cut at spec.MaxEcho bytes, losing the advice at its end), while
// a huge rule still gives a bounded message.
func TestRuleErrorNotCut(t *testing.T) {
	p := writeSpec(t, "    config:\n      rules: [\"-m srh --srh-segs-left-gt 0 --srh-segs-left-lt 3 -j DROP\"]\n")
	_, err := spec.Load(p)
	if err == nil || !strings.Contains(err.Error(), "its own -m srh") {
		t.Errorf("err = %v, want the parser's whole advice", err)
	}
	huge := "-p udp --dport " + strings.Repeat("9", 1<<20) + " -j DROP"
	p = writeSpec(t, "    config:\n      rules: [\""+huge+"\"]\n")
	_, err = spec.Load(p)
	if err == nil || len(err.Error()) > 4096 {
		t.Errorf("huge rule: %d-byte error", len(fmt.Sprint(err)))
	}
}
