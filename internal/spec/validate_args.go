package spec

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sort"
)

// chainArgs checks chains[].args: each key is an NF of the chain, each
// value fits the SID format's ARGS bits (RFC 8986 section 3.1).
func (v *validator) chainArgs() {
	f := v.s.SIDFormat
	for i := range v.s.Chains {
		c := &v.s.Chains[i]
		names := make([]string, 0, len(c.Args))
		for name := range c.Args {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := fmt.Sprintf("chains[%d].args.%s", i, name)
			val := c.Args[name]
			switch {
			case !slices.Contains(c.NFs, name):
				v.add(p, "NF %q is not one of the chain's nfs", name)
			case f.ArgsBits <= 0:
				v.add(p, "sid_format.args_bits is 0: SIDs have no ARGS to set")
			case f.ArgsBits < 64 && val >= 1<<f.ArgsBits:
				v.add(p, "ARGS %#x does not fit sid_format.args_bits (%d)", val, f.ArgsBits)
			case c.Compression != "":
				v.add(p, "a compressed chain's SIDs carry no ARGS")
			}
		}
	}
}

// WithArgs returns sid with its ARGS bits (the args_bits after
// LOC:FUNCT, RFC 8986 section 3.1) set to arg.
func (f SIDFormat) WithArgs(sid netip.Addr, arg uint64) netip.Addr {
	p, err := sid.Prefix(f.LocatorBits + f.FunctionBits)
	if err != nil || f.ArgsBits <= 0 {
		return sid
	}
	hi, lo := split(p.Addr())
	shift := 128 - f.LocatorBits - f.FunctionBits - f.ArgsBits
	switch {
	case shift >= 64:
		hi |= arg << (shift - 64)
	case shift == 0:
		lo |= arg
	default:
		lo |= arg << shift
		hi |= arg >> (64 - shift)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}
