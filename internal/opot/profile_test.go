package opot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// secretStrings lists every secret number of p in decimal and hex.
func secretStrings(t *testing.T, p *Profile) []string {
	t.Helper()
	s := p.secrets()
	var out []string
	add := func(vs ...uint64) {
		for _, v := range vs {
			out = append(out, fmt.Sprint(v), fmt.Sprintf("%x", v), fmt.Sprintf("%X", v))
		}
	}
	add(s.poly1...)
	add(s.x...)
	add(s.y...)
	add(s.lpc...)
	for _, l := range s.links {
		add(l.R, l.CML)
	}
	for j := range p.K() {
		n, _ := p.Node(j)
		add(n.Share)
	}
	return out
}

func TestProfileRedacted(t *testing.T) {
	p, err := GenerateFrom(seeded(21), 4)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := p.Node(3)
	var v Verifier
	if err := v.Install(1, p, 64); err != nil {
		t.Fatal(err)
	}
	h, err := NewHeadend(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		prof *Profile
		val  Profile
	}
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		for _, v := range []any{p, *p, n, n.Dec, []*Profile{p}, holder{p, *p}, &holder{p, *p}, map[string]NodeParams{"a": n}, &v, h, []*Verifier{&v}} {
			outputs = append(outputs, fmt.Sprintf(verb, v))
		}
	}
	for _, v := range []any{p, n, struct{ P *Profile }{p}, []NodeParams{n}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(b))
	}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	log.Info("profile", "p", p, "n", n)
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("profile", "p", p, "n", n)
	outputs = append(outputs, logBuf.String(), p.String(), p.GoString())
	text, _ := p.MarshalText()
	outputs = append(outputs, string(text))

	secrets := secretStrings(t, p)
	for _, o := range outputs {
		for _, s := range secrets {
			if len(s) >= 6 && strings.Contains(o, s) {
				t.Fatalf("output %q contains secret %s", o, s)
			}
		}
	}
	if !strings.Contains(p.String(), redacted) || !strings.Contains(p.String(), p.Fingerprint()) {
		t.Errorf("String = %q, want the redaction marker and the fingerprint", p.String())
	}
	// The explicit method does write the secrets.
	b, err := p.MarshalSecrets()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), fmt.Sprint(p.secrets().poly1[0])) {
		t.Error("MarshalSecrets lacks the secret")
	}
}

func TestSecretsRoundTrip(t *testing.T) {
	p, err := GenerateFrom(seeded(22), 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalSecrets()
	if err != nil {
		t.Fatal(err)
	}
	q, err := UnmarshalSecrets(b)
	if err != nil {
		t.Fatal(err)
	}
	for j := range p.K() {
		a, _ := p.Node(j)
		c, _ := q.Node(j)
		if a != c {
			t.Fatalf("node %d differs after the round trip", j)
		}
	}
	if p.Fingerprint() != q.Fingerprint() {
		t.Error("fingerprint changed")
	}
	for name, in := range map[string]string{
		"not json":     "{",
		"version":      `{"version":2}`,
		"not prime":    `{"version":1,"p":"15"}`,
		"bad number":   strings.Replace(string(b), `"x":["`, `"x":["z`, 1),
		"missing mask": strings.Replace(string(b), `"links":[[`, `"links":[["1","2"],[`, 1),
	} {
		if _, err := UnmarshalSecrets([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, k := range []int{-1, 0, 1, MaxNodes + 1} {
		if _, err := GenerateFrom(seeded(1), k); !errors.Is(err, ErrProfile) {
			t.Errorf("k = %d: %v, want ErrProfile", k, err)
		}
	}
	if _, err := GenerateFrom(bytes.NewReader(make([]byte, 1<<16)), 3); !errors.Is(err, ErrRandom) {
		t.Errorf("all-zero source: %v, want ErrRandom", err)
	}
	if _, err := GenerateFrom(io.LimitReader(seeded(2), 20), 3); !errors.Is(err, ErrRandom) {
		t.Errorf("short source: %v, want ErrRandom", err)
	}
	if _, err := Generate(MaxNodes); err != nil {
		t.Errorf("crypto/rand, k = %d: %v", MaxNodes, err)
	}
}

func TestNewProfileChecks(t *testing.T) {
	f, _ := NewField(53)
	links := []Mask{{1, 2}, {3, 4}}
	for name, x := range map[string][]uint64{
		"zero point":     {0, 1, 2},
		"repeated point": {1, 2, 1},
		"point = p":      {1, 2, 53},
	} {
		if _, err := NewProfile(f, []uint64{1, 2, 3}, []uint64{1, 1}, x, links); !errors.Is(err, ErrProfile) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewProfile(f, []uint64{1, 2}, []uint64{1, 1}, []uint64{1, 2, 3}, links); !errors.Is(err, ErrProfile) {
		t.Error("short poly-1 accepted")
	}
	if _, err := NewProfile(f, []uint64{1, 2, 60}, []uint64{1, 1}, []uint64{1, 2, 3}, links); !errors.Is(err, ErrProfile) {
		t.Error("coefficient >= p accepted")
	}
	if _, err := NewProfile(Field{}, nil, nil, []uint64{1, 2}, nil); !errors.Is(err, ErrProfile) {
		t.Error("zero field accepted")
	}
}

// TestLPCPrefixRule shows why GenerateFrom rejects a zero LPC prefix
// sum: with LPC_0 + LPC_1 = 0 (mod p), a changed RND on the link into
// node 2 moves CML and the expected RND + s by the same amount, and the
// forgery verifies. The generator's strict check refuses that profile.
func TestLPCPrefixRule(t *testing.T) {
	f, _ := NewField(53)
	poly1, poly2 := []uint64{19, 6, 10, 9}, []uint64{3, 8, 10}
	links := []Mask{{44, 18}, {123, 36}, {29, 7}}
	var x []uint64
search:
	for a := uint64(1); a < 53; a++ {
		for b := a + 1; b < 53; b++ {
			for c := b + 1; c < 53; c++ {
				for d := c + 1; d < 53; d++ {
					p, err := NewProfile(f, poly1, poly2, []uint64{a, b, c, d}, links)
					if err == nil && f.Add(p.secrets().lpc[0], p.secrets().lpc[1]) == 0 {
						x = []uint64{a, b, c, d}
						break search
					}
				}
			}
		}
	}
	if x == nil {
		t.Fatal("no profile with LPC_0 + LPC_1 = 0 mod 53")
	}
	p, _ := NewProfile(f, poly1, poly2, x, links)
	nodes := chainNodes(t, p)
	flip := func(hop int, m Meta) Meta {
		if hop == 2 {
			m.RND ^= 1 // deciphered r 10 -> 11
		}
		return m
	}
	if _, err := Verify(f, nodes[3], path(t, f, nodes, 10, []int{1, 2}, flip)); err != nil {
		t.Fatalf("degenerate profile: RND change on link 2 caught (%v); the rule this test documents is wrong", err)
	}
	if _, err := newProfile(f, poly1, poly2, x, links); !errors.Is(err, ErrProfile) {
		t.Errorf("strict construction accepted a zero LPC prefix sum: %v", err)
	}
}
