package opot

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestNodeParamsBinary: every node of random profiles round-trips, and
// a wrong length, role, padding or a non-canonical share is refused.
func TestNodeParamsBinary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for k := MinNodes; k <= MaxNodes; k++ {
		p, err := GenerateFrom(readerOf(rng), k)
		if err != nil {
			t.Fatal(err)
		}
		for j := range k {
			n, err := p.Node(j)
			if err != nil {
				t.Fatal(err)
			}
			b, err := n.MarshalBinary()
			if err != nil || len(b) != NodeParamsSize {
				t.Fatalf("k %d node %d: %d bytes, %v", k, j, len(b), err)
			}
			var got NodeParams
			if err := got.UnmarshalBinary(b); err != nil || got != n {
				t.Fatalf("k %d node %d: round trip differs (%v)", k, j, err)
			}
		}
	}
	n, _ := (&NodeParams{Role: RoleTransit, Share: 5, LPC: 7}).MarshalBinary()
	for name, edit := range map[string]func(b []byte) []byte{
		"short":     func(b []byte) []byte { return b[:63] },
		"role 0":    func(b []byte) []byte { b[3] = 0; return b },
		"role 4":    func(b []byte) []byte { b[3] = 4; return b },
		"padding":   func(b []byte) []byte { b[7] = 1; return b },
		"share = p": func(b []byte) []byte { copy(b[8:16], []byte{0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); return b },
	} {
		var got NodeParams
		if err := got.UnmarshalBinary(edit(append([]byte(nil), n...))); !errors.Is(err, ErrProfile) {
			t.Errorf("%s: %v, want ErrProfile", name, err)
		}
	}
}

type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(r.r.Uint32())
	}
	return len(b), nil
}

func readerOf(r *rand.Rand) rngReader { return rngReader{r} }
