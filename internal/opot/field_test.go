package opot

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

var bigP61 = new(big.Int).SetUint64(P61)

func refMul(a, b uint64) uint64 {
	x := new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
	return x.Mod(x, bigP61).Uint64()
}

// edge61 are the values where a limb or a fold carries: 0, 1, p-1, p
// itself (allowed as input, = 0), 2^61-2, limb boundaries.
var edge61 = []uint64{0, 1, 2, P61 - 1, P61, P61 - 2, 1 << 32, 1<<32 - 1, 1<<32 + 1,
	1 << 29, 1<<29 - 1, 1 << 60, 1<<60 - 1, 1<<60 + 1, 0xffffffff00000000 & P61, 0x5555555555555555 & P61}

func TestMulMod61Edges(t *testing.T) {
	for _, a := range edge61 {
		for _, b := range edge61 {
			if got, want := MulMod61(a, b), refMul(a, b); got != want {
				t.Errorf("MulMod61(%#x, %#x) = %#x, want %#x", a, b, got, want)
			}
		}
	}
}

func TestMulMod61Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		a, b := r.Uint64()&P61, r.Uint64()&P61
		if got, want := MulMod61(a, b), refMul(a, b); got != want {
			t.Fatalf("MulMod61(%#x, %#x) = %#x, want %#x", a, b, got, want)
		}
	}
}

func TestAddReduce61(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vals := append([]uint64{^uint64(0), 1 << 63, 1<<62 - 1, 3 * P61, 3*P61 + 2}, edge61...)
	for range 10000 {
		vals = append(vals, r.Uint64())
	}
	for _, x := range vals {
		if got, want := Reduce61(x), x%P61; got != want {
			t.Fatalf("Reduce61(%#x) = %#x, want %#x", x, got, want)
		}
		a, b := x%P61, Reduce61(^x)
		if got, want := AddMod61(a, b), (new(big.Int).Add(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))); got != want.Mod(want, bigP61).Uint64() {
			t.Fatalf("AddMod61(%#x, %#x) = %#x, want %v", a, b, got, want)
		}
	}
}

func TestFieldGeneric(t *testing.T) {
	f, err := NewField(53)
	if err != nil {
		t.Fatal(err)
	}
	for a := uint64(0); a < 53; a++ {
		for b := uint64(0); b < 53; b++ {
			if f.Mul(a, b) != a*b%53 || f.Add(a, b) != (a+b)%53 || f.Sub(a, b) != (a+53-b)%53 {
				t.Fatalf("field 53 wrong at %d, %d", a, b)
			}
		}
		if a != 0 && f.Mul(a, f.Inv(a)) != 1 {
			t.Fatalf("inverse of %d wrong", a)
		}
	}
	for _, p := range []uint64{0, 1, 2, 4, 51, 1 << 62, P61 + 2} {
		if _, err := NewField(p); err == nil {
			t.Errorf("NewField(%d) accepted", p)
		}
	}
	if x := uint64(123456789123); F61.Mul(x, F61.Inv(x)) != 1 {
		t.Error("F61 inverse wrong")
	}
}

// FuzzMulMod61 checks the C-shaped multiply against math/big on any
// inputs below 2^61 (the fuzzer's uint64s are masked to the domain).
func FuzzMulMod61(f *testing.F) {
	for _, a := range edge61 {
		f.Add(a, P61-1)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		a, b = a&P61, b&P61
		if got, want := MulMod61(a, b), refMul(a, b); got != want {
			t.Fatalf("MulMod61(%#x, %#x) = %#x, want %#x", a, b, got, want)
		}
		if got := Reduce61(a<<3 | b>>61); got != (a<<3|b>>61)%P61 {
			t.Fatalf("Reduce61 wrong")
		}
	})
}
