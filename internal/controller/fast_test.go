package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/state"
)

// TestFastPathSameAsFull: the same random chain writes (replace, append,
// remove; valid and invalid; on every example) sent to a controller with
// its fast path and to one without give the same answers and store the
// same bytes, and the fast path is taken for a good share of them.
func TestFastPathSameAsFull(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	fast := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := DocFromYAML(data)
			if err != nil {
				t.Fatal(err)
			}
			a, b := newEnv(t), newEnv(t)
			b.c.fastOff = true
			a.must("PUT", "/v1/spec", string(doc), nil)
			b.must("PUT", "/v1/spec", string(doc), nil)
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			for step := range 40 {
				method, path, body := randomWrite(t, a, rng)
				var ra, rb Result
				ea, eb := a.do(method, path, body, &ra), b.do(method, path, body, &rb)
				what := fmt.Sprintf("step %d: %s %s %s", step, method, path, body)
				if status(ea) != status(eb) || fmt.Sprint(ea) != fmt.Sprint(eb) {
					t.Fatalf("%s:\n fast: %v\n full: %v", what, ea, eb)
				}
				if !slices.Equal(ra.Changed, rb.Changed) || !slices.Equal(ra.Removed, rb.Removed) {
					t.Fatalf("%s: changed %v removed %v, full way %v %v", what, ra.Changed, ra.Removed, rb.Changed, rb.Removed)
				}
				sameStore(t, what, a, b)
			}
			a.checkConsistent()
			t.Logf("%d of 40 writes took the fast path", a.c.fastWrites)
			if b.c.fastWrites != 0 {
				t.Errorf("the controller without fast path took it %d times", b.c.fastWrites)
			}
			fast += a.c.fastWrites
		})
	}
	// The writes are seeded: 69 of 440 take the fast path (the rest are
	// invalid, or on examples whose chains cannot be handled alone).
	if fast < 60 {
		t.Errorf("%d writes took the fast path, want at least 60", fast)
	}
}

// sameStore compares the specs and node states of two controllers.
func sameStore(t *testing.T, what string, a, b *env) {
	t.Helper()
	sa, err := a.st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(sa.Spec) != string(sb.Spec) || len(sa.Chains) != len(sb.Chains) {
		t.Fatalf("%s: specs differ", what)
	}
	for i := range sa.Chains {
		if string(sa.Chains[i]) != string(sb.Chains[i]) {
			t.Fatalf("%s: chain %d differs", what, i)
		}
	}
	if len(sa.Desired) != len(sb.Desired) {
		t.Fatalf("%s: %d node states, full way %d", what, len(sa.Desired), len(sb.Desired))
	}
	for n, da := range sa.Desired {
		db := sb.Desired[n]
		da.State, db.State = noSecrets(t, da.State), noSecrets(t, db.State)
		if string(da.State) != string(db.State) {
			t.Fatalf("%s: node %s: bases differ:\n%s\n%s", what, n, da.State, db.State)
		}
		if len(da.Parts) != len(db.Parts) {
			t.Fatalf("%s: node %s: %d parts, full way %d", what, n, len(da.Parts), len(db.Parts))
		}
		for c, p := range da.Parts {
			if string(p) != string(db.Parts[c]) {
				t.Fatalf("%s: node %s, chain %s: parts differ:\n%s\n%s", what, n, c, p, db.Parts[c])
			}
		}
	}
}

// noSecrets blanks the secrets of a stored base: every full compile
// draws new OPoT keys (crypto/rand).
func noSecrets(t *testing.T, base []byte) []byte {
	t.Helper()
	var net state.Network
	if err := json.Unmarshal(base, &net); err != nil {
		t.Fatal(err)
	}
	for i := range net.Nodes {
		for k := range net.Nodes[i].Secrets {
			net.Nodes[i].Secrets[k].Value = nil
		}
	}
	b, err := json.Marshal(net)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomWrite picks a chain write for e's stored spec: mostly a changed
// chain put back (PUT), sometimes a new one (POST) or a removal.
func randomWrite(t *testing.T, e *env, rng *rand.Rand) (method, path, body string) {
	t.Helper()
	var doc Doc
	e.must("GET", "/v1/spec", "", &doc)
	var chains []map[string]any
	for _, raw := range doc.Chains {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		chains = append(chains, m)
	}
	var nfs, routers []string
	for _, raw := range doc.NFs {
		var m struct{ Name string }
		json.Unmarshal(raw, &m)
		nfs = append(nfs, m.Name)
	}
	for _, raw := range doc.Nodes {
		var m struct{ Name, Role string }
		json.Unmarshal(raw, &m)
		if m.Role == "router" {
			routers = append(routers, m.Name)
		}
	}
	if len(chains) == 0 {
		return "GET", "/v1/spec", ""
	}
	pick := chains[rng.IntN(len(chains))]
	switch r := rng.IntN(10); {
	case r == 0 && len(chains) > 2:
		return "DELETE", "/v1/chains/" + chains[len(chains)-1]["name"].(string), ""
	case r == 1 && len(chains) > 2:
		return "DELETE", "/v1/chains/" + pick["name"].(string), ""
	case r <= 3:
		c := mutate(clone(pick), rng, chains, nfs, routers)
		c["name"] = fmt.Sprintf("new%d", rng.IntN(1000))
		b, _ := json.Marshal(c)
		return "POST", "/v1/chains", string(b)
	default:
		c := mutate(clone(pick), rng, chains, nfs, routers)
		b, _ := json.Marshal(c)
		return "PUT", "/v1/chains/" + c["name"].(string), string(b)
	}
}

func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	json.Unmarshal(b, &c)
	return c
}

// mutate changes one or two things of a chain, valid or not.
func mutate(c map[string]any, rng *rand.Rand, chains []map[string]any, nfs, routers []string) map[string]any {
	match, _ := c["match"].(map[string]any)
	if match == nil {
		match = map[string]any{}
		c["match"] = match
	}
	for range 1 + rng.IntN(2) {
		switch rng.IntN(11) {
		case 0, 1: // a port: now a 5-tuple chain
			proto := []string{"udp", "tcp"}[rng.IntN(2)]
			match["proto"], match["dport"] = proto, fmt.Sprint(1+rng.IntN(65535))
		case 2: // back to destination only
			delete(match, "proto")
			delete(match, "dport")
			delete(match, "sport")
		case 3: // one NF more
			if len(nfs) > 0 {
				l, _ := c["nfs"].([]any)
				c["nfs"] = append(l, nfs[rng.IntN(len(nfs))])
			}
		case 4: // one NF less
			if l, _ := c["nfs"].([]any); len(l) > 0 {
				c["nfs"] = l[:len(l)-1]
			}
		case 5: // another chain's destinations
			o, _ := chains[rng.IntN(len(chains))]["match"].(map[string]any)
			if o != nil {
				match["dst"] = o["dst"]
			}
		case 6:
			if len(routers) > 0 {
				c["egress"] = routers[rng.IntN(len(routers))]
			}
		case 7:
			c["mode"] = []string{"encap", "insert"}[rng.IntN(2)]
		case 8:
			c["nfs"] = []any{"no-such-nf"}
		case 9:
			c["opot"] = rng.IntN(2) == 0
		case 10:
			c["max_sids"] = 3
		}
	}
	return c
}

// TestEncodeIsMarshal: Doc.encode, which copies the objects as they are,
// gives what json.Marshal gives, for objects as they come in (spaces,
// HTML characters, non-ASCII) and every optional field set or not.
func TestEncodeIsMarshal(t *testing.T) {
	in := []string{`{ "name": "a<b>&c", "x": [1, 2] }`, "{\"name\":\"d\u2028e\", \"y\" : {\"z\":\"é\"}}"}
	var objs []json.RawMessage
	for _, s := range in {
		o, err := compactObject([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	docs := []*Doc{
		{},
		{Name: "n<1>", SIDFormat: json.RawMessage(`{ "locator_bits": 48 }`), Routing: "bgp", Nodes: objs, Links: objs[:1], NFs: objs, Pools: objs, Chains: objs},
		{Chains: objs[1:]},
	}
	for i, d := range docs {
		got, err := d.encode()
		if err != nil {
			t.Fatal(err)
		}
		c := *d
		for _, k := range Kinds {
			if l := c.list(k); *l == nil {
				*l = []json.RawMessage{}
			}
		}
		want, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("doc %d: encode gives\n%s\njson.Marshal\n%s", i, got, want)
		}
	}
}
