// Package firewall is the NF kind "firewall": the SERA SR-aware firewall
// (seed 000, internal/firewall) as an NF. It checks the NF's config,
// compiles it to a typed program config (Program, rules_file inlined), and
// provides the driver of program kind "firewall".
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
package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Name is the NF kind and the state.Program kind.
const Name = "firewall"

// ErrBadConfig: a state.Program whose config does not describe a firewall.
var ErrBadConfig = errors.New("bad firewall program config")

func init() { kind.Register(Kind{}) }

// Kind is the firewall kind.
type Kind struct{}

// Name implements kind.Kind.
func (Kind) Name() string { return Name }

// IgnoresChains: the kind's check and compile read no chain
// (kind.ChainBlind).
func (Kind) IgnoresChains() bool { return true }

// Drivers: the firewall program.
func (Kind) Drivers() map[string]kind.Driver { return map[string]kind.Driver{Name: driver{}} }

// Config is an NF's config section.
type Config struct {
	Mode      string            `yaml:"mode"`
	Policy    string            `yaml:"policy"`
	ArgsBits  *int              `yaml:"args_bits"`
	Args      map[string]string `yaml:"args"` // ARGS value (decimal, 0x hex, 0 octal) -> action
	Rules     []string          `yaml:"rules"`
	RulesFile string            `yaml:"rules_file"`
}

// Program is the typed config of a firewall program in the desired state
// (state.Program.Config): everything the driver needs, the rules file
// inlined, lists sorted, so the same spec gives the same bytes.
type Program struct {
	Mode     string `json:"mode"`
	Policy   string `json:"policy"`
	ArgsBits int    `json:"args_bits"`
	// SID is the NF's SID prefix (without ARGS): SR actions apply only
	// to packets to it.
	SID netip.Prefix `json:"sid,omitzero"`
	// Args is the eval-args table, sorted by Value; empty: the default.
	Args []Arg `json:"args,omitempty"`
	// Rules are the spec's rules in order.
	Rules []string `json:"rules,omitempty"`
	// RulesFile is the rules_file, read at compile time, appended to Rules.
	RulesFile *File `json:"rules_file,omitempty"`
}

// Arg is one eval-args entry: an ARGS value and its action.
type Arg struct {
	Value  uint64 `json:"value"`
	Action string `json:"action"`
}

// File is a file the spec names, inlined.
type File struct {
	// Name is the name as the spec gives it (for display only: nothing
	// reads it again).
	Name string `json:"name"`
	Text string `json:"text"`
}

var knownKeys = map[string]bool{"mode": true, "policy": true, "args_bits": true, "args": true, "rules": true, "rules_file": true}

// Check validates an NF's config: keys, mode, policy, args and every rule
// (rules_file is read here, through s.ReadFile, so its errors show up
// with the spec's; they name the file and the position but never echo
// its text).
func (Kind) Check(s *spec.Spec, nf *spec.NF, path string) []error {
	node := &nf.Config
	if !nf.HasConfig() {
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
	_, argErrs := parseArgs(s, valueNode(node, "args"), path+".args")
	errs = append(errs, argErrs...)
	bits := s.SIDFormat.ArgsBits
	if c.ArgsBits != nil {
		bits = *c.ArgsBits
	}
	evalArgs := func(rules []firewall.Rule) bool {
		return slices.ContainsFunc(rules, func(r firewall.Rule) bool { return r.Verdict == firewall.EvalArgs })
	}
	evalAt := ""
	// The driver parses the rules and the file as one text (Program.Source):
	// once each part parses, the whole must too (a rule count over
	// firewall.MaxRules, or an inline rule ending in a backslash that
	// would run into the next one).
	partsOK := len(errs) == 0
	var whole []string
	if rn := valueNode(node, "rules"); rn != nil {
		for i, item := range rn.Content {
			whole = append(whole, item.Value)
			rs, err := firewall.Parse(item.Value)
			if err != nil {
				partsOK = false
				for _, e := range unjoin(err) {
					errs = append(errs, ruleError(s, fmt.Sprintf("%s.rules[%d]", path, i), item, e))
				}
			} else if evalArgs(rs) && evalAt == "" {
				evalAt = fmt.Sprintf("%s.rules[%d]", path, i)
			}
		}
	}
	if evalAt != "" && bits == 0 {
		errs = append(errs, s.ErrorAt(evalAt, valueNode(node, "rules"), "eval-args with args_bits 0: the SID has no ARGS (set args_bits or sid_format.args_bits)"))
	}
	if c.RulesFile != "" {
		at := valueNode(node, "rules_file")
		b, err := s.ReadFile(c.RulesFile)
		whole = append(whole, string(b))
		if err != nil {
			partsOK = false
			errs = append(errs, s.ErrorAt(path+".rules_file", at, "rules_file: %v", err))
		} else if rs, err := firewall.Parse(string(b)); err != nil {
			partsOK = false
			for _, e := range unjoin(err) {
				errs = append(errs, s.ErrorAt(path+".rules_file", at, "rules_file %q: %s", c.RulesFile, fileError(e)))
			}
		} else if evalAt == "" && bits == 0 && evalArgs(rs) {
			errs = append(errs, s.ErrorAt(path+".rules_file", at, "rules_file %q: eval-args with args_bits 0: the SID has no ARGS", c.RulesFile))
		}
	}
	if partsOK && len(whole) > 1 {
		if _, err := firewall.Parse(strings.Join(whole, "\n")); err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, s.ErrorAt(path, node, "rules and rules_file together: %s", fileError(e)))
			}
		}
	}
	return errs
}

// fileError describes a parse error in a rules file by its position
// only: the file may be anything readable (a password hash, a key), and
// its text must not reach an error message.
func fileError(err error) string {
	var pe *firewall.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("line %d column %d: rule does not parse (the file's text is not repeated here)", pe.Line, pe.Col)
	}
	if errors.Is(err, firewall.ErrTooMany) {
		return fmt.Sprintf("too many rules (at most %d)", firewall.MaxRules)
	}
	return "rules do not parse (the file's text is not repeated here)"
}

// parseArgs reads the args mapping: each key an ARGS value (decimal,
// 0x hex or 0 octal, as strconv.ParseUint base 0), each value an action
// other than eval-args. One ARGS value given twice ("16" and "0x10") is
// an error at the later key. The result is sorted by value.
func parseArgs(s *spec.Spec, n *yaml.Node, path string) ([]Arg, []error) {
	if n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, []error{s.ErrorAt(path, n, "args must be a mapping of ARGS value to action")}
	}
	var (
		args []Arg
		errs []error
	)
	first := map[uint64]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		val, err := strconv.ParseUint(k.Value, 0, 64)
		if err != nil {
			errs = append(errs, s.ErrorAt(kp, k, "args key %q: want a number", k.Value))
			continue
		}
		if prev, dup := first[val]; dup {
			errs = append(errs, s.ErrorAt(kp, k, "args key %q: ARGS value %d already given as %q", k.Value, val, prev))
			continue
		}
		first[val] = k.Value
		vd, err := firewall.ParseVerdict(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || vd == firewall.EvalArgs {
			errs = append(errs, s.ErrorAt(kp, v, "args %s: %q is not accept, drop, reject, go-next, skip-next or go-last", k.Value, v.Value))
			continue
		}
		args = append(args, Arg{Value: val, Action: strings.ToLower(vd.String())})
	}
	if len(first) > firewall.MaxArgs {
		errs = append(errs, s.ErrorAt(path, n, "%d args values: at most %d", len(first), firewall.MaxArgs))
	}
	sort.Slice(args, func(i, j int) bool { return args[i].Value < args[j].Value })
	return args, errs
}

// ruleError places a rule's parse error at its column inside the YAML
// scalar (exact for plain and quoted one-line scalars).
// parserMsg is a message of the rule parser. spec.ErrorAt cuts string
// arguments to spec.MaxEcho bytes, which suits input echoed back but cut
// the parser's own advice mid-sentence. The whole message (tokens it
// quotes included) is capped at 1 KiB instead.
type parserMsg string

func (m parserMsg) String() string {
	const max = 1024
	if len(m) <= max {
		return string(m)
	}
	return string(m[:max]) + "..."
}

func ruleError(s *spec.Spec, path string, item *yaml.Node, err error) error {
	fe := s.ErrorAt(path, item, "rule: %v", err)
	var pe *firewall.ParseError
	if errors.As(err, &pe) {
		fe = s.ErrorAt(path, item, "rule: %s", parserMsg(pe.Msg))
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

// Compile adds the firewall program to the NF's node, on every
// interface (SR traffic to the SID and the node's other traffic alike:
// basic mode filters non-SR traffic as a plain firewall, seed 000 IV.A),
// with its typed config; rules_file is read (s.ReadFile) and inlined.
func (Kind) Compile(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error {
	var c Config
	if nf.HasConfig() {
		if err := nf.Config.Decode(&c); err != nil {
			return fmt.Errorf("decode firewall config: %w", err)
		}
	}
	prog := Program{Mode: c.Mode, Policy: c.Policy, ArgsBits: s.SIDFormat.ArgsBits, Rules: c.Rules}
	if prog.Mode == "" {
		prog.Mode = "basic"
	}
	if prog.Policy == "" {
		prog.Policy = "accept"
	}
	if c.ArgsBits != nil {
		prog.ArgsBits = *c.ArgsBits
	}
	if sid != nil && sid.SID.IsValid() {
		// SR actions only for packets to the NF's SID (its prefix
		// without the ARGS bits).
		prog.SID = sid.SID.Masked()
	}
	args, errs := parseArgs(s, valueNode(&nf.Config, "args"), "args")
	if len(errs) > 0 {
		return fmt.Errorf("firewall args: %w", errors.Join(errs...))
	}
	prog.Args = args
	if c.RulesFile != "" {
		b, err := s.ReadFile(c.RulesFile)
		if err != nil {
			return fmt.Errorf("firewall rules_file: %w", err)
		}
		prog.RulesFile = &File{Name: c.RulesFile, Text: string(b)}
	}
	raw, err := json.Marshal(prog)
	if err != nil {
		return fmt.Errorf("encode firewall config: %w", err)
	}
	var ifs []string
	for _, i := range node.Interfaces {
		ifs = append(ifs, i.Name)
	}
	sort.Strings(ifs)
	node.Programs = append(node.Programs, state.Program{Kind: Name, NF: nf.Name, Interfaces: ifs, Config: raw})
	return nil
}

// Decode reads a firewall program's typed config.
func Decode(p state.Program) (Program, error) {
	var prog Program
	if p.Kind != Name || p.NF == "" {
		return prog, fmt.Errorf("program %q of nf %q: %w", p.Kind, p.NF, ErrBadConfig)
	}
	if err := json.Unmarshal(p.Config, &prog); err != nil {
		return prog, fmt.Errorf("decode firewall %s config: %w: %w", p.NF, ErrBadConfig, err)
	}
	return prog, nil
}

// Source is the rule set's text: the rules, then the rules file.
func (prog Program) Source() string {
	src := strings.Join(prog.Rules, "\n")
	if prog.RulesFile != nil {
		src += "\n" + prog.RulesFile.Text
	}
	return src
}

// FirewallConfig builds the loader's config; ifindex resolves -i/-o
// interface names.
func (prog Program) FirewallConfig(ifindex func(string) (uint32, error)) (firewall.Config, error) {
	var cfg firewall.Config
	var err error
	if cfg.Mode, err = firewall.ParseMode(prog.Mode); err != nil {
		return cfg, fmt.Errorf("mode %q: %w", prog.Mode, ErrBadConfig)
	}
	switch prog.Policy {
	case "", "accept":
		cfg.Policy = firewall.Accept
	case "drop":
		cfg.Policy = firewall.Drop
	default:
		return cfg, fmt.Errorf("policy %q: %w", prog.Policy, ErrBadConfig)
	}
	cfg.ArgsBits, cfg.SID = prog.ArgsBits, prog.SID
	if len(prog.Args) > 0 {
		cfg.Args = map[uint64]firewall.Verdict{}
		for _, a := range prog.Args {
			vd, err := firewall.ParseVerdict(a.Action)
			if err != nil {
				return cfg, fmt.Errorf("args %d: %w", a.Value, ErrBadConfig)
			}
			cfg.Args[a.Value] = vd
		}
	}
	rules, err := firewall.Parse(prog.Source())
	if err != nil {
		return cfg, fmt.Errorf("parse rules: %w", err)
	}
	if cfg.Rules, err = firewall.Resolve(rules, ifindex); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// ConfigFromProgram decodes p and builds the loader's config.
func ConfigFromProgram(p state.Program, ifindex func(string) (uint32, error)) (firewall.Config, error) {
	prog, err := Decode(p)
	if err != nil {
		return firewall.Config{}, err
	}
	return prog.FirewallConfig(ifindex)
}
