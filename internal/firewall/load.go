package firewall

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"sort"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
)

// Config is a firewall instance's rule set and settings.
type Config struct {
	Mode  Mode
	Rules []Rule // interfaces resolved (Resolve)
	// Policy applies when no rule matches; 0 means Accept (iptables'
	// default chain policy).
	Policy Verdict
	// ArgsBits is the length of the SID's ARGS for eval-args (seed 000:
	// sysctl ip6t_seg6_args); 0..64.
	ArgsBits int
	// Args maps ARGS values to verdicts; nil means DefaultArgs.
	Args map[uint64]Verdict
	// SID is the NF's SID prefix (the SID without its ARGS): SR actions
	// (SEG6 targets, eval-args) apply only to packets addressed inside
	// it; others are accepted. Zero: any destination.
	SID netip.Prefix
	// ICMPRate limits the Parameter Problems eval-args sends, per second
	// and CPU (burst the same; the node's limit is ICMPRate x CPUs);
	// 0 means DefaultICMPRate.
	ICMPRate int
}

// DefaultICMPRate is Config.ICMPRate's default.
const DefaultICMPRate = 1000

// MaxArgs is how many eval-args values a config may map (fw_args holds
// 256 per generation).
const MaxArgs = 256

// Hash identifies a rule set and its settings (everything but the mode,
// which is switched at run time): the loader stores it with the tables,
// so a driver can tell whether what runs is what is desired.
func (cfg Config) Hash() ([32]byte, error) {
	if err := checkConfig(&cfg); err != nil {
		return [32]byte{}, fmt.Errorf("hash firewall config: %w", err)
	}
	return cfg.hash(), nil
}

func (cfg *Config) hash() [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "policy %v args_bits %d sid %v icmp_rate %d\n", cfg.Policy, cfg.ArgsBits, cfg.SID, cfg.ICMPRate)
	for _, k := range sortedArgs(cfg.Args) {
		fmt.Fprintf(h, "args %d %v\n", k, cfg.Args[k])
	}
	for _, r := range cfg.Rules {
		fmt.Fprintf(h, "rule %v", r.Verdict)
		for _, c := range r.Conds {
			fmt.Fprintf(h, " %v %v %v %d %d", c.Field, c.Neg, c.Prefix, c.Lo, c.Hi)
		}
		h.Write([]byte("\n"))
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// DefaultArgs is the eval-args table when a config gives none.
var DefaultArgs = map[uint64]Verdict{0: GoNext, 1: SkipNext, 2: GoLast, 3: Drop, 4: Accept}

// Firewall is a loaded firewall program and its maps.
type Firewall struct {
	mu    sync.Mutex
	objs  fwProgObjects
	cls   *Classifier // the active generation's
	cfg   Config
	links map[int]link.Link
	log   *slog.Logger
	// Double buffering (bpf/lib/fw_maps.h FW_GENS): gen is the generation
	// packets use; gens holds what each generation's tables contain.
	gen   int
	gens  [2]generation
	bmCap uint32 // bitmaps per generation
	// dir is the pin directory (Pin, OpenPinnedFirewall): Update and
	// SetMode hold an flock on it so processes sharing the pinned maps
	// take turns (lockPins).
	dir string
	// pinned: opened from pins (OpenPinnedFirewall); Update keeps the
	// running mode, read under the lock.
	pinned bool
}

// lockPins takes an exclusive flock on the pin directory dir (bpffs
// directories can be flocked; regular files cannot be created there) and
// returns its release. No directory (a firewall never pinned): only the
// in-process mutex serializes.
func lockPins(dir string) (func(), error) {
	release, err := bpfrt.LockDir(dir, bpfrt.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("lock firewall pins: %w", err)
	}
	return release, nil
}

type generation struct {
	cls *Classifier
	cfg Config
}

const (
	numGens   = 2
	lpmGen    = 16 // FW_LPM_GEN
	ruleSlots = MaxRules + 1
)

// synchronizeRCU returns once every BPF program run that started before
// the call has finished: updating an ARRAY_OF_MAPS slot makes the kernel
// call synchronize_rcu() before the syscall returns
// (maybe_wait_bpf_programs in kernel/bpf/syscall.c), and tc and XDP
// programs run inside RCU read-side sections. A throwaway one-slot map
// of maps, used by no program, is enough. This is the grace period
// between steering packets away from a generation (fw_gen) and
// rewriting its tables: a run that read the old generation word before
// the flip has finished when it returns.
func synchronizeRCU() error {
	inner := &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	im, err := ebpf.NewMap(inner)
	if err != nil {
		return fmt.Errorf("wait for program runs: %w", err)
	}
	defer im.Close()
	om, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: inner})
	if err != nil {
		return fmt.Errorf("wait for program runs: %w", err)
	}
	defer om.Close()
	if err := om.Put(uint32(0), im); err != nil {
		return fmt.Errorf("wait for program runs: %w", err)
	}
	return nil
}

// idxBase mirrors FW_IDX_* of bpf/lib/fw_maps.h: where each integer field's
// slots start in fw_idx.
func idxBase() (map[Field]uint32, uint32) {
	base := map[Field]uint32{}
	var off uint32
	for f := FProto; f < NumFields; f++ {
		base[f] = off
		off += f.Domain() + 1
	}
	return base, off
}

// ErrCapacity: a new rule set needs more table entries than the loaded
// program's maps hold (Update); Load a new program instead.
var ErrCapacity = errors.New("rule set exceeds table capacity")

// Capacity sizes the table maps; zero fields mean "what the first rule
// set needs".
type Capacity struct {
	Bitmaps, Prefixes int
	// XDP loads (and verifies) the XDP twin as well as the tc program;
	// without it only the tc program is loaded (half the load time) and
	// AttachXDP fails.
	XDP bool
	// Pipeline are the node's XDP pipeline maps (pipeline.Maps
	// Replacements), in place of the object's own: the XDP twin is then
	// the pipeline's firewall stage, and the tc program recognises the
	// packets it already filtered (bpf/lib/pipeline.h). Nil: private.
	Pipeline map[string]*ebpf.Map
}

func checkConfig(cfg *Config) error {
	if cfg.ArgsBits < 0 || cfg.ArgsBits > 64 {
		return fmt.Errorf("args bits %d not in 0..64: %w", cfg.ArgsBits, ErrSyntax)
	}
	if cfg.Policy == 0 {
		cfg.Policy = Accept
	}
	if cfg.Policy == EvalArgs {
		return fmt.Errorf("policy eval-args: %w", ErrUnsupported)
	}
	if cfg.Args == nil {
		cfg.Args = maps.Clone(DefaultArgs)
	}
	if len(cfg.Args) > MaxArgs {
		return fmt.Errorf("%d args values, at most %d: %w", len(cfg.Args), MaxArgs, ErrUnsupported)
	}
	if cfg.ICMPRate == 0 {
		cfg.ICMPRate = DefaultICMPRate
	}
	if cfg.ICMPRate < 0 {
		return fmt.Errorf("icmp rate %d: %w", cfg.ICMPRate, ErrSyntax)
	}
	if cfg.SID.IsValid() && !cfg.SID.Addr().Is6() {
		return fmt.Errorf("sid %v is not IPv6: %w", cfg.SID, ErrSyntax)
	}
	for k, v := range cfg.Args {
		if v == EvalArgs || v == 0 || v > EvalArgs {
			return fmt.Errorf("args %d -> %v: %w", k, v, ErrUnsupported)
		}
	}
	return nil
}

func prefixCount(c *Classifier) int {
	n := 0
	for _, t := range c.Fields {
		n += len(t.Prefixes)
	}
	return n
}

// Load compiles cfg and loads the program with its tables filled. Loading
// does not depend on the network namespace; Attach does.
func Load(cfg Config) (*Firewall, error) { return LoadCapacity(cfg, Capacity{}) }

// LoadCapacity is Load with table maps sized for later Updates.
func LoadCapacity(cfg Config, capy Capacity) (*Firewall, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, fmt.Errorf("load firewall: %w", err)
	}
	cls, err := Compile(cfg.Rules)
	if err != nil {
		return nil, fmt.Errorf("load firewall: %w", err)
	}
	spec, err := loadFwProg()
	if err != nil {
		return nil, fmt.Errorf("load firewall spec: %w", err)
	}
	bmCap := uint32(max(len(cls.Bitmaps), capy.Bitmaps))
	spec.Maps[fwProgMapFwBitmaps].MaxEntries = numGens * bmCap
	spec.Maps[fwProgMapFwLpm].MaxEntries = numGens * uint32(max(prefixCount(cls), capy.Prefixes, 1))
	fw := &Firewall{cls: cls, cfg: cfg, links: map[int]link.Link{}, log: slog.Default(), bmCap: bmCap}
	fw.gens[0] = generation{cls: cls, cfg: cfg}
	// Load only the programs asked for: each one is verified on load.
	opts := &ebpf.CollectionOptions{MapReplacements: capy.Pipeline}
	if capy.XDP {
		err = spec.LoadAndAssign(&fw.objs, opts)
	} else {
		var tc struct {
			fwProgMaps
			SrchainFw *ebpf.Program `ebpf:"srchain_fw"`
		}
		if err = spec.LoadAndAssign(&tc, opts); err == nil {
			fw.objs.fwProgMaps, fw.objs.SrchainFw = tc.fwProgMaps, tc.SrchainFw
		}
	}
	if err != nil {
		return nil, bpfrt.WrapLoad("load firewall program", err)
	}
	if err := fw.fill(0, cls, cfg); err != nil {
		fw.objs.Close()
		return nil, err
	}
	return fw, nil
}

// Update replaces the rule set and settings of a loaded firewall without
// reloading or detaching the program, atomically: the new tables go into
// the idle generation, then one word (fw_gen) steers packets to it. A
// packet is classified by the old or the new rule set, never a mix; on an
// error the old generation stays active. The new rule set's counters
// start from zero. A pinned firewall (Pin, OpenPinnedFirewall) holds an
// flock on its pin directory meanwhile, so Updates, SetModes and
// RevertPinned of different processes do not interleave; one opened by
// OpenPinnedFirewall keeps the running mode (cfg.Mode is ignored).
func (fw *Firewall) Update(cfg Config) error {
	if err := checkConfig(&cfg); err != nil {
		return fmt.Errorf("update firewall: %w", err)
	}
	cls, err := Compile(cfg.Rules)
	if err != nil {
		return fmt.Errorf("update firewall: %w", err)
	}
	if uint32(len(cls.Bitmaps)) > fw.bmCap || uint32(prefixCount(cls)) > fw.objs.FwLpm.MaxEntries()/numGens {
		return fmt.Errorf("update firewall: %w", ErrCapacity)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	unlock, err := lockPins(fw.dir)
	if err != nil {
		return fmt.Errorf("update firewall: %w", err)
	}
	defer unlock()
	if fw.dir != "" {
		// Pinned: another process may have updated, reverted
		// (RevertPinned) or switched the mode since; start from what
		// runs now and clear the idle generation by walking the maps.
		var cur uint32
		if err := fw.objs.FwGen.Lookup(uint32(0), &cur); err != nil {
			return fmt.Errorf("update firewall: read generation: %w", err)
		}
		fw.gen = int(cur & 1)
		fw.gens = [numGens]generation{}
	}
	if fw.pinned {
		var conf fwProgFwConfig
		if err := fw.objs.FwCfg.Lookup(uint32(fw.gen), &conf); err != nil {
			return fmt.Errorf("update firewall: read config: %w", err)
		}
		cfg.Mode = Mode(conf.Mode)
	}
	g := 1 - fw.gen
	// Grace period: no program run still reads the idle generation
	// (whoever flipped away from it, this process or another).
	if err := synchronizeRCU(); err != nil {
		return fmt.Errorf("update firewall: %w", err)
	}
	// Clear what the idle generation held (the LPM trie and the args
	// hash keep whatever is not deleted).
	if old := fw.gens[g]; old.cls == nil {
		if err := fw.clearGen(g); err != nil {
			return fmt.Errorf("update firewall: %w", err)
		}
	} else {
		for f, t := range old.cls.Fields {
			for _, p := range t.Prefixes {
				k := lpmKey(Field(f)+Field(lpmGen*g), p.Prefix)
				if err := fw.objs.FwLpm.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return fmt.Errorf("update firewall: delete prefix %v: %w", p.Prefix, err)
				}
			}
		}
		for k := range old.cfg.Args {
			_ = fw.objs.FwArgs.Delete(fwProgFwArgsKey{Args: k, Gen: uint64(g)})
		}
	}
	fw.gens[g] = generation{cls: cls, cfg: cfg}
	if err := fw.fill(g, cls, cfg); err != nil {
		return fmt.Errorf("update firewall: %w", err)
	}
	if err := fw.objs.FwGen.Put(uint32(0), uint32(g)); err != nil {
		return fmt.Errorf("update firewall: flip generation: %w", err)
	}
	fw.gen, fw.cls, fw.cfg = g, cls, cfg
	return nil
}

// clearGen deletes generation g's prefixes and args by walking the maps
// (a firewall opened from its pins does not know what they hold).
func (fw *Firewall) clearGen(g int) error { return fw.tables().clearGen(g) }

// pinnedMaps names the maps Pin pins: enough for OpenPinned (counters,
// mode) and OpenPinnedFirewall (Update).
func (fw *Firewall) pinnedMaps() map[string]**ebpf.Map {
	o := &fw.objs
	return map[string]**ebpf.Map{
		"fw_rule_counters": &o.FwRuleCounters, "fw_drop_counters": &o.DropCounters, "fw_cfg": &o.FwCfg,
		"fw_gen": &o.FwGen, "fw_bitmaps": &o.FwBitmaps, "fw_lpm": &o.FwLpm, "fw_idx": &o.FwIdx,
		"fw_fdef": &o.FwFdef, "fw_rules": &o.FwRules, "fw_args": &o.FwArgs, "fw_icmp_bucket": &o.FwIcmpBucket,
	}
}

// LoadPinnedProgram loads this build's tc program (xdp: its XDP twin, a
// stage of the node's XDP pipeline) over the tables of the firewall
// pinned under dir (Pin): it filters with the pinned tables and
// counters, so rule updates (Update on OpenPinnedFirewall) reach it as
// they reach the running program. A driver attaches it where a link
// was detached by hand, or swaps it in where an older srchain's program
// runs. pipe are the pipeline's maps.
func LoadPinnedProgram(dir string, pipe map[string]*ebpf.Map, xdp bool) (*ebpf.Program, error) {
	spec, err := loadFwProg()
	if err != nil {
		return nil, fmt.Errorf("load firewall spec: %w", err)
	}
	repl := map[string]*ebpf.Map{}
	defer bpfrt.CloseMaps(repl)
	fw := &Firewall{}
	for name := range fw.pinnedMaps() {
		m, err := ebpf.LoadPinnedMap(dir+"/"+name, nil)
		if err != nil {
			return nil, fmt.Errorf("open pinned firewall map %s: %w", name, err)
		}
		if name == "fw_drop_counters" {
			name = fwProgMapDropCounters // pinned under another name (Pin)
		}
		ms, ok := spec.Maps[name]
		if !ok {
			m.Close()
			return nil, fmt.Errorf("load pinned firewall: %w: no map %s", ErrUnsupported, name)
		}
		repl[name] = m
		ms.MaxEntries = m.MaxEntries() // the tables' capacity
	}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	maps.Copy(opts.MapReplacements, repl)
	maps.Copy(opts.MapReplacements, pipe)
	if xdp {
		var o struct {
			SrchainFwXdp *ebpf.Program `ebpf:"srchain_fw_xdp"`
		}
		if err := spec.LoadAndAssign(&o, opts); err != nil {
			return nil, bpfrt.WrapLoad("load pinned firewall xdp stage", err)
		}
		return o.SrchainFwXdp, nil
	}
	var o struct {
		SrchainFw *ebpf.Program `ebpf:"srchain_fw"`
	}
	if err := spec.LoadAndAssign(&o, opts); err != nil {
		return nil, bpfrt.WrapLoad("load pinned firewall", err)
	}
	return o.SrchainFw, nil
}

// OpenPinnedFirewall opens the tables a driver pinned under dir (Pin) as
// a Firewall whose Update rewrites the running program's rule set
// atomically. It has no program (Attach fails); Close releases the maps.
func OpenPinnedFirewall(dir string, rules []Rule) (*Firewall, error) {
	fw := &Firewall{links: map[int]link.Link{}, log: slog.Default(), dir: dir, pinned: true}
	for name, m := range fw.pinnedMaps() {
		var err error
		if *m, err = ebpf.LoadPinnedMap(dir+"/"+name, nil); err != nil {
			fw.objs.Close()
			return nil, fmt.Errorf("open pinned firewall map %s: %w", name, err)
		}
	}
	var g uint32
	if err := fw.objs.FwGen.Lookup(uint32(0), &g); err != nil {
		fw.objs.Close()
		return nil, fmt.Errorf("read firewall generation: %w", err)
	}
	fw.gen = int(g & 1)
	fw.bmCap = fw.objs.FwBitmaps.MaxEntries() / numGens
	var conf fwProgFwConfig
	if err := fw.objs.FwCfg.Lookup(uint32(fw.gen), &conf); err != nil {
		fw.objs.Close()
		return nil, fmt.Errorf("read firewall config: %w", err)
	}
	fw.cfg = Config{Mode: Mode(conf.Mode), Rules: rules}
	return fw, nil
}

// lpmKey is the fw_lpm key of prefix p of field f (struct fw_lpm_key,
// generated by bpf2go): the field byte is part of the prefix.
func lpmKey(f Field, p netip.Prefix) fwProgFwLpmKey {
	k := fwProgFwLpmKey{Prefixlen: uint32(8 + p.Bits()), Field: uint8(f)}
	copy(k.Addr[:], p.Addr().AsSlice())
	return k
}

// fill writes the compiled tables into generation g of the maps (not
// the one packets use, except at Load) and zeroes its rule counters.
func (fw *Firewall) fill(g int, c *Classifier, cfg Config) error {
	return fw.tables().fill(g, fw.bmCap, c, cfg)
}

// SetMode switches basic/advanced at run time (one map update).
func (fw *Firewall) SetMode(m Mode) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	unlock, err := lockPins(fw.dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := setMode(fw.objs.FwCfg, m); err != nil {
		return err
	}
	fw.cfg.Mode = m
	for g := range fw.gens {
		fw.gens[g].cfg.Mode = m
	}
	return nil
}

// setMode writes the mode into both generations' configs: a
// read-modify-write of each whole fw_cfg slot, so callers hold the pin
// lock (lockPins), which every Update filling a slot holds too.
func setMode(cfgMap *ebpf.Map, m Mode) error {
	for g := uint32(0); g < numGens; g++ {
		var conf fwProgFwConfig
		if err := cfgMap.Lookup(g, &conf); err != nil {
			return fmt.Errorf("read firewall config: %w", err)
		}
		conf.Mode = uint32(m)
		if err := cfgMap.Put(g, conf); err != nil {
			return fmt.Errorf("set firewall mode: %w", err)
		}
	}
	return nil
}

// Classifier returns the compiled rule set.
func (fw *Firewall) Classifier() *Classifier { return fw.cls }

// Program returns the tc program.
func (fw *Firewall) Program() *ebpf.Program { return fw.objs.SrchainFw }

// XDPProgram returns the XDP twin (same maps and counters).
func (fw *Firewall) XDPProgram() *ebpf.Program { return fw.objs.SrchainFwXdp }

// AttachXDP attaches the XDP twin to ifindex in the current network
// namespace (native mode where the driver has it). Attach either the XDP
// or the tc program to an interface, not both: a packet XDP passed would
// be classified again by tc (and an SR action applied twice). XDP does
// not see multi-buffer frames (they pass unfiltered).
func (fw *Firewall) AttachXDP(ifindex int) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.objs.SrchainFwXdp == nil {
		return fmt.Errorf("attach firewall xdp: loaded without Capacity.XDP: %w", ErrUnsupported)
	}
	key := -ifindex // links map: negative keys are XDP links
	if _, ok := fw.links[key]; ok {
		return nil
	}
	l, _, err := bpfrt.Attach(bpfrt.Hook{Ifindex: ifindex, XDP: true}, fw.objs.SrchainFwXdp, bpfrt.AttachOptions{})
	if err != nil {
		return fmt.Errorf("attach firewall: %w", err)
	}
	fw.links[key] = l
	return nil
}

// Attach attaches the program at the head of ifindex's tcx ingress in the
// current network namespace (call it inside netns.NS.Do), so it filters
// before srchain's End program; passed packets continue down the chain.
func (fw *Firewall) Attach(ifindex int) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if _, ok := fw.links[ifindex]; ok {
		return nil
	}
	l, _, err := bpfrt.Attach(bpfrt.Hook{Ifindex: ifindex}, fw.objs.SrchainFw, bpfrt.AttachOptions{Head: true})
	if err != nil {
		return fmt.Errorf("attach firewall: %w", err)
	}
	fw.links[ifindex] = l
	fw.log.Debug("firewall attached", "ifindex", ifindex, "rules", len(fw.cfg.Rules), "mode", fw.cfg.Mode)
	return nil
}

// Pin pins every link and the counter maps under dir so they outlive the
// process (the lab CLI exits after `lab up`).
func (fw *Firewall) Pin(dir string) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for ifindex, l := range fw.links {
		name := fmt.Sprintf("%s/fw_tcx_ingress_%d", dir, ifindex)
		if ifindex < 0 {
			name = fmt.Sprintf("%s/fw_xdp_%d", dir, -ifindex)
		}
		if err := l.Pin(name); err != nil {
			return fmt.Errorf("pin firewall link: %w", err)
		}
	}
	for name, m := range fw.pinnedMaps() {
		if err := (*m).Pin(dir + "/" + name); err != nil {
			return fmt.Errorf("pin firewall map %s: %w", name, err)
		}
	}
	fw.dir = dir
	return nil
}

// Close detaches (unless pinned) and releases everything.
func (fw *Firewall) Close() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var errs []error
	for _, l := range fw.links {
		errs = append(errs, l.Close())
	}
	fw.links = map[int]link.Link{}
	errs = append(errs, fw.objs.Close())
	return errors.Join(errs...)
}

// RuleCount is one rule's counters; Rule -1 is the policy.
type RuleCount struct {
	Rule    int
	Text    string
	Packets uint64
	Bytes   uint64
}

// RuleCounts reads the per-rule counters (summed over CPUs), rules in
// order, then the policy.
func (fw *Firewall) RuleCounts() ([]RuleCount, error) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return readRuleCounts(fw.objs.FwRuleCounters, fw.cfg.Rules, fw.gen)
}

// ReadRuleCounts reads generation 0 of a (possibly pinned)
// fw_rule_counters map.
func ReadRuleCounts(m *ebpf.Map, rules []Rule) ([]RuleCount, error) {
	return readRuleCounts(m, rules, 0)
}

func readRuleCounts(m *ebpf.Map, rules []Rule, gen int) ([]RuleCount, error) {
	out := make([]RuleCount, 0, len(rules)+1)
	for i := 0; i <= len(rules); i++ {
		var per []fwProgFwCount
		if err := m.Lookup(uint32(gen*ruleSlots+i), &per); err != nil {
			return nil, fmt.Errorf("read rule counter %d: %w", i, err)
		}
		rc := RuleCount{Rule: i}
		if i == len(rules) {
			rc.Rule, rc.Text = -1, "policy"
		} else {
			rc.Text = rules[i].Text
		}
		for _, c := range per {
			rc.Packets += c.Packets
			rc.Bytes += c.Bytes
		}
		out = append(out, rc)
	}
	return out, nil
}

// DropCounts reads the firewall's drop counters by reason.
func (fw *Firewall) DropCounts() (drop.Counts, error) { return ReadDropCounts(fw.objs.DropCounters) }

// ReadDropCounts sums a drop_counters map (bpfrt.ReadDropCounts).
func ReadDropCounts(m *ebpf.Map) (drop.Counts, error) { return bpfrt.ReadDropCounts(m) }

// sortedArgs lists eval-args values in order (for printing).
func sortedArgs(m map[uint64]Verdict) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// Pinned is a firewall that a driver pinned (see Firewall.Pin): what the
// CLI reads and changes without the process that loaded it.
type Pinned struct {
	counters, drops, cfg, gen *ebpf.Map
	dir                       string
}

// OpenPinned opens the maps pinned under dir.
func OpenPinned(dir string) (*Pinned, error) {
	p := Pinned{dir: dir}
	for name, m := range map[string]**ebpf.Map{"fw_rule_counters": &p.counters, "fw_drop_counters": &p.drops, "fw_cfg": &p.cfg, "fw_gen": &p.gen} {
		var err error
		if *m, err = ebpf.LoadPinnedMap(dir+"/"+name, nil); err != nil {
			p.Close()
			return nil, fmt.Errorf("open pinned firewall map %s: %w", name, err)
		}
	}
	return &p, nil
}

// Close releases the maps (the pins stay).
func (p *Pinned) Close() {
	for _, m := range []*ebpf.Map{p.counters, p.drops, p.cfg, p.gen} {
		if m != nil {
			m.Close()
		}
	}
}

// Hash returns the running rule set's Config.Hash.
func (p *Pinned) Hash() ([32]byte, error) {
	g, err := p.activeGen()
	if err != nil {
		return [32]byte{}, err
	}
	var conf fwProgFwConfig
	if err := p.cfg.Lookup(uint32(g), &conf); err != nil {
		return [32]byte{}, fmt.Errorf("read firewall config: %w", err)
	}
	return conf.Hash, nil
}

// Mode returns the running mode and rule count.
func (p *Pinned) Mode() (Mode, int, error) {
	g, err := p.activeGen()
	if err != nil {
		return 0, 0, err
	}
	var conf fwProgFwConfig
	if err := p.cfg.Lookup(uint32(g), &conf); err != nil {
		return 0, 0, fmt.Errorf("read firewall config: %w", err)
	}
	return Mode(conf.Mode), int(conf.Nrules), nil
}

func (p *Pinned) activeGen() (int, error) {
	var g uint32
	if err := p.gen.Lookup(uint32(0), &g); err != nil {
		return 0, fmt.Errorf("read firewall generation: %w", err)
	}
	return int(g & 1), nil
}

// SetMode switches basic/advanced (map updates, no reload).
// It holds the pin lock, so it does not interleave with an Update of
// another process rewriting a config slot.
func (p *Pinned) SetMode(m Mode) error {
	unlock, err := lockPins(p.dir)
	if err != nil {
		return err
	}
	defer unlock()
	return setMode(p.cfg, m)
}

// Gen returns the generation packets use (0 or 1): after Update, the one
// just filled.
func (fw *Firewall) Gen() int {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.gen
}

// ErrStale: the pinned firewall changed since the generation to revert
// was made active.
var ErrStale = errors.New("firewall changed since")

// RevertPinned undoes an Update of the firewall pinned under dir that
// made generation gen active: it steers packets back to the other
// generation, which still holds the previous rule set (an Update
// rewrites only the idle generation, and nothing has since). If gen is
// no longer the active one (another Update or revert came in between)
// it returns ErrStale and changes nothing.
func RevertPinned(dir string, gen int) error {
	unlock, err := lockPins(dir)
	if err != nil {
		return fmt.Errorf("revert firewall: %w", err)
	}
	defer unlock()
	m, err := ebpf.LoadPinnedMap(dir+"/fw_gen", nil)
	if err != nil {
		return fmt.Errorf("revert firewall: open fw_gen: %w", err)
	}
	defer m.Close()
	var cur uint32
	if err := m.Lookup(uint32(0), &cur); err != nil {
		return fmt.Errorf("revert firewall: read generation: %w", err)
	}
	if int(cur&1) != gen {
		return fmt.Errorf("revert firewall: generation %d active, not %d: %w", cur&1, gen, ErrStale)
	}
	if err := m.Put(uint32(0), uint32(1-gen)); err != nil {
		return fmt.Errorf("revert firewall: flip generation: %w", err)
	}
	return nil
}

// RuleCounts reads the per-rule counters; rules label them (may be nil).
func (p *Pinned) RuleCounts(rules []Rule) ([]RuleCount, error) {
	_, n, err := p.Mode()
	if err != nil {
		return nil, err
	}
	if rules == nil || len(rules) != n {
		rules = make([]Rule, n)
	}
	g, err := p.activeGen()
	if err != nil {
		return nil, err
	}
	return readRuleCounts(p.counters, rules, g)
}

// DropCounts reads the drop counters by reason.
func (p *Pinned) DropCounts() (drop.Counts, error) { return ReadDropCounts(p.drops) }
