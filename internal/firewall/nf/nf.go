// Package nf plugs the SERA firewall (internal/firewall) into srchain as
// the NF kind "firewall": the spec's config check, the compiler's program
// (state.Program{Kind: "firewall"}) and the applier's ProgramDriver.
// Import it for its side effects.
//
// Spec:
//
//	nfs:
//	  - name: sera
//	    kind: firewall
//	    node: nfv
//	    config:
//	      mode: basic            # basic | advanced (switchable at run time)
//	      policy: accept         # when no rule matches: accept | drop
//	      args_bits: 16          # eval-args ARGS length; default sid_format.args_bits
//	      args: {"0": go-next, "1": skip-next, "2": go-last, "3": drop, "4": accept}
//	      rules:                 # iptables syntax, first match
//	        - "-p udp --dport 9 -j DROP"
//	      rules_file: sera.rules # or: a file (relative to the spec), appended
package nf

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/srchain/srchain/internal/apply"
	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Kind is the NF kind and the state.Program kind.
const Kind = "firewall"

// ErrBadParams: a state.Program whose params do not describe a firewall.
var ErrBadParams = errors.New("bad firewall program params")

func init() {
	spec.RegisterKind(Kind, check)
	compile.RegisterKind(Kind, compileNF)
	apply.Register(Kind, driver{})
}

// Config is an NF's config section.
type Config struct {
	Mode      string            `yaml:"mode"`
	Policy    string            `yaml:"policy"`
	ArgsBits  *int              `yaml:"args_bits"`
	Args      map[string]string `yaml:"args"` // ARGS value (decimal or 0x hex) -> action
	Rules     []string          `yaml:"rules"`
	RulesFile string            `yaml:"rules_file"`
}

var knownKeys = map[string]bool{"mode": true, "policy": true, "args_bits": true, "args": true, "rules": true, "rules_file": true}

// rulesPath resolves rules_file against the spec's directory.
func rulesPath(s *spec.Spec, f string) string {
	if f == "" || filepath.IsAbs(f) || s.File == "" {
		return f
	}
	return filepath.Join(filepath.Dir(s.File), f)
}

// check validates an NF's config: keys, mode, policy, args and every rule
// (rules_file is read here so its errors show up with the spec's).
func check(s *spec.Spec, nf *spec.NF, path string) []error {
	node := &nf.Config
	if node.Kind == 0 {
		return nil // no config: basic mode, no rules, accept
	}
	if node.Kind != yaml.MappingNode {
		return []error{s.ErrorAt(path, node, "firewall config must be a mapping")}
	}
	var errs []error
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		if !knownKeys[k.Value] {
			errs = append(errs, s.ErrorAt(path+"."+k.Value, k, "unknown firewall config key %q (want mode, policy, args_bits, args, rules, rules_file)", k.Value))
		}
	}
	var c Config
	if err := node.Decode(&c); err != nil {
		return append(errs, s.ErrorAt(path, node, "decode firewall config: %v", err))
	}
	if _, err := firewall.ParseMode(c.Mode); err != nil {
		errs = append(errs, s.ErrorAt(path+".mode", valueNode(node, "mode"), "mode %q: want basic or advanced", c.Mode))
	}
	if c.Policy != "" && c.Policy != "accept" && c.Policy != "drop" {
		errs = append(errs, s.ErrorAt(path+".policy", valueNode(node, "policy"), "policy %q: want accept or drop", c.Policy))
	}
	if c.ArgsBits != nil && (*c.ArgsBits < 0 || *c.ArgsBits > 64) {
		errs = append(errs, s.ErrorAt(path+".args_bits", valueNode(node, "args_bits"), "args_bits %d: want 0..64", *c.ArgsBits))
	}
	for k, v := range c.Args {
		if _, err := strconv.ParseUint(k, 0, 64); err != nil {
			errs = append(errs, s.ErrorAt(path+".args."+k, valueNode(node, "args"), "args key %q: want a number", k))
		}
		if vd, err := firewall.ParseVerdict(v); err != nil || vd == firewall.EvalArgs {
			errs = append(errs, s.ErrorAt(path+".args."+k, valueNode(node, "args"), "args %s: %q is not accept, drop, reject, go-next, skip-next or go-last", k, v))
		}
	}
	if len(c.Args) > firewall.MaxArgs {
		errs = append(errs, s.ErrorAt(path+".args", valueNode(node, "args"), "%d args values: at most %d", len(c.Args), firewall.MaxArgs))
	}
	bits := s.SIDFormat.ArgsBits
	if c.ArgsBits != nil {
		bits = *c.ArgsBits
	}
	evalArgs := func(rules []firewall.Rule) bool {
		for _, r := range rules {
			if r.Verdict == firewall.EvalArgs {
				return true
			}
		}
		return false
	}
	evalAt := ""
	if rn := valueNode(node, "rules"); rn != nil {
		for i, item := range rn.Content {
			if rs, err := firewall.Parse(item.Value); err == nil && evalArgs(rs) && evalAt == "" {
				evalAt = fmt.Sprintf("%s.rules[%d]", path, i)
			}
		}
	}
	if evalAt != "" && bits == 0 {
		errs = append(errs, s.ErrorAt(evalAt, valueNode(node, "rules"), "eval-args with args_bits 0: the SID has no ARGS (set args_bits or sid_format.args_bits)"))
	}
	if rn := valueNode(node, "rules"); rn != nil {
		for i, item := range rn.Content {
			if _, err := firewall.Parse(item.Value); err != nil {
				for _, e := range unjoin(err) {
					errs = append(errs, ruleError(s, fmt.Sprintf("%s.rules[%d]", path, i), item, e))
				}
			}
		}
	}
	if c.RulesFile != "" {
		p := rulesPath(s, c.RulesFile)
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, s.ErrorAt(path+".rules_file", valueNode(node, "rules_file"), "read rules file: %v", err))
		} else if rs, err := firewall.Parse(string(b)); err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, s.ErrorAt(path+".rules_file", valueNode(node, "rules_file"), "%s:%v", p, e))
			}
		} else if evalAt == "" && bits == 0 && evalArgs(rs) {
			errs = append(errs, s.ErrorAt(path+".rules_file", valueNode(node, "rules_file"), "%s: eval-args with args_bits 0: the SID has no ARGS", p))
		}
	}
	return errs
}

// ruleError places a rule's parse error at its column inside the YAML
// scalar (exact for plain and quoted one-line scalars).
func ruleError(s *spec.Spec, path string, item *yaml.Node, err error) error {
	fe := s.ErrorAt(path, item, "rule: %v", err)
	var pe *firewall.ParseError
	if errors.As(err, &pe) {
		fe = s.ErrorAt(path, item, "rule: %s", pe.Msg)
		fe.Line = item.Line + pe.Line - 1
		if pe.Line == 1 {
			off := 0
			if item.Style == yaml.DoubleQuotedStyle || item.Style == yaml.SingleQuotedStyle {
				off = 1
			}
			fe.Col = item.Column + off + pe.Col - 1
		}
	}
	return fe
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func valueNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// compileNF adds the firewall program to the NF's node, on every
// interface (SR traffic to the SID and the node's other traffic alike:
// basic mode filters non-SR traffic as a plain firewall, seed 000 IV.A).
func compileNF(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error {
	var c Config
	if nf.Config.Kind != 0 {
		if err := nf.Config.Decode(&c); err != nil {
			return fmt.Errorf("decode firewall config: %w", err)
		}
	}
	params := map[string]string{"nf": nf.Name, "mode": c.Mode, "policy": c.Policy}
	if params["mode"] == "" {
		params["mode"] = "basic"
	}
	if params["policy"] == "" {
		params["policy"] = "accept"
	}
	bits := s.SIDFormat.ArgsBits
	if c.ArgsBits != nil {
		bits = *c.ArgsBits
	}
	params["args_bits"] = strconv.Itoa(bits)
	if sid != nil && sid.SID.IsValid() {
		// SR actions only for packets to the NF's SID (its prefix
		// without the ARGS bits).
		params["sid"] = sid.SID.Masked().String()
	}
	if len(c.Args) > 0 {
		byVal := map[uint64]string{}
		var keys []uint64
		for k, v := range c.Args {
			n, err := strconv.ParseUint(k, 0, 64)
			if err != nil {
				return fmt.Errorf("firewall args key %q: %w", k, ErrBadParams)
			}
			byVal[n] = v
			keys = append(keys, n)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%d=%s", k, byVal[k]))
		}
		params["args"] = strings.Join(parts, ",")
	}
	if len(c.Rules) > 0 {
		params["rules"] = strings.Join(c.Rules, "\n")
	}
	if c.RulesFile != "" {
		params["rules_file"] = rulesPath(s, c.RulesFile)
	}
	var ifs []string
	for _, i := range node.Interfaces {
		ifs = append(ifs, i.Name)
	}
	sort.Strings(ifs)
	node.Programs = append(node.Programs, state.Program{Kind: Kind, Interfaces: ifs, Params: params})
	return nil
}

// ConfigFromParams rebuilds a firewall.Config from a program's params
// (reading rules_file); ifindex resolves -i/-o names.
func ConfigFromParams(p map[string]string, ifindex func(string) (uint32, error)) (firewall.Config, error) {
	var cfg firewall.Config
	var err error
	if cfg.Mode, err = firewall.ParseMode(p["mode"]); err != nil {
		return cfg, fmt.Errorf("mode %q: %w", p["mode"], ErrBadParams)
	}
	switch p["policy"] {
	case "", "accept":
		cfg.Policy = firewall.Accept
	case "drop":
		cfg.Policy = firewall.Drop
	default:
		return cfg, fmt.Errorf("policy %q: %w", p["policy"], ErrBadParams)
	}
	if b := p["args_bits"]; b != "" {
		if cfg.ArgsBits, err = strconv.Atoi(b); err != nil {
			return cfg, fmt.Errorf("args_bits %q: %w", b, ErrBadParams)
		}
	}
	if sp := p["sid"]; sp != "" {
		if cfg.SID, err = netip.ParsePrefix(sp); err != nil {
			return cfg, fmt.Errorf("sid %q: %w", sp, ErrBadParams)
		}
	}
	if a := p["args"]; a != "" {
		cfg.Args = map[uint64]firewall.Verdict{}
		for _, kv := range strings.Split(a, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, err1 := strconv.ParseUint(k, 10, 64)
			vd, err2 := firewall.ParseVerdict(v)
			if err1 != nil || err2 != nil {
				return cfg, fmt.Errorf("args %q: %w", kv, ErrBadParams)
			}
			cfg.Args[n] = vd
		}
	}
	src := p["rules"]
	if f := p["rules_file"]; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cfg, fmt.Errorf("read rules file: %w", err)
		}
		src += "\n" + string(b)
	}
	rules, err := firewall.Parse(src)
	if err != nil {
		return cfg, fmt.Errorf("parse rules: %w", err)
	}
	if cfg.Rules, err = firewall.Resolve(rules, ifindex); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// PinDir is where the driver pins an NF's links and maps in a namespace.
func PinDir(ns *netns.NS, nf string) string { return apply.PinDir(ns) + "/fw-" + nf }

type driver struct{}

// Apply loads the firewall, attaches it at the head of the interfaces'
// tcx ingress and pins links and counters under PinDir (the lab CLI
// exits after `lab up`). Already pinned means already applied: no change.
func (driver) Apply(ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	name := p.Params["nf"]
	if name == "" {
		return nil, fmt.Errorf("program without nf name: %w", ErrBadParams)
	}
	pin := PinDir(ns, name)
	cfg, err := ConfigFromParams(p.Params, nsIfindex(ns))
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	if _, err := os.Stat(pin); err == nil {
		// Already applied: update the rule set in place (atomically)
		// if it changed; the undo steers back to the previous one.
		return updatePinned(pin, name, cfg)
	}
	// Room for later rule sets (Update does not grow the maps).
	room := 512 + 4*len(cfg.Rules)
	fw, err := firewall.LoadCapacity(cfg, firewall.Capacity{Bitmaps: room, Prefixes: room})
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	defer fw.Close() // the pins keep what must survive
	undo := func() error { return os.RemoveAll(pin) }
	if err := os.MkdirAll(pin, 0o700); err != nil {
		return nil, fmt.Errorf("firewall %s: create pin dir: %w", name, err)
	}
	for _, ifn := range p.Interfaces {
		l, err := ns.Netlink().LinkByName(ifn)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: find interface %s: %w", name, ifn, err), undo())
		}
		idx := l.Attrs().Index
		if err := ns.Do(func() error { return fw.Attach(idx) }); err != nil {
			return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
		}
	}
	if err := fw.Pin(pin); err != nil {
		return nil, errors.Join(fmt.Errorf("firewall %s: %w", name, err), undo())
	}
	return undo, nil
}

func nsIfindex(ns *netns.NS) func(string) (uint32, error) {
	return func(n string) (uint32, error) {
		l, err := ns.Netlink().LinkByName(n)
		if err != nil {
			return 0, err
		}
		return uint32(l.Attrs().Index), nil
	}
}

// updatePinned replaces a pinned firewall's rule set with cfg unless its
// hash shows it already runs; the mode switched at run time is kept. The
// undo (nil when nothing changed) flips fw_gen back to the previous rule
// set, still intact in the other generation; it fails with
// firewall.ErrStale if another Update came in between.
func updatePinned(pin, name string, cfg firewall.Config) (func() error, error) {
	want, err := cfg.Hash()
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	pm, err := firewall.OpenPinned(pin)
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	have, herr := pm.Hash()
	mode, _, merr := pm.Mode()
	pm.Close()
	if herr == nil && have == want {
		return nil, nil
	}
	if merr == nil {
		cfg.Mode = mode
	}
	fw, err := firewall.OpenPinnedFirewall(pin, cfg.Rules)
	if err != nil {
		return nil, fmt.Errorf("firewall %s: %w", name, err)
	}
	defer fw.Close()
	if err := fw.Update(cfg); err != nil {
		return nil, fmt.Errorf("firewall %s: %w (remove the pins to reload)", name, err)
	}
	gen := fw.Gen()
	return func() error {
		if err := firewall.RevertPinned(pin, gen); err != nil {
			return fmt.Errorf("firewall %s: %w", name, err)
		}
		return nil
	}, nil
}

// ProgramName is the kernel name of the tc program the driver attaches
// (apply.ProgramNamer), so status requires this program on p.Interfaces.
func (driver) ProgramName(state.Program) string { return "srchain_fw" }

// Check reports what of the firewall is missing on the node without
// changing anything (apply.ProgramChecker): its pins, a link per
// interface, and a rule count that differs from the desired rules.
func (driver) Check(ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	name := p.Params["nf"]
	pin := PinDir(ns, name)
	if _, err := os.Stat(pin); err != nil {
		return []string{"firewall " + name + " not pinned at " + pin}, nil
	}
	var missing []string
	for _, ifn := range p.Interfaces {
		l, err := ns.Netlink().LinkByName(ifn)
		if err != nil {
			missing = append(missing, "firewall "+name+": no interface "+ifn)
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("%s/fw_tcx_ingress_%d", pin, l.Attrs().Index)); err != nil {
			missing = append(missing, "firewall "+name+": no link on "+ifn)
		}
	}
	pm, err := firewall.OpenPinned(pin)
	if err != nil {
		return append(missing, "firewall "+name+": "+err.Error()), nil
	}
	defer pm.Close()
	_, n, err := pm.Mode()
	if err != nil {
		return nil, err
	}
	cfg, err := ConfigFromParams(p.Params, nsIfindex(ns))
	if err != nil {
		return append(missing, fmt.Sprintf("firewall %s: %v", name, err)), nil
	}
	if len(cfg.Rules) != n {
		missing = append(missing, fmt.Sprintf("firewall %s: %d rules loaded, %d desired", name, n, len(cfg.Rules)))
	} else if want, err := cfg.Hash(); err != nil {
		missing = append(missing, fmt.Sprintf("firewall %s: %v", name, err))
	} else if have, err := pm.Hash(); err != nil || have != want {
		missing = append(missing, fmt.Sprintf("firewall %s: loaded rule set differs from the desired one", name))
	}
	return missing, nil
}
