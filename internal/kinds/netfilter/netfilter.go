// Package netfilter is the NF kind "netfilter": End.AN.NF (seed 002) on a
// stock kernel. The node's real netfilter (nftables rules, conntrack,
// NAT) acts on the inner packet of an SRv6 packet addressed to the NF's
// SID while the node does End on the outer header; the low args_bits of
// the SID's ARG are written into the packet mark first. docs/netfilter.md
// has the design; bpf/anf.c and bpf/lib/anf.h the datapath.
//
// Spec:
//
//	nfs:
//	  - name: nat
//	    kind: netfilter
//	    node: nfv
//	    config:
//	      args_bits: 16        # ARG bits copied into the mark, 0..16
//	      ruleset: |           # nft: the body of srchain's table inet srchain_anf
//	        chain fwd { type filter hook forward priority filter; ... }
//	      ruleset_file: x.nft  # or: a file (relative to the spec)
package netfilter

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/srchain/srchain/internal/nft"
	"net/netip"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Name is the NF kind and the state.Program kind.
const Name = "netfilter"

// MaxArgsBits is the largest ARG copied into the mark: bits 16..31 of
// the mark are srchain's (bpf/lib/anf.h, docs/netfilter.md "Mark").
const MaxArgsBits = 16

// ErrBadConfig: a state.Program whose config does not describe a netfilter NF.
var ErrBadConfig = errors.New("bad netfilter program config")

func init() { kind.Register(Kind{}) }

// Kind is the netfilter kind.
type Kind struct{}

// Name implements kind.Kind.
func (Kind) Name() string { return Name }

// Drivers: the netfilter program.
func (Kind) Drivers() map[string]kind.Driver { return map[string]kind.Driver{Name: driver{}} }

// Config is an NF's config section.
type Config struct {
	ArgsBits    *int   `yaml:"args_bits"`
	Ruleset     string `yaml:"ruleset"`
	RulesetFile string `yaml:"ruleset_file"`
}

// Program is the typed config of a netfilter program in the desired
// state: everything the driver needs, the ruleset file inlined.
type Program struct {
	// ArgsBits is how many low bits of the active SID go into the mark.
	ArgsBits int `json:"args_bits"`
	// SID is the NF's SID prefix (the route's prefix: ARGS wildcarded).
	SID netip.Prefix `json:"sid"`
	// Ruleset is the nft text loaded into table inet srchain_anf
	// (inline, or the file's text).
	Ruleset string `json:"ruleset"`
	// RulesetFile is the file the ruleset came from ("" when inline),
	// for messages only.
	RulesetFile string `json:"ruleset_file,omitempty"`
	// RestoreMTU is the MTU of the restore device: the smallest MTU of
	// the node's links minus the largest outer header of a chain through
	// the NF, so the kernel sends Packet Too Big / Fragmentation Needed
	// for an inner packet that would not fit once re-encapsulated.
	RestoreMTU int `json:"restore_mtu"`
}

var knownKeys = map[string]bool{"args_bits": true, "ruleset": true, "ruleset_file": true}

// Check validates an NF's config: keys, args_bits, exactly one of
// ruleset / ruleset_file, the ruleset itself with the real nft (when it
// can run, see CheckRuleset), and a second netfilter NF on the node.
// Insert-mode chains are served (docs/netfilter.md "Insert mode").
func (Kind) Check(s *spec.Spec, nf *spec.NF, path string) []error {
	var errs []error
	for i := range s.NFs {
		o := &s.NFs[i]
		if o == nf {
			break
		}
		if o.Kind == Name && o.Node == nf.Node {
			errs = append(errs, s.ErrorAt(path, &nf.Config, "node %q already has netfilter NF %q: one per node (both would own table inet %s)", nf.Node, o.Name, Table))
		}
	}
	node := &nf.Config
	if !nf.HasConfig() {
		return append(errs, s.ErrorAt(path, node, "netfilter needs a config with ruleset or ruleset_file"))
	}
	if node.Kind != yaml.MappingNode {
		return append(errs, s.ErrorAt(path, node, "netfilter config must be a mapping"))
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		if !knownKeys[k.Value] {
			errs = append(errs, s.ErrorAt(path+"."+k.Value, k, "unknown netfilter config key %q (want args_bits, ruleset, ruleset_file)", k.Value))
		}
	}
	var c Config
	if err := node.Decode(&c); err != nil {
		return append(errs, s.ErrorAt(path, node, "decode netfilter config: %v", err))
	}
	if c.ArgsBits != nil && (*c.ArgsBits < 0 || *c.ArgsBits > MaxArgsBits || *c.ArgsBits > s.SIDFormat.ArgsBits) {
		errs = append(errs, s.ErrorAt(path+".args_bits", valueNode(node, "args_bits"), "args_bits %d: want 0..%d and at most sid_format.args_bits (%d)", *c.ArgsBits, MaxArgsBits, s.SIDFormat.ArgsBits))
	}
	switch {
	case c.Ruleset != "" && c.RulesetFile != "":
		errs = append(errs, s.ErrorAt(path+".ruleset_file", valueNode(node, "ruleset_file"), "give ruleset or ruleset_file, not both"))
	case c.Ruleset == "" && c.RulesetFile == "":
		errs = append(errs, s.ErrorAt(path, node, "netfilter needs ruleset or ruleset_file"))
	case c.Ruleset != "":
		at := valueNode(node, "ruleset")
		if err := CheckRuleset(c.Ruleset); err != nil {
			errs = append(errs, RulesetError(s, path+".ruleset", at, err, false))
		}
	default:
		at := valueNode(node, "ruleset_file")
		b, err := s.ReadFile(c.RulesetFile)
		if err != nil {
			errs = append(errs, s.ErrorAt(path+".ruleset_file", at, "ruleset_file: %v", err))
		} else if err := CheckRuleset(string(b)); err != nil {
			errs = append(errs, RulesetError(s, path+".ruleset_file", at, err, true))
		}
	}
	return errs
}

// RulesetError places an nft error at path: for an inline block scalar
// (`ruleset: |`) at the line inside it that nft names; for a file, at
// path with the file's line in the message. at is the value's node when
// the caller has it (an NF's config), else the decoder's record of path
// says (a legacy NF's ruleset, internal/kinds/proxy).
func RulesetError(s *spec.Spec, path string, at *yaml.Node, err error, file bool) error {
	var ne *nft.Error
	if !errors.As(err, &ne) {
		return s.ErrorAt(path, at, "ruleset: %v", err)
	}
	if file {
		return s.ErrorAt(path, at, "ruleset_file line %d: nft: %s", ne.Line, nftMsg(ne.Msg))
	}
	fe := s.ErrorAt(path, at, "ruleset line %d: nft: %s", ne.Line, nftMsg(ne.Msg))
	block := s.BlockScalar(path)
	if at != nil {
		block = at.Style == yaml.LiteralStyle || at.Style == yaml.FoldedStyle
	}
	if block && fe.Line > 0 && ne.Line > 0 {
		fe.Line += ne.Line // the block starts on the line after the indicator
		fe.Col = 0
	}
	return fe
}

// nftMsg is nft's own message: not clipped to spec.MaxEcho (which would
// cut its advice mid-sentence), capped at 512 bytes.
type nftMsg string

func (m nftMsg) String() string {
	if len(m) <= 512 {
		return string(m)
	}
	return string(m[:512]) + "..."
}

func valueNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// Overhead is the outer header a chain of segs segments adds in encap
// mode: IPv6 (40) + SRH (8 + 16 per segment). It is also the floor of the
// restore device's headroom (segs 2: the SID and one more), for SR
// policies that are not chains of the spec.
func Overhead(segs int) int { return 40 + 8 + 16*segs }

// Compile keeps the NF's SID a kernel seg6local End route (visible in
// `ip -6 route`, advertised like any route; it serves what the eBPF
// program hands to the kernel: hop limit exhausted) and adds the
// netfilter program on every interface of the node.
func (Kind) Compile(s *spec.Spec, nf *spec.NF, sid *state.LocalSID, node *state.Node) error {
	var c Config
	if nf.HasConfig() {
		if err := nf.Config.Decode(&c); err != nil {
			return fmt.Errorf("decode netfilter config: %w", err)
		}
	}
	prog := Program{ArgsBits: min(s.SIDFormat.ArgsBits, MaxArgsBits), Ruleset: c.Ruleset}
	if c.ArgsBits != nil {
		prog.ArgsBits = *c.ArgsBits
	}
	if sid == nil || !sid.SID.IsValid() {
		return fmt.Errorf("netfilter %s: no SID", nf.Name)
	}
	sid.Datapath = state.Kernel
	sid.Behavior = state.End
	prog.SID = sid.SID.Masked()
	if c.RulesetFile != "" {
		b, err := s.ReadFile(c.RulesetFile)
		if err != nil {
			return fmt.Errorf("netfilter ruleset_file: %w", err)
		}
		prog.Ruleset, prog.RulesetFile = string(b), c.RulesetFile
	}
	// Headroom: the largest header a chain through the NF adds (encap:
	// IPv6 + SRH; insert: the SRH only, spec.Chain.Overhead), at least
	// an encap header of two segments (the NF's SID and one more: End
	// needs SL > 0).
	overhead := Overhead(2)
	for i := range s.Chains {
		for _, n := range s.Chains[i].NFs {
			if n == nf.Name {
				overhead = max(overhead, s.Chains[i].Overhead())
			}
		}
	}
	mtu := 0
	var ifs []string
	for _, i := range node.Interfaces {
		ifs = append(ifs, i.Name)
		if mtu == 0 || i.MTU < mtu {
			mtu = i.MTU
		}
	}
	if mtu == 0 {
		mtu = 1500
	}
	prog.RestoreMTU = max(mtu-overhead, 68)
	sort.Strings(ifs)
	raw, err := json.Marshal(prog)
	if err != nil {
		return fmt.Errorf("encode netfilter config: %w", err)
	}
	node.Programs = append(node.Programs, state.Program{Kind: Name, NF: nf.Name, Interfaces: ifs, Config: raw})
	return nil
}

// Decode reads a netfilter program's typed config.
func Decode(p state.Program) (Program, error) {
	var prog Program
	if p.Kind != Name || p.NF == "" {
		return prog, fmt.Errorf("program %q of nf %q: %w", p.Kind, p.NF, ErrBadConfig)
	}
	if err := json.Unmarshal(p.Config, &prog); err != nil {
		return prog, fmt.Errorf("decode netfilter %s config: %w: %w", p.NF, ErrBadConfig, err)
	}
	if !prog.SID.IsValid() || prog.ArgsBits < 0 || prog.ArgsBits > MaxArgsBits || strings.TrimSpace(prog.Ruleset) == "" {
		return prog, fmt.Errorf("netfilter %s: %w", p.NF, ErrBadConfig)
	}
	return prog, nil
}
