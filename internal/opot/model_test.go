package opot

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// seeded is a reproducible stand-in for crypto/rand.
func seeded(n uint64) *rand.ChaCha8 {
	var seed [32]byte
	for i := range 8 {
		seed[i] = byte(n >> (8 * i))
	}
	return rand.NewChaCha8(seed)
}

func chainNodes(t *testing.T, p *Profile) []NodeParams {
	t.Helper()
	nodes := make([]NodeParams, p.K())
	for j := range nodes {
		var err error
		if nodes[j], err = p.Node(j); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// path carries a packet from the headend through the nodes of order
// (indices of transit nodes) and returns the TLV arriving at the
// verifier; tamper, if set, may change the TLV before the hop-th node
// (hop 1 = the first node after the headend, len(order)+1 = verifier).
func path(t *testing.T, f Field, nodes []NodeParams, rnd uint64, order []int, tamper func(hop int, m Meta) Meta) Meta {
	t.Helper()
	m, err := Init(f, nodes[0], 0, rnd)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range order {
		if tamper != nil {
			m = tamper(i+1, m)
		}
		if m, err = Transit(f, nodes[j], m); err != nil {
			t.Fatal(err)
		}
	}
	if tamper != nil {
		m = tamper(len(order)+1, m)
	}
	return m
}

func inOrder(k int) []int {
	o := make([]int, 0, k)
	for j := 1; j < k-1; j++ {
		o = append(o, j)
	}
	return o
}

// TestChainProperties: random profiles for k = 2..8 verify in order; a
// skipped node, a swapped pair, or one flipped bit of RND or CML on any
// link fails. Flips fail always (docs/opot.md: a flip changes CML by
// +-2^i, never 0 mod p, and RND by a delta that reaches the verifier
// multiplied by a non-zero LPC prefix sum); skips and swaps fail except
// with probability about 1/p per packet, so with a fixed seed this test
// is deterministic.
func TestChainProperties(t *testing.T) {
	rng := seeded(11)
	pick := rand.New(rand.NewPCG(5, 6))
	for k := MinNodes; k <= 8; k++ {
		for trial := range 4 {
			t.Run(fmt.Sprintf("k=%d/%d", k, trial), func(t *testing.T) {
				p, err := GenerateFrom(rng, k)
				if err != nil {
					t.Fatal(err)
				}
				f, nodes := p.Field(), chainNodes(t, p)
				ver := nodes[k-1]
				rnd, err := PackRND(pick.Uint64N(MaxSeq)+1, pick.Uint32())
				if err != nil {
					t.Fatal(err)
				}
				order := inOrder(k)

				if got, err := Verify(f, ver, path(t, f, nodes, rnd, order, nil)); err != nil || got != rnd {
					t.Fatalf("in order: rnd %#x, %v; want %#x, nil", got, err, rnd)
				}
				for skip := range order {
					o := append(append([]int{}, order[:skip]...), order[skip+1:]...)
					if _, err := Verify(f, ver, path(t, f, nodes, rnd, o, nil)); !errors.Is(err, ErrVerify) {
						t.Errorf("node %d skipped: %v, want ErrVerify", order[skip], err)
					}
				}
				for a := range order {
					for b := a + 1; b < len(order); b++ {
						o := append([]int{}, order...)
						o[a], o[b] = o[b], o[a]
						if _, err := Verify(f, ver, path(t, f, nodes, rnd, o, nil)); !errors.Is(err, ErrVerify) {
							t.Errorf("nodes %d and %d swapped: %v, want ErrVerify", order[a], order[b], err)
						}
					}
				}
				for hop := 1; hop <= len(order)+1; hop++ {
					for bit := range 64 {
						for _, field := range []string{"rnd", "cml"} {
							flip := func(h int, m Meta) Meta {
								if h == hop {
									if field == "rnd" {
										m.RND ^= 1 << bit
									} else {
										m.CML ^= 1 << bit
									}
								}
								return m
							}
							if _, err := Verify(f, ver, path(t, f, nodes, rnd, order, flip)); !errors.Is(err, ErrVerify) {
								t.Fatalf("%s bit %d flipped before hop %d: %v, want ErrVerify", field, bit, hop, err)
							}
						}
					}
				}
			})
		}
	}
}

func TestRoles(t *testing.T) {
	p, err := GenerateFrom(seeded(1), 3)
	if err != nil {
		t.Fatal(err)
	}
	n := chainNodes(t, p)
	f := p.Field()
	if _, err := Init(f, n[1], 0, 1); !errors.Is(err, ErrRole) {
		t.Errorf("Init on a transit: %v", err)
	}
	if _, err := Transit(f, n[2], Meta{}); !errors.Is(err, ErrRole) {
		t.Errorf("Transit on the verifier: %v", err)
	}
	if _, err := Verify(f, n[0], Meta{}); !errors.Is(err, ErrRole) {
		t.Errorf("Verify on the headend: %v", err)
	}
	if _, err := Init(f, n[0], 0, P61); !errors.Is(err, ErrVerify) {
		t.Errorf("Init with rnd = p: %v", err)
	}
	if n[0].Dec != (Mask{}) || n[2].Enc != (Mask{}) || n[0].Secret != 0 || n[1].Secret != 0 || n[2].Secret == 0 {
		t.Error("headend has decipher keys, verifier cipher keys, or a non-verifier the secret")
	}
	if n[0].Enc != n[1].Dec || n[1].Enc != n[2].Dec {
		t.Error("masks do not chain: node j must decipher with node j-1's cipher keys")
	}
}

func TestPackRND(t *testing.T) {
	for _, tc := range []struct {
		seq    uint64
		random uint32
		ok     bool
	}{{0, 0, false}, {1, 0, true}, {1, ^uint32(0), true}, {MaxSeq, ^uint32(0), true}, {MaxSeq + 1, 0, false}} {
		rnd, err := PackRND(tc.seq, tc.random)
		if (err == nil) != tc.ok {
			t.Errorf("PackRND(%d, %#x): %v", tc.seq, tc.random, err)
			continue
		}
		if tc.ok && (rnd >= P61 || SeqOf(rnd) != tc.seq || rnd&(1<<RandBits-1) != uint64(tc.random)&(1<<RandBits-1)) {
			t.Errorf("PackRND(%d, %#x) = %#x: not canonical or does not round-trip", tc.seq, tc.random, rnd)
		}
	}
}

// chain is a three-hop chain (headend, one transit, verifier) with
// profiles in both slots.
type chain struct {
	t     *testing.T
	f     Field
	nodes [Slots][]NodeParams
	head  [Slots]*Headend
	v     Verifier
}

func newChain(t *testing.T, window int) *chain {
	c := &chain{t: t, f: F61}
	for s := range uint8(Slots) {
		p, err := GenerateFrom(seeded(100+uint64(s)), 3)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[s] = chainNodes(t, p)
		if c.head[s], err = NewHeadend(p, s); err != nil {
			t.Fatal(err)
		}
		if err := c.v.Install(s, p, window); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// send makes the next packet at slot's headend and carries it to the
// verifier's doorstep.
func (c *chain) send(slot uint8) Meta {
	m, err := c.head[slot].Next(0x1234 + uint32(c.head[slot].seq))
	if err != nil {
		c.t.Fatal(err)
	}
	if m, err = Transit(c.f, c.nodes[slot][1], m); err != nil {
		c.t.Fatal(err)
	}
	return m
}

func TestVerifierAntiReplay(t *testing.T) {
	c := newChain(t, 64)
	pkts := make([]Meta, 200)
	for i := range pkts {
		pkts[i] = c.send(0)
	}
	check := func(m Meta, wantSeq uint64, want error) {
		t.Helper()
		seq, err := c.v.Check(m)
		if !errors.Is(err, want) || (want == nil && seq != wantSeq) {
			t.Errorf("Check(packet %d) = %d, %v; want %v", wantSeq, seq, err, want)
		}
	}
	check(pkts[0], 1, nil)
	check(pkts[0], 1, ErrReplay) // captured and replayed
	check(pkts[2], 3, nil)
	check(pkts[1], 2, nil) // reordered, inside the window
	check(pkts[1], 2, ErrReplay)
	check(pkts[99], 100, nil)
	check(pkts[36], 37, nil)      // 100-37 = 63 < 64: still inside
	check(pkts[35], 36, ErrStale) // 100-36 = 64: left of the window
	check(pkts[0], 1, ErrStale)   // an old replay: valid proof, left of the window

	// A replay whose sequence number is rewritten fails the proof, even
	// for an attacker who knows the plaintext RND: RND is not secret,
	// the sequence number is bound by the proof.
	n := c.nodes[0][2]
	old := pkts[99]
	rnd := old.RND ^ n.Dec.R
	for _, newSeq := range []uint64{101, 150, 1 << 40} {
		forged := old
		forged.RND = (newSeq<<RandBits | rnd&(1<<RandBits-1)) ^ n.Dec.R
		check(forged, newSeq, ErrVerify)
	}
	// RND + p is the same residue with another sequence number (bit 61
	// set): the verifier must refuse a non-canonical RND.
	alias := old
	alias.RND = old.RND ^ (rnd ^ (rnd + P61))
	check(alias, 0, ErrVerify)
	// A path deviation (the transit skipped) is a proof failure, never
	// a window verdict.
	skipped, err := c.head[0].Next(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.v.Check(skipped); !errors.Is(err, ErrVerify) {
		t.Errorf("transit skipped: %v, want ErrVerify", err)
	}
	// Forged packets did not move the window: 150 is still new.
	if c.v.slots[0].w.Top() != 100 {
		t.Errorf("window top %d after forgeries, want 100", c.v.slots[0].w.Top())
	}
	check(pkts[149], 150, nil)
	check(pkts[199], 200, nil)
}

func TestVerifierRotation(t *testing.T) {
	c := newChain(t, DefaultWindow)
	inFlight := c.send(0)
	// Rotation: slot 1 is installed everywhere (newChain did); the
	// headend switches; old packets still verify until slot 0 drains.
	if _, err := c.v.Check(c.send(1)); err != nil {
		t.Fatalf("new slot: %v", err)
	}
	if _, err := c.v.Check(inFlight); err != nil {
		t.Fatalf("old slot in flight: %v", err)
	}
	c.v.Remove(0)
	if _, err := c.v.Check(c.send(0)); !errors.Is(err, ErrNoProfile) {
		t.Errorf("removed slot: %v, want ErrNoProfile", err)
	}
	// A packet of slot 1 relabelled slot 0 or 1 by an attacker.
	m := c.send(1)
	m.Slot = 0
	if _, err := c.v.Check(m); !errors.Is(err, ErrNoProfile) {
		t.Errorf("relabelled slot: %v", err)
	}
	if _, err := c.v.Check(Meta{Slot: 7}); !errors.Is(err, ErrNoProfile) {
		t.Errorf("slot 7: %v", err)
	}
}

func TestHeadendExhausted(t *testing.T) {
	p, err := GenerateFrom(seeded(3), 2)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHeadend(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.seq = MaxSeq - 1
	if _, err := h.Next(0); err != nil {
		t.Fatalf("last sequence number: %v", err)
	}
	if _, err := h.Next(0); !errors.Is(err, ErrSeqExhausted) {
		t.Errorf("after the last: %v, want ErrSeqExhausted", err)
	}
	if _, err := NewHeadend(p, 2); err == nil {
		t.Error("slot 2 accepted")
	}
}

// FuzzVerifierForgery: TLV bytes from someone without the keys never
// verify (the chance is about 2^-61 per input, so any hit is a bug) and
// never panic the parser or the verifier.
func FuzzVerifierForgery(f *testing.F) {
	p, err := GenerateFrom(seeded(41), 4)
	if err != nil {
		f.Fatal(err)
	}
	legit, err := NewHeadend(p, 0)
	if err != nil {
		f.Fatal(err)
	}
	m, _ := legit.Next(1)
	f.Add(m.AppendTo(nil))
	f.Add(Meta{Slot: 1}.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseTLV(b)
		if err != nil {
			return
		}
		var v Verifier
		if err := v.Install(0, p, 64); err != nil {
			t.Fatal(err)
		}
		if seq, err := v.Check(m); err == nil {
			t.Fatalf("forged tlv % x verified (seq %d)", b[:TLVLen], seq)
		}
	})
}

func BenchmarkMulMod61(b *testing.B) {
	x, y := uint64(0x123456789abcdef)&P61, uint64(0x0fedcba987654321)&P61
	for b.Loop() {
		x = MulMod61(x, y)
	}
	sink = x
}

// BenchmarkMulModVPPPrime is the general 128-by-64 reduction a 63-bit
// prime needs (Go has it as bits.Rem64; BPF has no equivalent).
func BenchmarkMulModVPPPrime(b *testing.B) {
	const p = 0x7fff0000fa884685
	x, y := uint64(0x123456789abcdef), uint64(0x0fedcba987654321)
	for b.Loop() {
		hi, lo := bits.Mul64(x, y)
		x = bits.Rem64(hi, lo, p)
	}
	sink = x
}

func BenchmarkTransit(b *testing.B) {
	p, _ := GenerateFrom(seeded(42), 5)
	n, _ := p.Node(2)
	m := Meta{RND: 1, CML: 2}
	for b.Loop() {
		m, _ = Transit(F61, n, m)
	}
	sink = m.CML
}

func BenchmarkVerifierCheck(b *testing.B) {
	p, _ := GenerateFrom(seeded(43), 2)
	h, _ := NewHeadend(p, 0)
	var v Verifier
	_ = v.Install(0, p, DefaultWindow)
	pkts := make([]Meta, 1<<12)
	for i := range pkts {
		pkts[i], _ = h.Next(uint32(i))
	}
	i := 0
	for b.Loop() {
		_, _ = v.Check(pkts[i%len(pkts)])
		i++
	}
}

var sink uint64
