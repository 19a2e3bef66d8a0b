package opot

import (
	"errors"
	"testing"
)

// Seed 003 Fig. 2 and section III-A4: s = 19, p = 53, r = 10,
// f1(x) = 9x^3 + 10x^2 + 6x + s, f2(x, r) = 10x^3 + 8x^2 + 3x + r, valid
// path (v1, v2, v3, v4). The text gives the v1->v2 keys (18, 44), v3's
// decipher keys (36, 123), CML_1 = 20 at v1, and what v3 deciphers from
// v1 in the wrong order: r = 40 (93 reduced mod 53) and CML = 34. Those
// numbers fix which half of each pair masks what: 18 and 36 mask CML
// (20^18^36 = 34), 44 and 123 mask r (10^44^123 = 93 = 40 mod 53). The
// points x_j and the v3->v4 keys are only in the figure, not in the text
// we have: x = (1, 2, 5, 7) is the lexicographically first increasing
// set of points for which CML_1 = 20, and (c3^r, c3^CML) = (29, 7) is
// ours. Every number the text states is asserted below.
var (
	fig2Poly1 = []uint64{19, 6, 10, 9} // a_0 = s .. a_3
	fig2Poly2 = []uint64{3, 8, 10}     // b_1 .. b_3; b_0 = r per packet
	fig2X     = []uint64{1, 2, 5, 7}
	fig2Links = []Mask{{R: 44, CML: 18}, {R: 123, CML: 36}, {R: 29, CML: 7}}
)

const fig2R = 10

func fig2Profile(t *testing.T, links []Mask) (Field, []NodeParams) {
	t.Helper()
	f, err := NewField(53)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProfile(f, fig2Poly1, fig2Poly2, fig2X, links)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]NodeParams, p.K())
	for j := range nodes {
		if nodes[j], err = p.Node(j); err != nil {
			t.Fatal(err)
		}
	}
	return f, nodes
}

// run sends a packet with RND r through the transit nodes in the given
// order (indices into nodes) and verifies it at the last node.
func run(t *testing.T, f Field, nodes []NodeParams, r uint64, order []int) error {
	t.Helper()
	m, err := Init(f, nodes[0], 0, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range order {
		if m, err = Transit(f, nodes[j], m); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Verify(f, nodes[len(nodes)-1], m)
	return err
}

func TestSeedFig2(t *testing.T) {
	f, nodes := fig2Profile(t, fig2Links)

	// The seed's shares: y_j = f1(x_j), z_j = f2(x_j, r), and Eq. 3.
	var sum uint64
	for j, x := range fig2X {
		y := f.Eval(fig2Poly1, x)
		z := f.Eval(append([]uint64{fig2R}, fig2Poly2...), x)
		if got := f.Add(nodes[j].Share, fig2R); got != f.Add(y, z) {
			t.Errorf("node %d: Share + r = %d, want y + z = %d", j+1, got, f.Add(y, z))
		}
		sum = f.Add(sum, f.Mul(f.Add(y, z), nodes[j].LPC))
	}
	if sum != (19+fig2R)%53 {
		t.Fatalf("sum of (y_j + z_j) LPC_j = %d, want (s + r) mod p = %d", sum, (19+fig2R)%53)
	}

	m, err := Init(f, nodes[0], 0, fig2R)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.CML ^ fig2Links[0].CML; got != 20 {
		t.Errorf("CML_1 at v1 = %d, want 20 (seed 003 III-A4)", got)
	}

	// Upper part: the valid order verifies.
	if err := run(t, f, nodes, fig2R, []int{1, 2}); err != nil {
		t.Errorf("valid order (v1, v2, v3, v4): %v", err)
	}

	// Middle part: v3 right after v1 deciphers r = 40 and CML = 34.
	r, cml := decipher(nodes[2], m)
	if f.Reduce(r) != 40 || f.Reduce(cml) != 34 {
		t.Errorf("v3 after v1 deciphers (r, CML) = (%d, %d) mod 53, want (40, 34)", f.Reduce(r), f.Reduce(cml))
	}
	if err := run(t, f, nodes, fig2R, []int{2, 1}); !errors.Is(err, ErrVerify) {
		t.Errorf("swapped order (v1, v3, v2, v4): %v, want ErrVerify", err)
	}

	// Lower part: plain PoT (no masks) accepts the swapped order.
	fp, plain := fig2Profile(t, make([]Mask, 3))
	for _, order := range [][]int{{1, 2}, {2, 1}} {
		if err := run(t, fp, plain, fig2R, order); err != nil {
			t.Errorf("plain PoT, order %v: %v, want success", order, err)
		}
	}
	// ... but not a skipped node.
	if err := run(t, fp, plain, fig2R, []int{1}); !errors.Is(err, ErrVerify) {
		t.Errorf("plain PoT, v3 skipped: %v, want ErrVerify", err)
	}
}
