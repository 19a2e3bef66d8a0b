package firewall

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// Small pools so that random rules and packets collide often.
var (
	testAddrs = []string{"fc00:1::1", "fc00:1::2", "fc00:1:0:1::1", "fc00:2::f1:0", "fc00:3::d6", "fc00:d1::1", "::ffff:10.0.0.1", "::ffff:10.1.0.1"}
	testPlens = []int{0, 16, 32, 48, 64, 112, 120, 128}
)

func randAddr(r *rand.Rand) netip.Addr { return netip.MustParseAddr(testAddrs[r.IntN(len(testAddrs))]) }

func randCond(r *rand.Rand, f Field) Cond {
	c := Cond{Field: f, Neg: r.IntN(3) == 0}
	switch {
	case f == FIIF || f == FOIF:
		c.Prefix = netip.PrefixFrom(ifaceAddr(uint32(1+r.IntN(3))), 32)
	case f.IsAddr():
		c.Prefix = netip.PrefixFrom(randAddr(r), testPlens[r.IntN(len(testPlens))]).Masked()
	case f == FSRH:
		c.Neg, c.Lo, c.Hi = false, 1, 1
	default:
		d := f.Domain()
		pool := []uint32{0, 1, 2, 3, 6, 17, 41, 53, 80, d - 1}
		a, b := pool[r.IntN(len(pool))]%d, pool[r.IntN(len(pool))]%d
		if a > b && r.IntN(4) != 0 {
			a, b = b, a
		}
		c.Lo, c.Hi = a, b
	}
	return c
}

func randRules(r *rand.Rand, n int) []Rule {
	rules := make([]Rule, n)
	for i := range rules {
		for k := r.IntN(4); k > 0; k-- {
			f := Field(r.IntN(int(NumFields)))
			rules[i].Conds = append(rules[i].Conds, randCond(r, f))
			if r.IntN(4) == 0 {
				// Two conditions on one field: a match loaded twice
				// ("-m srh --srh-psid A -m srh --srh-psid B").
				rules[i].Conds = append(rules[i].Conds, randCond(r, f))
			}
		}
		rules[i].Verdict = Verdict(1 + r.IntN(7))
	}
	return rules
}

func randView(r *rand.Rand) View {
	v := NewView()
	for f := Field(0); f < NumFields; f++ {
		if r.IntN(5) == 0 {
			continue // absent
		}
		switch {
		case f == FIIF || f == FOIF:
			v.SetIface(f, uint32(1+r.IntN(3)))
		case f.IsAddr():
			a := randAddr(r).As16()
			if r.IntN(2) == 0 {
				a[15] ^= byte(r.IntN(256))
			}
			v.SetAddr(f, netip.AddrFrom16(a))
		default:
			pool := []uint32{0, 1, 2, 3, 4, 6, 17, 41, 53, 79, 80, 81, 255, f.Domain() - 1}
			v.Set(f, pool[r.IntN(len(pool))]%f.Domain())
		}
	}
	return v
}

// TestClassifyMatchesEval: the compiled bit-vector classifier returns the
// same first matching rule as the linear reference on random rule sets.
func TestClassifyMatchesEval(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		n := 1 + r.IntN(150)
		if round%50 == 0 {
			n = 1000 + r.IntN(500)
		}
		rules := randRules(r, n)
		c, err := Compile(rules)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 200; k++ {
			v := randView(r)
			want := Eval(rules, &v)
			got := c.Classify(&v)
			if got != want {
				t.Fatalf("round %d: classify %d, eval %d\nview %+v", round, got, want, v)
			}
		}
	}
}

func TestCompileTooMany(t *testing.T) {
	if _, err := Compile(make([]Rule, MaxRules+1)); err == nil {
		t.Fatal("no error")
	}
}

func TestCompileLarge(t *testing.T) {
	rules := make([]Rule, MaxRules)
	for i := range rules {
		a := netip.AddrFrom16([16]byte{0xfc, 0, 0, 1, 14: byte(i >> 8), 15: byte(i)})
		rules[i] = Rule{Verdict: Drop, Conds: []Cond{{Field: FSrc, Prefix: netip.PrefixFrom(a, 128)}, {Field: FDPort, Lo: uint32(i), Hi: uint32(i)}}}
	}
	c, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	if c.NWords != Words {
		t.Errorf("words %d", c.NWords)
	}
	v := NewView()
	v.SetAddr(FSrc, netip.AddrFrom16([16]byte{0xfc, 0, 0, 1, 14: byte(9999 >> 8), 15: byte(9999 & 0xff)}))
	v.Set(FDPort, 9999)
	if got := c.Classify(&v); got != 9999 {
		t.Errorf("classify %d", got)
	}
}
