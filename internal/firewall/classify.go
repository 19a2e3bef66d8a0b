package firewall

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"sort"
)

// Bitmap is a set of rule indexes, bit i of word i/64 = rule i.
type Bitmap []uint64

func (b Bitmap) set(i int)   { b[i/64] |= 1 << (uint(i) % 64) }
func (b Bitmap) clear(i int) { b[i/64] &^= 1 << (uint(i) % 64) }

// First returns the lowest set bit, or -1.
func (b Bitmap) First() int {
	for w, x := range b {
		if x != 0 {
			return w*64 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// PrefixEntry maps one prefix of a prefix field to a bitmap.
type PrefixEntry struct {
	Prefix netip.Prefix
	Bitmap uint32 // index into Classifier.Bitmaps
}

// Interval maps the values [Lo, Hi] of an integer field to a bitmap.
type Interval struct {
	Lo, Hi uint32
	Bitmap uint32
}

// FieldTable is the compiled lookup structure of one field. For a value
// present in the packet the bitmap is: prefix fields, that of the longest
// listed prefix containing it, else NoMatch; integer fields, that of the
// interval holding it. Absent values map to Absent.
type FieldTable struct {
	Used      bool // some rule tests the field; unused fields are all-ones
	Prefixes  []PrefixEntry
	Intervals []Interval
	NoMatch   uint32
	Absent    uint32
}

// Classifier is a compiled rule set (bit-vector search, bpf-iptables).
type Classifier struct {
	NRules  int
	NWords  int      // words of every bitmap that can be non-zero
	Bitmaps []Bitmap // deduplicated; Bitmaps[0] is all rules
	Fields  [NumFields]FieldTable
}

// Stats summarises a classifier for `srchain firewall check`.
type Stats struct {
	Rules, Words, Bitmaps, Prefixes, Intervals, FieldsUsed int
}

// Stats counts the classifier's tables.
func (c *Classifier) Stats() Stats {
	s := Stats{Rules: c.NRules, Words: c.NWords, Bitmaps: len(c.Bitmaps)}
	for _, t := range c.Fields {
		if t.Used {
			s.FieldsUsed++
		}
		s.Prefixes += len(t.Prefixes)
		s.Intervals += len(t.Intervals)
	}
	return s
}

// bitmapSet deduplicates bitmaps.
type bitmapSet struct {
	nwords int
	list   []Bitmap
	index  map[string]uint32
}

func (s *bitmapSet) add(b Bitmap) uint32 {
	key := make([]byte, 8*len(b))
	for i, w := range b {
		binary.LittleEndian.PutUint64(key[8*i:], w)
	}
	if id, ok := s.index[string(key)]; ok {
		return id
	}
	id := uint32(len(s.list))
	s.list = append(s.list, slices.Clone(b))
	s.index[string(key)] = id
	return id
}

// Resolve fills the prefixes of -i/-o conditions from interface names.
func Resolve(rules []Rule, ifindex func(name string) (uint32, error)) ([]Rule, error) {
	out := slices.Clone(rules)
	for i := range out {
		out[i].Conds = slices.Clone(out[i].Conds)
		for j := range out[i].Conds {
			c := &out[i].Conds[j]
			if c.Field != FIIF && c.Field != FOIF {
				continue
			}
			idx, err := ifindex(c.Iface)
			if err != nil || idx == 0 {
				return nil, fmt.Errorf("resolve interface %q of rule %d: %w", c.Iface, i+1, ErrNoInterface)
			}
			c.Prefix = netip.PrefixFrom(ifaceAddr(idx), 32)
		}
	}
	return out, nil
}

// Compile builds the classifier of rules (interfaces already resolved).
func Compile(rules []Rule) (*Classifier, error) {
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("compile %d rules: %w", len(rules), ErrTooMany)
	}
	for i, r := range rules {
		for _, c := range r.Conds {
			if (c.Field == FIIF || c.Field == FOIF) && !c.Prefix.IsValid() {
				return nil, fmt.Errorf("compile rule %d: interface %q not resolved: %w", i+1, c.Iface, ErrNoInterface)
			}
		}
	}
	n := len(rules)
	nw := max((n+63)/64, 1)
	c := &Classifier{NRules: n, NWords: nw}
	bs := &bitmapSet{nwords: nw, index: map[string]uint32{}}
	all := make(Bitmap, nw)
	for i := 0; i < n; i++ {
		all.set(i)
	}
	bs.add(all) // id 0: all rules, used by unused fields
	for f := Field(0); f < NumFields; f++ {
		var users []int
		for i := range rules {
			for _, cd := range rules[i].Conds {
				if cd.Field == f {
					users = append(users, i)
					break
				}
			}
		}
		if len(users) == 0 {
			continue
		}
		t := &c.Fields[f]
		t.Used = true
		// Rules that do not test f match whatever its value, absent too.
		wild := slices.Clone(all)
		for _, i := range users {
			wild.clear(i)
		}
		t.Absent = bs.add(wild)
		if f.IsAddr() {
			compilePrefixes(t, rules, users, f, wild, bs)
		} else {
			compileIntervals(t, rules, users, f, wild, bs)
		}
	}
	c.Bitmaps = bs.list
	return c, nil
}

// compilePrefixes: for each distinct prefix P the rules match the values
// whose longest listed prefix is P: a rule on prefix A matches iff A
// contains P (A is P or an ancestor of P, both being prefixes of the
// value), inverted for negated rules. A rule with several conditions on
// the field (a match loaded twice: "-m srh --srh-psid A -m srh
// --srh-psid B") needs all of them, so it is evaluated per P apart from
// the one-condition rules' ancestor walk.
func compilePrefixes(t *FieldTable, rules []Rule, users []int, f Field, wild Bitmap, bs *bitmapSet) {
	pos := map[netip.Prefix][]int{}
	neg := map[netip.Prefix][]int{}
	multi := map[int][]Cond{}
	base := slices.Clone(wild)
	for _, i := range users {
		var cs []Cond
		for _, cd := range rules[i].Conds {
			if cd.Field == f {
				cs = append(cs, cd)
			}
		}
		if len(cs) > 1 {
			multi[i] = cs
			allNeg := true
			for _, cd := range cs {
				allNeg = allNeg && cd.Neg
			}
			if allNeg { // no listed prefix holds the value: every condition holds
				base.set(i)
			}
			continue
		}
		if cs[0].Neg {
			neg[cs[0].Prefix] = append(neg[cs[0].Prefix], i)
			base.set(i)
		} else {
			pos[cs[0].Prefix] = append(pos[cs[0].Prefix], i)
		}
	}
	t.NoMatch = bs.add(base)
	seen := map[netip.Prefix]bool{}
	var all []netip.Prefix
	for _, i := range users {
		for _, cd := range rules[i].Conds {
			if cd.Field == f && !seen[cd.Prefix] {
				seen[cd.Prefix] = true
				all = append(all, cd.Prefix)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Bits() != all[j].Bits() {
			return all[i].Bits() > all[j].Bits()
		}
		return all[i].Addr().Less(all[j].Addr())
	})
	b := make(Bitmap, len(wild))
	for _, p := range all {
		copy(b, base)
		for l := 0; l <= p.Bits(); l++ {
			a := netip.PrefixFrom(p.Addr(), l).Masked()
			for _, i := range pos[a] {
				b.set(i)
			}
			for _, i := range neg[a] {
				b.clear(i)
			}
		}
		for i, cs := range multi {
			ok := true
			for _, cd := range cs {
				in := cd.Prefix.Bits() <= p.Bits() && cd.Prefix.Contains(p.Addr())
				ok = ok && in != cd.Neg
			}
			if ok {
				b.set(i)
			} else {
				b.clear(i)
			}
		}
		t.Prefixes = append(t.Prefixes, PrefixEntry{Prefix: p, Bitmap: bs.add(b)})
	}
}

// compileIntervals cuts the field's domain at every range boundary of its
// rules and computes one bitmap per elementary interval.
func compileIntervals(t *FieldTable, rules []Rule, users []int, f Field, wild Bitmap, bs *bitmapSet) {
	dom := f.Domain()
	cuts := map[uint32]bool{0: true}
	for _, i := range users {
		for _, cd := range rules[i].Conds {
			if cd.Field == f && cd.Lo <= cd.Hi {
				cuts[cd.Lo] = true
				if cd.Hi+1 < dom {
					cuts[cd.Hi+1] = true
				}
			}
		}
	}
	starts := make([]uint32, 0, len(cuts))
	for x := range cuts {
		starts = append(starts, x)
	}
	slices.Sort(starts)
	maps := make([]Bitmap, len(starts))
	for k := range maps {
		maps[k] = slices.Clone(wild)
	}
	for _, i := range users {
		// The rule's matching intervals: intersect its conditions, each a
		// run of intervals (or the complement of one when negated).
		ok := make([]bool, len(starts))
		for k := range ok {
			ok[k] = true
		}
		for _, cd := range rules[i].Conds {
			if cd.Field != f {
				continue
			}
			in := func(k int) bool { return cd.Lo <= starts[k] && starts[k] <= cd.Hi }
			for k := range ok {
				if in(k) == cd.Neg {
					ok[k] = false
				}
			}
		}
		for k, m := range ok {
			if m {
				maps[k].set(i)
			}
		}
	}
	for k, lo := range starts {
		hi := dom - 1
		if k+1 < len(starts) {
			hi = starts[k+1] - 1
		}
		id := bs.add(maps[k])
		if n := len(t.Intervals); n > 0 && t.Intervals[n-1].Bitmap == id {
			t.Intervals[n-1].Hi = hi
			continue
		}
		t.Intervals = append(t.Intervals, Interval{Lo: lo, Hi: hi, Bitmap: id})
	}
}

// lookup returns the bitmap id of field f for view v.
func (c *Classifier) lookup(f Field, v *View) uint32 {
	t := &c.Fields[f]
	if !t.Used {
		return 0
	}
	if f.IsAddr() {
		a := v.Addr[f]
		if !a.IsValid() {
			return t.Absent
		}
		// Prefixes are sorted longest first: the first hit is the LPM.
		for _, p := range t.Prefixes {
			if p.Prefix.Contains(a) {
				return p.Bitmap
			}
		}
		return t.NoMatch
	}
	x := v.Get(f)
	if x >= f.Domain() {
		return t.Absent
	}
	k := sort.Search(len(t.Intervals), func(k int) bool { return t.Intervals[k].Hi >= x })
	return t.Intervals[k].Bitmap
}

// Classify returns the first matching rule for v, or -1, by ANDing the
// fields' bitmaps word by word and stopping at the first non-zero word.
func (c *Classifier) Classify(v *View) int {
	var ids [NumFields]uint32
	for f := Field(0); f < NumFields; f++ {
		ids[f] = c.lookup(f, v)
	}
	for w := 0; w < c.NWords; w++ {
		acc := ^uint64(0)
		for f := range ids {
			acc &= c.Bitmaps[ids[f]][w]
		}
		if acc != 0 {
			return w*64 + bits.TrailingZeros64(acc)
		}
	}
	return -1
}
