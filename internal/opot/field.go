package opot

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
)

// P61 is the prime of every generated profile: the Mersenne prime
// 2^61 - 1. Reduction modulo a Mersenne prime needs only shifts, masks
// and adds (2^61 = 1 mod P61), so the eBPF programs can multiply with
// four 32x32-bit products and no 128-bit arithmetic; docs/opot.md
// compares it with VPP's 63-bit prime.
const P61 uint64 = 1<<61 - 1

const mask32 = 1<<32 - 1

// MulMod61 returns a*b mod P61 for a, b < 2^61. It is written as the C
// in bpf/lib will be: 32-bit limbs, 64-bit multiplies that cannot
// overflow, and the Mersenne fold. With a = a1*2^32 + a0 (a1 < 2^29):
//
//	a*b = hi*2^64 + mid*2^32 + lo
//	hi = a1*b1 < 2^58, mid = a0*b1 + a1*b0 < 2^62, lo = a0*b0 < 2^64
//
// and, since 2^61 = 1 (mod P61): 2^64 = 8, mid*2^32 = (mid>>29) +
// (mid mod 2^29)*2^32, lo = (lo>>61) + (lo mod 2^61). The sum of those
// five terms is below 2^63, one fold brings it below 2^61 + 4, and one
// conditional subtraction makes it canonical.
func MulMod61(a, b uint64) uint64 {
	a0, a1 := a&mask32, a>>32
	b0, b1 := b&mask32, b>>32
	lo := a0 * b0
	mid := a0*b1 + a1*b0
	hi := a1 * b1
	s := hi<<3 + mid>>29 + (mid&(1<<29-1))<<32 + lo>>61 + lo&P61
	s = s&P61 + s>>61
	if s >= P61 {
		s -= P61
	}
	return s
}

// AddMod61 returns a+b mod P61 for canonical a, b (< P61).
func AddMod61(a, b uint64) uint64 {
	s := a + b
	if s >= P61 {
		s -= P61
	}
	return s
}

// Reduce61 returns x mod P61 for any 64-bit x: the transit reduces
// deciphered values with it, so that a wrong key never makes it fail
// (seed 003 III-A4: failures surface at the verifier).
func Reduce61(x uint64) uint64 {
	x = x&P61 + x>>61
	if x >= P61 {
		x -= P61
	}
	return x
}

// ErrField: a modulus is not an odd prime below 2^62.
var ErrField = errors.New("bad field modulus")

// Field is arithmetic modulo a prime p. Generated profiles always use
// P61, whose operations are MulMod61/AddMod61/Reduce61; other primes
// exist for the seed's worked example (p = 53, Fig. 2) and use the
// generic math/bits path, which the data plane never needs.
type Field struct{ p uint64 }

// F61 is the field of the data plane.
var F61 = Field{p: P61}

// NewField returns the field modulo p.
func NewField(p uint64) (Field, error) {
	if p < 3 || p >= 1<<62 || !new(big.Int).SetUint64(p).ProbablyPrime(20) {
		return Field{}, fmt.Errorf("new field %d: %w", p, ErrField)
	}
	return Field{p: p}, nil
}

// P returns the modulus.
func (f Field) P() uint64 { return f.p }

// Reduce returns x mod p.
func (f Field) Reduce(x uint64) uint64 {
	if f.p == P61 {
		return Reduce61(x)
	}
	return x % f.p
}

// Add returns a+b mod p for canonical a, b.
func (f Field) Add(a, b uint64) uint64 {
	s := a + b
	if s >= f.p {
		s -= f.p
	}
	return s
}

// Sub returns a-b mod p for canonical a, b.
func (f Field) Sub(a, b uint64) uint64 {
	if a >= b {
		return a - b
	}
	return a + (f.p - b)
}

// Mul returns a*b mod p for canonical a, b.
func (f Field) Mul(a, b uint64) uint64 {
	if f.p == P61 {
		return MulMod61(a, b)
	}
	hi, lo := bits.Mul64(a, b)
	return bits.Rem64(hi, lo, f.p)
}

// Inv returns the inverse of a non-zero canonical a (Fermat: a^(p-2)).
func (f Field) Inv(a uint64) uint64 {
	r, e := uint64(1), f.p-2
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = f.Mul(r, a)
		}
		a = f.Mul(a, a)
	}
	return r
}

// Eval returns c[0] + c[1]x + ... + c[n]x^n mod p (Horner).
func (f Field) Eval(c []uint64, x uint64) uint64 {
	var y uint64
	for i := len(c) - 1; i >= 0; i-- {
		y = f.Add(f.Mul(y, x), c[i])
	}
	return y
}
