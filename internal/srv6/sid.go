package srv6

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// SIDFormat is the LOC:FUNCT:ARGS split of a SID (RFC 8986 section 3.1):
// the first LocatorBits bits route to the node, the next FunctionBits
// select the behavior, the next ArgsBits are its argument; any bits left
// over must be zero. Function and argument fit a uint64 each.
type SIDFormat struct {
	LocatorBits, FunctionBits, ArgsBits int
}

// Validate checks that the fields are non-negative, that function and
// arguments fit 64 bits each and that the sum is at most 128.
func (f SIDFormat) Validate() error {
	switch {
	case f.LocatorBits < 0 || f.FunctionBits < 0 || f.ArgsBits < 0:
		return fmt.Errorf("validate sid format %v: negative length: %w", f, ErrBadSIDFormat)
	case f.FunctionBits > 64 || f.ArgsBits > 64:
		return fmt.Errorf("validate sid format %v: function or args over 64 bits: %w", f, ErrBadSIDFormat)
	case f.LocatorBits+f.FunctionBits+f.ArgsBits > 128:
		return fmt.Errorf("validate sid format %v: over 128 bits: %w", f, ErrBadSIDFormat)
	}
	return nil
}

func (f SIDFormat) String() string {
	return fmt.Sprintf("%d:%d:%d", f.LocatorBits, f.FunctionBits, f.ArgsBits)
}

// Make builds the SID locator:function:args. The locator prefix must be
// IPv6 with exactly LocatorBits bits (its host bits are cleared).
func (f SIDFormat) Make(locator netip.Prefix, function, args uint64) (netip.Addr, error) {
	if err := f.Validate(); err != nil {
		return netip.Addr{}, err
	}
	if !locator.IsValid() || !locator.Addr().Is6() || locator.Bits() != f.LocatorBits {
		return netip.Addr{}, fmt.Errorf("make sid: locator %v is not a /%d ipv6 prefix: %w", locator, f.LocatorBits, ErrSIDOverflow)
	}
	if !fits(function, f.FunctionBits) || !fits(args, f.ArgsBits) {
		return netip.Addr{}, fmt.Errorf("make sid: function %#x or args %#x too wide for %v: %w", function, args, f, ErrSIDOverflow)
	}
	v := fromAddr(locator.Masked().Addr())
	v = v.set(f.LocatorBits, f.FunctionBits, function)
	v = v.set(f.LocatorBits+f.FunctionBits, f.ArgsBits, args)
	return v.addr(), nil
}

// Split returns the locator, function and args of a. An invalid format
// or a non-IPv6 address gives zero values.
func (f SIDFormat) Split(a netip.Addr) (locator netip.Prefix, function, args uint64) {
	if f.Validate() != nil || !a.Is6() {
		return netip.Prefix{}, 0, 0
	}
	locator = netip.PrefixFrom(a, f.LocatorBits).Masked()
	v := fromAddr(a)
	return locator, v.get(f.LocatorBits, f.FunctionBits), v.get(f.LocatorBits+f.FunctionBits, f.ArgsBits)
}

// Args returns the argument bits of a.
func (f SIDFormat) Args(a netip.Addr) uint64 {
	_, _, args := f.Split(a)
	return args
}

// WithArgs returns a with its argument bits replaced by args (truncated
// to ArgsBits). An invalid format or non-IPv6 address is returned as is.
func (f SIDFormat) WithArgs(a netip.Addr, args uint64) netip.Addr {
	if f.Validate() != nil || !a.Is6() {
		return a
	}
	return fromAddr(a).set(f.LocatorBits+f.FunctionBits, f.ArgsBits, args).addr()
}

func fits(v uint64, bits int) bool { return bits >= 64 || v>>bits == 0 }

// u128 is an IPv6 address as a 128-bit big-endian number.
type u128 struct{ hi, lo uint64 }

func fromAddr(a netip.Addr) u128 {
	b := as16(a)
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (v u128) addr() netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], v.hi)
	binary.BigEndian.PutUint64(b[8:], v.lo)
	return netip.AddrFrom16(b)
}

func (v u128) shl(n int) u128 {
	switch {
	case n <= 0:
		return v
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{v.lo << (n - 64), 0}
	}
	return u128{v.hi<<n | v.lo>>(64-n), v.lo << n}
}

func (v u128) shr(n int) u128 {
	switch {
	case n <= 0:
		return v
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{0, v.hi >> (n - 64)}
	}
	return u128{v.hi >> n, v.lo>>n | v.hi<<(64-n)}
}

func (v u128) and(w u128) u128 { return u128{v.hi & w.hi, v.lo & w.lo} }
func (v u128) or(w u128) u128  { return u128{v.hi | w.hi, v.lo | w.lo} }
func (v u128) not() u128       { return u128{^v.hi, ^v.lo} }
func (v u128) isZero() bool    { return v.hi == 0 && v.lo == 0 }

// ones is a mask of n one bits at the low end.
func ones(n int) u128 { return u128{^uint64(0), ^uint64(0)}.shr(128 - n) }

// field is the mask of bits [off, off+n) counted from the most significant bit.
func field(off, n int) u128 {
	if n <= 0 || off >= 128 {
		return u128{}
	}
	return ones(n).shl(128 - off - n)
}

func (v u128) get(off, n int) uint64 {
	if n <= 0 {
		return 0
	}
	return v.and(field(off, n)).shr(128 - off - n).lo
}

func (v u128) set(off, n int, x uint64) u128 {
	if n <= 0 {
		return v
	}
	m := field(off, n)
	return v.and(m.not()).or(u128{0, x}.shl(128 - off - n).and(m))
}

// CSIDNext applies the NEXT-C-SID shift (draft-ietf-spring-srv6-srh-
// compression section 4.1, pseudocode N01-N08): when the argument of dst
// (the bits behind the locator block and the current node-function) is
// non-zero, the argument moves left by nfBits into the node-function
// position and the freed low bits become zero. It returns false and dst
// unchanged when the argument is exhausted (the End part of the flavor
// then applies: SL - 1 and the next container from the SRH).
func CSIDNext(dst netip.Addr, blockBits, nfBits int) (netip.Addr, bool) {
	if blockBits < 0 || nfBits <= 0 || blockBits+nfBits > 128 || !dst.Is6() {
		return dst, false
	}
	v := fromAddr(dst)
	argOff := blockBits + nfBits
	arg := v.and(field(argOff, 128-argOff))
	if arg.isZero() {
		return dst, false
	}
	block := v.and(field(0, blockBits))
	return block.or(arg.shl(nfBits)).addr(), true
}

// CSIDContainer builds a NEXT-C-SID container with 16-bit node-function
// C-SIDs (the "lblen 48 nflen 16" configuration with a /48 block): block,
// then csids in travel order, then zeros.
func CSIDContainer(block netip.Prefix, csids ...uint16) (netip.Addr, error) {
	w := make([]uint64, len(csids))
	for i, c := range csids {
		w[i] = uint64(c)
	}
	return CSIDContainerBits(block, 16, w...)
}

// CSIDContainerBits is CSIDContainer for any node-function length.
func CSIDContainerBits(block netip.Prefix, nfBits int, csids ...uint64) (netip.Addr, error) {
	b := block.Bits()
	switch {
	case !block.IsValid() || !block.Addr().Is6():
		return netip.Addr{}, fmt.Errorf("build c-sid container: block %v is not ipv6: %w", block, ErrBadSIDFormat)
	case nfBits <= 0 || nfBits > 64:
		return netip.Addr{}, fmt.Errorf("build c-sid container: node-function length %d: %w", nfBits, ErrBadSIDFormat)
	case len(csids) == 0:
		return netip.Addr{}, fmt.Errorf("build c-sid container: %w", ErrNoSegments)
	case b+nfBits*len(csids) > 128:
		return netip.Addr{}, fmt.Errorf("build c-sid container: %d c-sids of %d bits behind a /%d: %w", len(csids), nfBits, b, ErrTooLong)
	}
	v := fromAddr(block.Masked().Addr())
	for i, c := range csids {
		if !fits(c, nfBits) {
			return netip.Addr{}, fmt.Errorf("build c-sid container: c-sid %#x over %d bits: %w", c, nfBits, ErrSIDOverflow)
		}
		v = v.set(b+i*nfBits, nfBits, c)
	}
	return v.addr(), nil
}

// CSIDPack packs csids (travel order) into as few containers as possible,
// (128 - block bits) / nfBits C-SIDs each, giving the segment list (travel
// order) of a NEXT-C-SID path.
func CSIDPack(block netip.Prefix, nfBits int, csids []uint64) ([]netip.Addr, error) {
	if nfBits <= 0 || !block.IsValid() || block.Bits()+nfBits > 128 {
		return nil, fmt.Errorf("pack c-sids: /%d block with %d-bit c-sids: %w", block.Bits(), nfBits, ErrBadSIDFormat)
	}
	if len(csids) == 0 {
		return nil, fmt.Errorf("pack c-sids: %w", ErrNoSegments)
	}
	per := (128 - block.Bits()) / nfBits
	var out []netip.Addr
	for len(csids) > 0 {
		n := min(per, len(csids))
		a, err := CSIDContainerBits(block, nfBits, csids[:n]...)
		if err != nil {
			return nil, fmt.Errorf("pack c-sids: %w", err)
		}
		out = append(out, a)
		csids = csids[n:]
	}
	return out, nil
}
