package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// configProbe is a command with one flag of each kind the real commands
// use, so the table below covers every parsing path of applyConfig.
func configProbe() (*cobra.Command, *probeFlags) {
	var p probeFlags
	cmd := &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return nil }}
	f := cmd.Flags()
	f.StringVar(&p.node, "node", "", "")
	f.StringSliceVar(&p.eps, "etcd-endpoints", []string{"http://127.0.0.1:2379"}, "")
	f.DurationVar(&p.ttl, "lease-ttl", 10*time.Second, "")
	f.IntVar(&p.n, "http-max-conns", 64, "")
	f.BoolVar(&p.b, "insecure-etcd", false, "")
	return cmd, &p
}

type probeFlags struct {
	node string
	eps  []string
	ttl  time.Duration
	n    int
	b    bool
}

// TestApplyConfig: keys are the long flag names, values parse as the flag
// does, flags given on the command line win, and anything else is an
// error naming the key, the file and the line.
func TestApplyConfig(t *testing.T) {
	def := probeFlags{eps: []string{"http://127.0.0.1:2379"}, ttl: 10 * time.Second, n: 64}
	for _, tc := range []struct {
		name, yaml string
		args       []string
		want       probeFlags
		err        string // substring of the error ("": none)
	}{
		{name: "empty", yaml: "", want: def},
		{name: "comments only", yaml: "# node: r1\n# lease-ttl: 10s\n", want: def},
		{name: "every kind", yaml: "node: r1\netcd-endpoints: [https://a:2379, https://b:2379]\nlease-ttl: 15s\nhttp-max-conns: 8\ninsecure-etcd: true\n",
			want: probeFlags{node: "r1", eps: []string{"https://a:2379", "https://b:2379"}, ttl: 15 * time.Second, n: 8, b: true}},
		{name: "list as one value", yaml: "etcd-endpoints: https://a:2379,https://b:2379\n",
			want: probeFlags{eps: []string{"https://a:2379", "https://b:2379"}, ttl: def.ttl, n: def.n}},
		{name: "block list", yaml: "etcd-endpoints:\n  - https://a:2379\n", want: probeFlags{eps: []string{"https://a:2379"}, ttl: def.ttl, n: def.n}},
		{name: "command line wins", yaml: "node: r1\nlease-ttl: 15s\netcd-endpoints: [https://a:2379]\n",
			args: []string{"--node", "r2", "--etcd-endpoints", "https://c:2379"},
			want: probeFlags{node: "r2", eps: []string{"https://c:2379"}, ttl: 15 * time.Second, n: 64}},
		{name: "list item with comma", yaml: "etcd-endpoints: [\"a,b\"]\n", want: probeFlags{eps: []string{"a,b"}, ttl: def.ttl, n: def.n}},
		{name: "alias", yaml: "x-ttl: &t 20s\nlease-ttl: *t\n", err: `unknown key "x-ttl"`},
		{name: "empty string", yaml: "node: \"\"\n", want: def},
		{name: "unknown key", yaml: "node: r1\nnodes: r2\n", err: `line 2: unknown key "nodes"`},
		{name: "short name", yaml: "v: true\n", err: `unknown key "v"`},
		{name: "config key", yaml: "config: /etc/other.yaml\n", err: `unknown key "config"`},
		{name: "help key", yaml: "help: true\n", err: `unknown key "help"`},
		{name: "duplicate", yaml: "node: r1\nnode: r2\n", err: `line 2: key "node" given twice`},
		{name: "bad duration", yaml: "lease-ttl: soon\n", err: `line 1: key "lease-ttl"`},
		{name: "bad int", yaml: "http-max-conns: many\n", err: `key "http-max-conns"`},
		{name: "bad bool", yaml: "insecure-etcd: maybe\n", err: `key "insecure-etcd"`},
		{name: "null", yaml: "node:\n", err: `key "node": no value`},
		{name: "list for scalar", yaml: "node: [r1, r2]\n", err: `key "node" takes one value`},
		{name: "mapping value", yaml: "node: {a: 1}\n", err: `not a mapping`},
		{name: "not a mapping", yaml: "- node\n", err: "want a mapping"},
		{name: "bad yaml", yaml: "node: [r1\n", err: "parse config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, got := configProbe()
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			err := applyConfig(cmd.Flags(), "/etc/srchain/probe.yaml", []byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "/etc/srchain/probe.yaml") {
					t.Fatalf("error %v, want one naming the file and %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.node != tc.want.node || strings.Join(got.eps, " ") != strings.Join(tc.want.eps, " ") ||
				got.ttl != tc.want.ttl || got.n != tc.want.n || got.b != tc.want.b {
				t.Errorf("flags %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// TestApplyConfigUnknownIsSentinel: callers can tell a misspelt key.
func TestApplyConfigUnknownIsSentinel(t *testing.T) {
	cmd, _ := configProbe()
	if err := applyConfig(cmd.Flags(), "f.yaml", []byte("nodee: r1\n")); !errors.Is(err, errConfigKey) {
		t.Errorf("error %v is not errConfigKey", err)
	}
}

// TestConfigFlagOnCommand: through the real CLI, --config fills a
// required flag of agent (cobra checks required flags after the config is
// read) and the global log flags, and a missing --config file is an error.
func TestConfigFlagOnCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	// A bad node name fails in runAgent before any etcd or netns work,
	// showing the config's value got through.
	if err := os.WriteFile(cfg, []byte("node: bad/name\nlog-format: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, "agent", "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), `bad node name "bad/name"`) {
		t.Errorf("agent --config: %v, want the config's node", err)
	}
	// The command line wins over the file.
	_, _, err = runCLI(t, "agent", "--config", cfg, "--node", "bad/other")
	if err == nil || !strings.Contains(err.Error(), `"bad/other"`) {
		t.Errorf("agent --config --node: %v, want the flag's node", err)
	}
	_, _, err = runCLI(t, "agent", "--config", filepath.Join(dir, "nosuch.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nosuch.yaml") {
		t.Errorf("agent --config missing file: %v", err)
	}
	if err := os.WriteFile(cfg, []byte("node: r1\nresynk: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "agent", "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), `unknown key "resynk"`) || !strings.Contains(err.Error(), cfg) {
		t.Errorf("agent with a misspelt key: %v", err)
	}
}

// TestDefaultConfigFile: agent and serve read DIR/agent.yaml and
// DIR/serve.yaml of their environment's config directory when present;
// other commands and an absent file read nothing.
func TestDefaultConfigFile(t *testing.T) {
	dir := t.TempDir()
	runIn := func(args ...string) error {
		e, _, _ := testEnv(context.Background())
		e.configDir = dir
		root := newRootCmd(e)
		root.SetArgs(args)
		return root.ExecuteContext(e.ctx)
	}
	// No file: agent fails on its required flag as before.
	if err := runIn("agent"); err == nil || !strings.Contains(err.Error(), `"node" not set`) {
		t.Errorf("agent without config: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("node: bad/name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runIn("agent"); err == nil || !strings.Contains(err.Error(), `bad node name "bad/name"`) {
		t.Errorf("agent with DIR/agent.yaml: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "serve.yaml"), []byte("listen-typo: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runIn("serve"); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "serve.yaml")) {
		t.Errorf("serve with DIR/serve.yaml: %v", err)
	}
	if err := runIn("version"); err != nil {
		t.Errorf("version reads a config file: %v", err)
	}
}

// TestPackagedConfigs: the conffiles the .deb ships (packaging/etc) list
// every flag of their command, commented out with its default; with the
// comment marks removed they load without error. A flag added, renamed or
// given a new default without the file following fails here.
func TestPackagedConfigs(t *testing.T) {
	for _, name := range []string{"agent", "serve"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "..", "packaging", "etc", name+".yaml")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var uncommented bytes.Buffer
			keys := map[string]string{}
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), ": "); ok && strings.HasPrefix(line, "# ") &&
					configKey.MatchString(k) {
					keys[k] = v
					uncommented.WriteString(k + ": " + v + "\n")
				} else if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
					t.Errorf("%s: line %q sets a value: the shipped file keeps every default commented", path, line)
				}
			}
			cmd, _, err := newRootCmd(&env{}).Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			cmd.InheritedFlags() // merges the root's persistent flags into Flags()
			fset := cmd.Flags()
			for _, f := range flagNames(cmd) {
				if _, ok := keys[f]; !ok {
					t.Errorf("%s lacks flag %q", path, f)
				}
			}
			if err := applyConfig(fset, path, uncommented.Bytes()); err != nil {
				t.Fatalf("uncommented defaults: %v", err)
			}
			for k, v := range keys {
				f := fset.Lookup(k)
				if f == nil {
					continue
				}
				if def := configDefault(f.DefValue, f.Value.Type()); def != v && k != "node" {
					t.Errorf("%s: %s: %s, but the flag's default is %s", path, k, v, def)
				}
			}
		})
	}
}

// configKey is what a key line of the shipped files starts with.
var configKey = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// flagNames are the flags of cmd a config file may set.
func flagNames(cmd *cobra.Command) []string {
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !notInConfig[f.Name] && !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return names
}

// configDefault writes a flag's default as the shipped files do: YAML
// lists for list flags, quoted strings (JSON quoting is valid YAML).
func configDefault(def, typ string) string {
	switch {
	case strings.HasSuffix(typ, "Slice") || strings.HasSuffix(typ, "Array"):
		items := strings.Split(strings.Trim(def, "[]"), ",")
		if def == "[]" {
			items = nil
		}
		for i, it := range items {
			b, _ := json.Marshal(it)
			items[i] = string(b)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case typ == "string":
		b, _ := json.Marshal(def)
		return string(b)
	}
	return def
}

// FuzzApplyConfig: no input panics, and every error names the file (an
// operator must know which file to fix).
func FuzzApplyConfig(f *testing.F) {
	for _, s := range []string{"", "node: r1\n", "etcd-endpoints: [a, b]\nlease-ttl: 1s\n", "a: &x 1\nb: *x\n",
		"node: [r1\n", "- 1\n", "node: {a: 1}\n", "? [a]\n: 1\n", "node: !!binary aGk=\n", "<<: {node: r1}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		cmd, _ := configProbe()
		if err := applyConfig(cmd.Flags(), "/etc/srchain/f.yaml", []byte(data)); err != nil && !strings.Contains(err.Error(), "/etc/srchain/f.yaml") {
			t.Errorf("error %q does not name the file", err)
		}
	})
}

// TestConfigDevNull: `--config /dev/null` (what lab agents get) reads no
// keys and no default file.
func TestConfigDevNull(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("node: bad/name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, _, _ := testEnv(context.Background())
	e.configDir = dir
	root := newRootCmd(e)
	root.SetArgs([]string{"agent", "--config", os.DevNull})
	if err := root.ExecuteContext(e.ctx); err == nil || !strings.Contains(err.Error(), `"node" not set`) {
		t.Errorf("agent --config /dev/null with DIR/agent.yaml present: %v", err)
	}
}
