package firewall

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// Tables are the classifier's maps (bpf/lib/fw_maps.h) in a program
// object that includes the firewall's headers: the firewall's own and
// the eBPF ingress's (internal/ingress), which classifies packets to
// chains with the same engine and the same compiler (one classifier).
type Tables struct {
	Bitmaps, LPM, Idx, Fdef, Cfg, Gen, Rules, RuleCounters, Args *ebpf.Map
	// ICMPBucket is nil in a program without the eval-args rate limiter.
	ICMPBucket *ebpf.Map
}

func (fw *Firewall) tables() Tables {
	o := &fw.objs
	return Tables{Bitmaps: o.FwBitmaps, LPM: o.FwLpm, Idx: o.FwIdx, Fdef: o.FwFdef, Cfg: o.FwCfg,
		Gen: o.FwGen, Rules: o.FwRules, RuleCounters: o.FwRuleCounters, Args: o.FwArgs, ICMPBucket: o.FwIcmpBucket}
}

// SizeTables sets the capacity of the table maps of spec (a program
// including bpf/lib/fw_maps.h) for cls, and at least capy, in both
// generations.
func SizeTables(spec *ebpf.CollectionSpec, cls *Classifier, capy Capacity) error {
	bm, lpm := spec.Maps[fwProgMapFwBitmaps], spec.Maps[fwProgMapFwLpm]
	if bm == nil || lpm == nil {
		return fmt.Errorf("size classifier tables: %w: no fw_bitmaps / fw_lpm map", ErrUnsupported)
	}
	bm.MaxEntries = numGens * uint32(max(len(cls.Bitmaps), capy.Bitmaps, 1))
	lpm.MaxEntries = numGens * uint32(max(prefixCount(cls), capy.Prefixes, 1))
	return nil
}

// Active is the generation packets use (fw_gen).
func (t Tables) Active() (int, error) {
	var g uint32
	if err := t.Gen.Lookup(uint32(0), &g); err != nil {
		return 0, fmt.Errorf("read classifier generation: %w", err)
	}
	return int(g & 1), nil
}

// Stage compiles cfg and writes it into the generation packets do not
// use, after a grace period (no program run still reads it) and clearing
// what it held; it returns that generation. Packets see nothing of it
// until Flip. ErrCapacity: it does not fit the maps. Callers sharing the
// maps between processes hold the pin directory's lock (bpfrt.LockDir)
// from Stage to Flip.
func (t Tables) Stage(cfg Config) (int, *Classifier, error) {
	if err := checkConfig(&cfg); err != nil {
		return 0, nil, fmt.Errorf("stage classifier: %w", err)
	}
	cls, err := Compile(cfg.Rules)
	if err != nil {
		return 0, nil, fmt.Errorf("stage classifier: %w", err)
	}
	bmCap := t.Bitmaps.MaxEntries() / numGens
	if uint32(len(cls.Bitmaps)) > bmCap || uint32(prefixCount(cls)) > t.LPM.MaxEntries()/numGens {
		return 0, nil, fmt.Errorf("stage classifier: %w", ErrCapacity)
	}
	cur, err := t.Active()
	if err != nil {
		return 0, nil, fmt.Errorf("stage classifier: %w", err)
	}
	g := 1 - cur
	if err := synchronizeRCU(); err != nil {
		return 0, nil, fmt.Errorf("stage classifier: %w", err)
	}
	if err := t.clearGen(g); err != nil {
		return 0, nil, fmt.Errorf("stage classifier: %w", err)
	}
	if err := t.fill(g, bmCap, cls, cfg); err != nil {
		return 0, nil, fmt.Errorf("stage classifier: %w", err)
	}
	return g, cls, nil
}

// Flip makes packets use generation g (one word: a packet sees one whole
// generation).
func (t Tables) Flip(g int) error {
	if err := t.Gen.Put(uint32(0), uint32(g&1)); err != nil {
		return fmt.Errorf("flip classifier generation: %w", err)
	}
	return nil
}

// RuleSlots is how many rule slots one generation of the per-rule maps
// (fw_rules, fw_rule_counters, and the ingress's ing_policies) holds:
// MaxRules rules and the policy.
const RuleSlots = ruleSlots

// clearGen deletes generation g's prefixes and args by walking the maps
// (a firewall opened from its pins does not know what they hold).
func (tb Tables) clearGen(g int) error {
	var lk fwProgFwLpmKey
	var lv uint32
	var stale []fwProgFwLpmKey
	it := tb.LPM.Iterate()
	for it.Next(&lk, &lv) {
		if int(lk.Field)/lpmGen == g {
			stale = append(stale, lk)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list prefixes: %w", err)
	}
	for _, k := range stale {
		if err := tb.LPM.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete prefix: %w", err)
		}
	}
	var ak fwProgFwArgsKey
	var av uint32
	var staleArgs []fwProgFwArgsKey
	ai := tb.Args.Iterate()
	for ai.Next(&ak, &av) {
		if int(ak.Gen) == g {
			staleArgs = append(staleArgs, ak)
		}
	}
	if err := ai.Err(); err != nil {
		return fmt.Errorf("list args: %w", err)
	}
	for _, k := range staleArgs {
		_ = tb.Args.Delete(k)
	}
	return nil
}

// fill writes the compiled tables into generation g of the maps (not
// the one packets use, except at Load) and zeroes its rule counters.
func (tb Tables) fill(g int, bmCap uint32, c *Classifier, cfg Config) error {
	bmOff := uint32(g) * bmCap
	_, idxSize := idxBase()
	idxOff := uint32(g) * idxSize
	ruleOff := uint32(g) * ruleSlots
	// Bitmaps, with their summaries.
	keys := make([]uint32, len(c.Bitmaps))
	vals := make([]fwProgFwBitmap, len(c.Bitmaps))
	for i, b := range c.Bitmaps {
		keys[i] = bmOff + uint32(i)
		for w, x := range b {
			vals[i].W[w] = x
			if x != 0 {
				vals[i].Sum[w/64] |= 1 << (w % 64)
			}
		}
	}
	if _, err := tb.Bitmaps.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("fill bitmaps: %w", err)
	}
	// Prefix fields.
	var used uint32
	for f := Field(0); f < NumFields; f++ {
		t := &c.Fields[f]
		if !t.Used {
			continue
		}
		used |= 1 << f
		if !f.IsAddr() {
			continue
		}
		if err := tb.Fdef.Put(uint32(f)+uint32(g*NumAddrFields), fwProgFwFdef{Nomatch: bmOff + t.NoMatch, Absent: bmOff + t.Absent}); err != nil {
			return fmt.Errorf("fill field %v defaults: %w", f, err)
		}
		for _, p := range t.Prefixes {
			if err := tb.LPM.Put(lpmKey(f+Field(lpmGen*g), p.Prefix), bmOff+p.Bitmap); err != nil {
				return fmt.Errorf("fill field %v prefix %v: %w", f, p.Prefix, err)
			}
		}
	}
	// Integer fields: every value (and the absent slot) -> bitmap id.
	base, size := idxBase()
	ik := make([]uint32, 0, size)
	iv := make([]uint32, 0, size)
	for f := FProto; f < NumFields; f++ {
		t := &c.Fields[f]
		if !t.Used {
			continue
		}
		for _, in := range t.Intervals {
			for x := in.Lo; x <= in.Hi; x++ {
				ik = append(ik, idxOff+base[f]+x)
				iv = append(iv, bmOff+in.Bitmap)
			}
		}
		ik = append(ik, idxOff+base[f]+f.Domain())
		iv = append(iv, bmOff+t.Absent)
	}
	if len(ik) > 0 {
		if _, err := tb.Idx.BatchUpdate(ik, iv, nil); err != nil {
			return fmt.Errorf("fill value index: %w", err)
		}
	}
	// Verdicts, the policy in slot nrules.
	rk := make([]uint32, 0, len(cfg.Rules)+1)
	rv := make([]fwProgFwRule, 0, len(cfg.Rules)+1)
	for i, r := range cfg.Rules {
		rk = append(rk, ruleOff+uint32(i))
		rv = append(rv, fwProgFwRule{Verdict: uint32(r.Verdict)})
	}
	rk = append(rk, ruleOff+uint32(len(cfg.Rules))) // the policy
	rv = append(rv, fwProgFwRule{Verdict: uint32(cfg.Policy)})
	if _, err := tb.Rules.BatchUpdate(rk, rv, nil); err != nil {
		return fmt.Errorf("fill rules: %w", err)
	}
	// Counters of this generation start from zero.
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("fill counters: %w", err)
	}
	zeros := make([]fwProgFwCount, len(rk)*ncpu)
	if _, err := tb.RuleCounters.BatchUpdate(rk, zeros, nil); err != nil {
		return fmt.Errorf("zero counters: %w", err)
	}
	// A new rate starts with a full bucket (fw_icmp_allow).
	if tb.ICMPBucket == nil {
		// a program without the rate limiter (the eBPF ingress)
	} else if err := tb.ICMPBucket.Put(uint32(0), make([]fwProgFwBucket, ncpu)); err != nil {
		return fmt.Errorf("reset icmp rate limit: %w", err)
	}
	for k, v := range cfg.Args {
		if err := tb.Args.Put(fwProgFwArgsKey{Args: k, Gen: uint64(g)}, uint32(v)); err != nil {
			return fmt.Errorf("fill args %d: %w", k, err)
		}
	}
	// The config last: the tables it points into are complete by now.
	conf := fwProgFwConfig{Gen: uint32(g), Mode: uint32(cfg.Mode), Used: used, Nrules: uint32(len(cfg.Rules)), ArgsBits: uint32(cfg.ArgsBits), SidLen: 255, IcmpRate: uint32(cfg.ICMPRate)}
	if cfg.SID.IsValid() {
		conf.Sid.In6U.U6Addr8 = cfg.SID.Masked().Addr().As16()
		conf.SidLen = uint32(cfg.SID.Bits())
	}
	conf.Hash = cfg.hash()
	for f := Field(0); f < NumFields; f++ {
		if used&(1<<f) != 0 {
			conf.Fields[conf.Nused] = uint8(f)
			conf.Nused++
		}
	}
	if err := tb.Cfg.Put(uint32(g), conf); err != nil {
		return fmt.Errorf("fill config: %w", err)
	}
	return nil
}
