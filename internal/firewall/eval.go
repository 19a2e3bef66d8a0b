package firewall

import (
	"fmt"
	"net/netip"
)

// Mode selects how a packet's fields map onto rule fields (seed 000 IV).
type Mode uint32

const (
	// Basic: legacy rules see the original packet. Encap mode: -s/-d,
	// -p and ports are the inner packet's; insert mode: -s is the outer
	// source, -d the last segment (segment[0], the original destination)
	// and -p/ports the transport behind the SRH; non-SR traffic is
	// filtered as it is.
	Basic Mode = 0
	// Advanced: -s/-d/-p/ports are the outer packet's exactly as
	// ip6tables sees them (-p is the first non-extension header, 41 or 4
	// for an encapsulation); the inner packet is reached with
	// --inner-src/--inner-dst.
	Advanced Mode = 1
)

func (m Mode) String() string {
	if m == Advanced {
		return "advanced"
	}
	return "basic"
}

// ParseMode reads "basic" or "advanced".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "basic", "":
		return Basic, nil
	case "advanced":
		return Advanced, nil
	}
	return 0, fmt.Errorf("parse mode %q: %w", s, ErrSyntax)
}

// View is a packet as the rules see it: one value per field, or absent.
// Addresses are IPv6 or IPv4-mapped IPv6; a zero Addr is absent.
type View struct {
	Addr [NumAddrFields]netip.Addr
	// Int holds the integer fields (index Field - NumAddrFields); a value
	// of the field's Domain() means absent.
	Int [int(NumFields) - NumAddrFields]uint32
}

// Set stores an integer field.
func (v *View) Set(f Field, x uint32) { v.Int[int(f)-NumAddrFields] = x }

// Get returns an integer field.
func (v *View) Get(f Field) uint32 { return v.Int[int(f)-NumAddrFields] }

// SetAddr stores a prefix field (IPv4 is mapped).
func (v *View) SetAddr(f Field, a netip.Addr) { v.Addr[f] = normAddr(a) }

// SetIface stores an interface field (0: unknown, absent).
func (v *View) SetIface(f Field, ifindex uint32) {
	if ifindex == 0 {
		v.Addr[f] = netip.Addr{}
		return
	}
	v.Addr[f] = ifaceAddr(ifindex)
}

// NewView returns a view with every field absent.
func NewView() View {
	var v View
	for f := Field(NumAddrFields); f < NumFields; f++ {
		v.Set(f, f.Domain())
	}
	return v
}

// ifaceAddr encodes an ifindex as the 4-byte key of the iif/oif fields.
func ifaceAddr(ifindex uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(ifindex >> 24), byte(ifindex >> 16), byte(ifindex >> 8), byte(ifindex)})
}

// Matches reports whether c holds for v. An absent field fails, negated or
// not (the kernel's ip6t_srh returns false before looking at the
// inversion flag when the SID it needs does not exist).
func (c Cond) Matches(v *View) bool {
	if c.Field.IsAddr() {
		a := v.Addr[c.Field]
		if !a.IsValid() {
			return false
		}
		return c.Prefix.Contains(a) != c.Neg
	}
	x := v.Get(c.Field)
	if x >= c.Field.Domain() {
		return false
	}
	return (c.Lo <= x && x <= c.Hi) != c.Neg
}

// Matches reports whether every condition of r holds.
func (r *Rule) Matches(v *View) bool {
	for i := range r.Conds {
		if !r.Conds[i].Matches(v) {
			return false
		}
	}
	return true
}

// Eval is the reference classifier: iptables' first match, a linear scan.
// It returns the index of the first matching rule, or -1.
func Eval(rules []Rule, v *View) int {
	for i := range rules {
		if rules[i].Matches(v) {
			return i
		}
	}
	return -1
}
