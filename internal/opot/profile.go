package opot

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
)

// MinNodes and MaxNodes bound k, the nodes that take part in a chain's
// proof: the headend, every OPoT NF node, the verifier (seed 003 III-A:
// POLY-1 has degree k-1). 17 = the headend plus srv6.MaxSegments.
const (
	MinNodes = 2
	MaxNodes = 17
)

// Sentinel errors of profile construction.
var (
	// ErrProfile: a profile's parameters are inconsistent (bad k, a zero
	// or repeated point, keys that do not chain, a degenerate LPC sum).
	ErrProfile = errors.New("invalid opot profile")
	// ErrRandom: the random source failed or kept producing rejected
	// values.
	ErrRandom = errors.New("opot random source")
)

// Mask is one XOR key pair (c^r, c^CML) of seed 003 III-A4: R masks RND,
// CML masks CML. The pair node j ciphers with is the pair node j+1
// deciphers with.
type Mask struct {
	R, CML uint64
}

// Role is what a node does in a chain's proof.
type Role uint8

const (
	RoleHeadend  Role = iota + 1 // v_0: draws RND, CML_0, ciphers
	RoleTransit                  // v_1..v_{k-2}: decipher, update, cipher
	RoleVerifier                 // v_{k-1}: decipher, update, check
)

func (r Role) String() string {
	switch r {
	case RoleHeadend:
		return "headend"
	case RoleTransit:
		return "transit"
	case RoleVerifier:
		return "verifier"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// secrets is everything of a profile that must not leak. A Profile holds
// it behind a func value: fmt prints a func as an address whatever the
// depth and verb, whereas a struct pointer in an unexported field (where
// fmt cannot call our Format) is expanded by a bad verb such as %s on
// the enclosing struct (TestProfileRedacted).
type secrets struct {
	f     Field
	poly1 []uint64 // a_0 = s, a_1..a_{k-1} (seed 003 III-A2 f_1)
	poly2 []uint64 // b_1..b_{k-1}: public per profile; b_0 = RND per packet
	x     []uint64 // points, distinct and non-zero
	y     []uint64 // y_j = f_1(x_j)
	lpc   []uint64 // LPC_j = l_j(0) mod p (Eq. 3)
	links []Mask   // links[j]: node j ciphers, node j+1 deciphers
}

// Profile is one chain's OPoT key material for k nodes (seed 003 III-A):
// secret s, POLY-1 of degree k-1, the public POLY-2 coefficients, each
// node's point and LPC, and the chained XOR masks. Its String, Format,
// GoString, MarshalJSON, MarshalText and LogValue are redacted; only
// MarshalSecrets writes key material.
type Profile struct {
	keys func() *secrets
}

func (p Profile) secrets() *secrets {
	if p.keys == nil {
		return nil
	}
	return p.keys()
}

// Generate returns a fresh profile for k nodes from crypto/rand.
func Generate(k int) (*Profile, error) {
	return GenerateFrom(rand.Reader, k)
}

// GenerateFrom returns a fresh profile for k nodes over P61, drawing
// every value from rng (crypto/rand in production, a seeded stream in
// tests). Draws that would make a profile degenerate are redrawn: a zero
// secret or leading coefficient (POLY-1 must have degree k-1, seed 003
// II), a zero or repeated point, a zero mask or two links sharing a mask
// half, and a zero prefix sum LPC_0 + ... + LPC_{j-1} for 0 < j < k
// (that sum is the factor by which a changed RND on link j shows at the
// verifier; docs/opot.md "RND tampering").
func GenerateFrom(rng io.Reader, k int) (*Profile, error) {
	if k < MinNodes || k > MaxNodes {
		return nil, fmt.Errorf("generate profile: %d nodes, want %d..%d: %w", k, MinNodes, MaxNodes, ErrProfile)
	}
	f := F61
	d := drawer{rng: rng, f: f}
	for range 16 {
		poly1 := make([]uint64, k)
		for i := range poly1 {
			poly1[i] = d.elem(i == 0 || i == k-1)
		}
		poly2 := make([]uint64, k-1)
		for i := range poly2 {
			poly2[i] = d.elem(false)
		}
		x := make([]uint64, k)
		for i := range x {
			x[i] = d.elem(true)
		}
		links := make([]Mask, k-1)
		for i := range links {
			links[i] = Mask{R: d.word(), CML: d.word()}
		}
		if d.err != nil {
			return nil, fmt.Errorf("generate profile: %w: %w", ErrRandom, d.err)
		}
		p, err := newProfile(f, poly1, poly2, x, links)
		if err == nil {
			return p, nil
		}
		// Only a collision or a zero LPC prefix sum (probability about
		// k^2/2^61) gets here.
	}
	return nil, fmt.Errorf("generate profile: %w: no usable draw in 16 tries", ErrRandom)
}

// drawer reads uniform values from rng, remembering the first error.
type drawer struct {
	rng io.Reader
	f   Field
	err error
}

func (d *drawer) word() uint64 {
	var b [8]byte
	if d.err != nil {
		return 0
	}
	if _, err := io.ReadFull(d.rng, b[:]); err != nil {
		d.err = err
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// elem returns a uniform field element (rejection sampling on the bits
// of p, so no modulo bias), non-zero if asked.
func (d *drawer) elem(nonZero bool) uint64 {
	m := uint64(1)<<bits.Len64(d.f.p) - 1
	for range 64 {
		v := d.word() & m
		if d.err != nil {
			return 0
		}
		if v < d.f.p && (v != 0 || !nonZero) {
			return v
		}
	}
	d.err = errors.New("rejection sampling did not terminate")
	return 0
}

// NewProfile builds a profile from explicit parameters: POLY-1
// coefficients a_0..a_{k-1} (a_0 is the secret), POLY-2 coefficients
// b_1..b_{k-1}, the nodes' points in chain order and the k-1 link masks.
// It exists for reproducible tests (the seed's Fig. 2) and for loading;
// it checks everything GenerateFrom guarantees except the
// non-degeneracy rules that only matter for random profiles.
func NewProfile(f Field, poly1, poly2, x []uint64, links []Mask) (*Profile, error) {
	return newProfileChecked(f, poly1, poly2, x, links, false)
}

func newProfile(f Field, poly1, poly2, x []uint64, links []Mask) (*Profile, error) {
	return newProfileChecked(f, poly1, poly2, x, links, true)
}

func newProfileChecked(f Field, poly1, poly2, x []uint64, links []Mask, strict bool) (*Profile, error) {
	k := len(x)
	switch {
	case f.p == 0:
		return nil, fmt.Errorf("new profile: no field: %w", ErrProfile)
	case k < MinNodes || k > MaxNodes:
		return nil, fmt.Errorf("new profile: %d nodes, want %d..%d: %w", k, MinNodes, MaxNodes, ErrProfile)
	case len(poly1) != k || len(poly2) != k-1 || len(links) != k-1:
		return nil, fmt.Errorf("new profile: %d nodes need %d poly-1, %d poly-2 coefficients and %d masks, have %d, %d, %d: %w",
			k, k, k-1, k-1, len(poly1), len(poly2), len(links), ErrProfile)
	}
	for _, v := range append(append([]uint64{}, poly1...), poly2...) {
		if v >= f.p {
			return nil, fmt.Errorf("new profile: coefficient %d not below p: %w", v, ErrProfile)
		}
	}
	for i, xi := range x {
		if xi == 0 || xi >= f.p {
			return nil, fmt.Errorf("new profile: point %d of node %d not in 1..p-1: %w", xi, i, ErrProfile)
		}
		for _, xm := range x[:i] {
			if xm == xi {
				return nil, fmt.Errorf("new profile: point %d repeated: %w", xi, ErrProfile)
			}
		}
	}
	s := &secrets{f: f, poly1: clone(poly1), poly2: clone(poly2), x: clone(x), links: append([]Mask(nil), links...)}
	s.y = make([]uint64, k)
	s.lpc = make([]uint64, k)
	for j := range x {
		s.y[j] = f.Eval(poly1, x[j])
		// LPC_j = prod_{m != j} x_m / (x_m - x_j)  (Eq. 2 at x = 0).
		num, den := uint64(1), uint64(1)
		for m := range x {
			if m != j {
				num = f.Mul(num, x[m])
				den = f.Mul(den, f.Sub(x[m], x[j]))
			}
		}
		s.lpc[j] = f.Mul(num, f.Inv(den))
	}
	if strict {
		if poly1[0] == 0 || poly1[k-1] == 0 {
			return nil, fmt.Errorf("new profile: zero secret or leading coefficient: %w", ErrProfile)
		}
		var sum uint64
		for j := 0; j < k-1; j++ {
			sum = f.Add(sum, s.lpc[j])
			if sum == 0 {
				return nil, fmt.Errorf("new profile: LPC prefix sum %d is zero: %w", j, ErrProfile)
			}
		}
		for i, l := range links {
			if l.R == 0 || l.CML == 0 {
				return nil, fmt.Errorf("new profile: zero mask on link %d: %w", i, ErrProfile)
			}
			for _, o := range links[:i] {
				if o.R == l.R || o.CML == l.CML {
					return nil, fmt.Errorf("new profile: links share a mask: %w", ErrProfile)
				}
			}
		}
	}
	return &Profile{keys: func() *secrets { return s }}, nil
}

func clone(v []uint64) []uint64 { return append([]uint64(nil), v...) }

// K returns the number of nodes.
func (p *Profile) K() int { return len(p.secrets().x) }

// Field returns the profile's field.
func (p *Profile) Field() Field { return p.secrets().f }

// Fingerprint names the key material without revealing it: the first 8
// bytes of SHA-256 over the secret encoding, in hex. Operators compare
// fingerprints to see whether two nodes hold the same profile.
func (p *Profile) Fingerprint() string {
	b, err := p.MarshalSecrets()
	if err != nil {
		return "invalid"
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// NodeParams is what node j of the chain needs, the Go twin of the BPF
// map value the next session adds (seed 003 Table II "OPoT parameters",
// with POLY-2 pre-evaluated: Share = y_j + b_1 x_j + ... + b_{k-1}
// x_j^{k-1}, so that z_j + y_j = Share + RND and a hop costs one multiply).
// Secret is set only for the verifier; Dec is zero for the headend, Enc
// for the verifier. Printing it is redacted like a Profile.
type NodeParams struct {
	Role   Role
	Share  uint64
	LPC    uint64
	Dec    Mask
	Enc    Mask
	Secret uint64
}

// Node returns node j's parameters (0 = headend, K()-1 = verifier).
func (p *Profile) Node(j int) (NodeParams, error) {
	s := p.secrets()
	k := len(s.x)
	if j < 0 || j >= k {
		return NodeParams{}, fmt.Errorf("node %d of %d: %w", j, k, ErrProfile)
	}
	b := append([]uint64{0}, s.poly2...)
	n := NodeParams{Role: RoleTransit, Share: s.f.Add(s.y[j], s.f.Eval(b, s.x[j])), LPC: s.lpc[j]}
	if j > 0 {
		n.Dec = s.links[j-1]
	}
	if j < k-1 {
		n.Enc = s.links[j]
	}
	switch j {
	case 0:
		n.Role = RoleHeadend
	case k - 1:
		n.Role = RoleVerifier
		n.Secret = s.poly1[0]
	}
	return n, nil
}

const redacted = "[redacted]"

func (p Profile) String() string {
	if p.secrets() == nil {
		return "opot.Profile(nil)"
	}
	return fmt.Sprintf("opot.Profile{p=%d k=%d keys=%s fingerprint=%s}", p.secrets().f.p, p.K(), redacted, p.Fingerprint())
}

// Format makes every verb (%v, %+v, %#v, %x, %d ...) print String.
func (p Profile) Format(st fmt.State, _ rune) { _, _ = io.WriteString(st, p.String()) }

// GoString is redacted.
func (p Profile) GoString() string { return p.String() }

// MarshalJSON is redacted: the public shape only.
func (p Profile) MarshalJSON() ([]byte, error) {
	if p.secrets() == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		P           uint64 `json:"p,string"`
		K           int    `json:"k"`
		Keys        string `json:"keys"`
		Fingerprint string `json:"fingerprint"`
	}{p.secrets().f.p, p.K(), redacted, p.Fingerprint()})
}

// MarshalText is redacted (YAML and other text encoders use it).
func (p Profile) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// LogValue is redacted for log/slog.
func (p Profile) LogValue() slog.Value { return slog.StringValue(p.String()) }

func (n NodeParams) String() string {
	return fmt.Sprintf("opot.NodeParams{role=%s keys=%s}", n.Role, redacted)
}

// Format makes every verb print String.
func (n NodeParams) Format(st fmt.State, _ rune) { _, _ = io.WriteString(st, n.String()) }

// GoString is redacted.
func (n NodeParams) GoString() string { return n.String() }

// MarshalJSON is redacted.
func (n NodeParams) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"role": n.Role.String(), "keys": redacted})
}

// MarshalText is redacted.
func (n NodeParams) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// LogValue is redacted.
func (n NodeParams) LogValue() slog.Value { return slog.StringValue(n.String()) }

// Format of a Mask is redacted too: masks are key material.
func (m Mask) Format(st fmt.State, _ rune) { _, _ = io.WriteString(st, "opot.Mask"+redacted) }

// MarshalJSON of a Mask is redacted.
func (m Mask) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

// secretsJSON is the explicit secret encoding (version 1). Numbers are
// strings: JSON readers that use float64 would round 61-bit values.
type secretsJSON struct {
	Version int         `json:"version"`
	P       uint64      `json:"p,string"`
	Poly1   []string    `json:"poly1"`
	Poly2   []string    `json:"poly2"`
	X       []string    `json:"x"`
	Links   [][2]string `json:"links"`
}

// MarshalSecrets encodes the full key material. Callers write it only to
// files of mode 0600 and never log it (issue 11).
func (p *Profile) MarshalSecrets() ([]byte, error) {
	if p == nil || p.secrets() == nil {
		return nil, fmt.Errorf("marshal secrets: nil profile: %w", ErrProfile)
	}
	s := p.secrets()
	j := secretsJSON{Version: 1, P: s.f.p, Poly1: strs(s.poly1), Poly2: strs(s.poly2), X: strs(s.x)}
	for _, l := range s.links {
		j.Links = append(j.Links, [2]string{fmt.Sprint(l.R), fmt.Sprint(l.CML)})
	}
	return json.Marshal(j)
}

// UnmarshalSecrets decodes MarshalSecrets output and re-checks it with
// the rules of GenerateFrom.
func UnmarshalSecrets(b []byte) (*Profile, error) {
	var j secretsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("unmarshal secrets: %w", err)
	}
	if j.Version != 1 {
		return nil, fmt.Errorf("unmarshal secrets: version %d: %w", j.Version, ErrProfile)
	}
	f, err := NewField(j.P)
	if err != nil {
		return nil, fmt.Errorf("unmarshal secrets: %w", err)
	}
	var bad error
	num := func(v string) uint64 {
		var n uint64
		if _, err := fmt.Sscan(v, &n); err != nil && bad == nil {
			bad = fmt.Errorf("unmarshal secrets: number %q: %w", v, ErrProfile)
		}
		return n
	}
	nums := func(v []string) []uint64 {
		out := make([]uint64, len(v))
		for i := range v {
			out[i] = num(v[i])
		}
		return out
	}
	poly1, poly2, x := nums(j.Poly1), nums(j.Poly2), nums(j.X)
	links := make([]Mask, len(j.Links))
	for i, l := range j.Links {
		links[i] = Mask{R: num(l[0]), CML: num(l[1])}
	}
	if bad != nil {
		return nil, bad
	}
	// Strict: a loaded profile must meet every rule a generated one does
	// (no zero masks that would silently turn OPoT into plain PoT).
	return newProfile(f, poly1, poly2, x, links)
}

func strs(v []uint64) []string {
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = fmt.Sprint(n)
	}
	return out
}
