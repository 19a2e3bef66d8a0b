package spec

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// SIDPlan is every SID a spec instantiates, explicit or allocated. Each
// prefix keeps the address as written (ARGS bits included, as used in
// segment lists); Masked() gives the route to install.
type SIDPlan struct {
	// NF maps an NF name to its SID prefix.
	NF map[string]netip.Prefix
	// Egress maps an encap-mode chain name to its decapsulation SID.
	Egress map[string]netip.Prefix
	// Binding maps a chain split into pathlets to the binding SIDs of
	// its pathlets 1, 2, ... (index k-1 for pathlet k), each on the
	// pathlet's Host.
	Binding map[string][]netip.Prefix
	// PathletEnd maps a node to the End.DT6 SID that closes every
	// pathlet ending there.
	PathletEnd map[string]netip.Prefix
	// Errors are allocation failures keyed by field path.
	Errors map[string]string
}

// SIDBits is the prefix length of a SID route: LOC+FUNCT when ARGS bits
// follow (the ARGS are wildcarded, RFC 8986 section 3.1), else /128.
func (f SIDFormat) SIDBits() int {
	if f.ArgsBits > 0 {
		return f.LocatorBits + f.FunctionBits
	}
	return 128
}

// Function extracts the FUNCT bits of a SID (low 64 bits of them).
func (f SIDFormat) Function(a netip.Addr) uint64 {
	hi, lo := split(a)
	shift := 128 - f.LocatorBits - f.FunctionBits
	v := shr(hi, lo, shift)
	if f.FunctionBits < 64 {
		v &= 1<<f.FunctionBits - 1
	}
	return v
}

// MakeSID places function fn in the FUNCT bits of locator loc.
func (f SIDFormat) MakeSID(loc netip.Prefix, fn uint64) netip.Addr {
	hi, lo := split(loc.Masked().Addr())
	shift := 128 - f.LocatorBits - f.FunctionBits
	switch {
	case shift >= 64:
		hi |= fn << (shift - 64)
	case shift == 0:
		lo |= fn
	default:
		lo |= fn << shift
		hi |= fn >> (64 - shift)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

func split(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

func shr(hi, lo uint64, n int) uint64 {
	switch {
	case n >= 128:
		return 0
	case n >= 64:
		return hi >> (n - 64)
	case n == 0:
		return lo
	}
	return lo>>n | hi<<(64-n)
}

// validFormat reports whether the SID format can be used for allocation.
func (f SIDFormat) validFormat() bool {
	return f.LocatorBits > 0 && f.FunctionBits > 0 && f.ArgsBits >= 0 &&
		f.LocatorBits+f.FunctionBits+f.ArgsBits <= 128
}

// SIDs allocates the SIDs the spec leaves implicit. Explicit SIDs are kept
// as written. Allocation is per router locator, functions 1, 2, 3, ...
// (function 0 is skipped so no SID equals its locator), skipping those used by
// explicit SIDs; NFs first in file order, then encap-mode chains' egress
// SIDs in file order, then for each chain split into pathlets its binding
// SIDs and the pathlet ends its pathlets need first, in pathlet order. The
// result depends only on the spec.
func (s *Spec) SIDs() SIDPlan {
	plan := SIDPlan{NF: map[string]netip.Prefix{}, Egress: map[string]netip.Prefix{}, Binding: map[string][]netip.Prefix{},
		PathletEnd: map[string]netip.Prefix{}, Errors: map[string]string{}}
	f := s.SIDFormat
	if !f.validFormat() {
		return plan
	}
	bits := f.SIDBits()
	used := map[string]map[uint64]bool{}
	mark := func(node string, a netip.Addr) {
		n := s.Node(node)
		if n == nil || !n.Locator.IsValid() || !n.Locator.Contains(a) {
			return
		}
		if used[node] == nil {
			used[node] = map[uint64]bool{}
		}
		used[node][f.Function(a)] = true
	}
	for _, nf := range s.NFs {
		if nf.SID.IsValid() {
			mark(nf.Node, nf.SID)
		}
	}
	for _, c := range s.Chains {
		if c.EgressSID.IsValid() {
			mark(c.Egress, c.EgressSID)
		}
	}
	next := map[string]uint64{}
	alloc := func(node, path string) (netip.Prefix, bool) {
		n := s.Node(node)
		if n == nil || n.Role != RoleRouter || !n.Locator.IsValid() || n.Locator.Bits() != f.LocatorBits {
			return netip.Prefix{}, false
		}
		fn := next[node] + 1
		for used[node][fn] {
			fn++
		}
		if f.FunctionBits < 64 && fn >= 1<<f.FunctionBits {
			plan.Errors[path] = fmt.Sprintf("no free function in locator %s", n.Locator)
			return netip.Prefix{}, false
		}
		next[node] = fn
		return netip.PrefixFrom(f.MakeSID(n.Locator, fn), bits), true
	}
	for i, nf := range s.NFs {
		if nf.SID.IsValid() {
			plan.NF[nf.Name] = netip.PrefixFrom(nf.SID, bits)
			continue
		}
		if p, ok := alloc(nf.Node, fmt.Sprintf("nfs[%d]", i)); ok {
			plan.NF[nf.Name] = p
		}
	}
	for i, c := range s.Chains {
		if c.Mode != ModeEncap {
			continue
		}
		if c.EgressSID.IsValid() {
			plan.Egress[c.Name] = netip.PrefixFrom(c.EgressSID, bits)
			continue
		}
		if p, ok := alloc(c.Egress, fmt.Sprintf("chains[%d]", i)); ok {
			plan.Egress[c.Name] = p
		}
	}
	for i := range s.Chains {
		c := &s.Chains[i]
		ps := s.Pathlets(c)
		path := fmt.Sprintf("chains[%d].max_sids", i)
		for k := 1; k < len(ps); k++ {
			b, ok := alloc(ps[k].Host, path)
			if !ok {
				break
			}
			plan.Binding[c.Name] = append(plan.Binding[c.Name], b)
			if _, ok := plan.PathletEnd[ps[k].End]; !ok {
				if e, ok := alloc(ps[k].End, path); ok {
					plan.PathletEnd[ps[k].End] = e
				}
			}
		}
	}
	return plan
}
