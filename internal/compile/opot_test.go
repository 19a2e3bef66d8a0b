package compile

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// seeded is a fixed key stream, so a test gets the same profiles twice.
type seeded struct{ r *rand.ChaCha8 }

func keyStream(seed byte) seeded { return seeded{rand.NewChaCha8([32]byte{seed})} }

func (s seeded) Read(b []byte) (int, error) { return s.r.Read(b) }

func opotTestbed(t *testing.T) *spec.Spec {
	t.Helper()
	b, err := os.ReadFile("../../examples/opot-testbed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Validate refuses opot until a driver deploys it: check the
	// testbed, then turn it on for the compiler.
	s, err := spec.Check(b, "opot-testbed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Chains) != 1 || !slices.Equal(s.Chains[0].NFs, []string{"vnf2", "vnf3"}) {
		t.Fatal("the testbed's chain changed; update this test")
	}
	s.Chains[0].OPoT = true
	return s
}

// TestOPoTProfiles: on the seed 003 testbed with opot: true, the headend
// r1, the NF nodes r2 and r3 and the verifier r6 get one secret per slot
// holding only their own parameters, in their roles; r4, r5 and the
// hosts get none; the parameters of each slot make a proof that the Go
// model verifies in the chain's order and rejects with r2 and r3
// swapped; the slots differ; the redacted network carries no key byte;
// and the same key stream compiles to the same bytes.
func TestOPoTProfiles(t *testing.T) {
	s := opotTestbed(t)
	net, err := CompileKeys(s, keyStream(1))
	if err != nil {
		t.Fatal(err)
	}
	order := []string{"r1", "r2", "r3", "r6"}
	roles := []opot.Role{opot.RoleHeadend, opot.RoleTransit, opot.RoleTransit, opot.RoleVerifier}
	nfs := []string{"", "vnf2", "vnf3", ""}
	params := map[string][OPoTSlots]opot.NodeParams{}
	for _, n := range net.Nodes {
		want := 0
		for _, o := range order {
			if o == n.Name {
				want = OPoTSlots
			}
		}
		if len(n.Secrets) != want {
			t.Fatalf("node %s: %d secrets, want %d", n.Name, len(n.Secrets), want)
		}
		var ps [OPoTSlots]opot.NodeParams
		for slot, sec := range n.Secrets {
			if sec.Name != OPoTSecretName("verified", 1, slot) {
				t.Errorf("node %s: secret %q", n.Name, sec.Name)
			}
			if err := ps[slot].UnmarshalBinary(sec.Value); err != nil {
				t.Fatalf("node %s slot %d: %v", n.Name, slot, err)
			}
		}
		params[n.Name] = ps
	}
	for slot := range OPoTSlots {
		var nodes []opot.NodeParams
		for j, name := range order {
			n := params[name][slot]
			if n.Role != roles[j] {
				t.Errorf("slot %d: %s is %s, want %s", slot, name, n.Role, roles[j])
			}
			if sec := secretOf(net, name, slot); sec.NF != nfs[j] {
				t.Errorf("slot %d: %s secret NF %q, want %q", slot, name, sec.NF, nfs[j])
			}
			nodes = append(nodes, n)
		}
		if !proves(t, nodes, []int{0, 1, 2, 3}) {
			t.Errorf("slot %d: the chain's order does not verify", slot)
		}
		if proves(t, nodes, []int{0, 2, 1, 3}) {
			t.Errorf("slot %d: r2 and r3 swapped verifies", slot)
		}
	}
	if params["r2"][0] == params["r2"][1] {
		t.Error("both slots hold the same parameters")
	}

	plain, _ := json.Marshal(net)
	red, _ := json.Marshal(net.Redacted())
	for _, n := range net.Nodes {
		for _, sec := range n.Secrets {
			if !bytes.Contains(plain, mustJSON(t, sec.Value)) || bytes.Contains(red, mustJSON(t, sec.Value)) {
				t.Fatalf("redacted network still holds %s of %s (or the plain one lacks it)", sec.Name, n.Name)
			}
		}
	}
	again, err := CompileKeys(s, keyStream(1))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(again); !bytes.Equal(b, plain) {
		t.Error("the same key stream compiled to different states")
	}
	other, _ := CompileKeys(s, keyStream(2))
	if b, _ := json.Marshal(other); bytes.Equal(b, plain) {
		t.Error("another key stream compiled to the same state")
	}
}

func secretOf(net *state.Network, node string, slot int) state.Secret {
	for _, n := range net.Nodes {
		if n.Name == node {
			return n.Secrets[slot]
		}
	}
	return state.Secret{}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// proves runs the Go model over nodes in the given order (the first must
// be the headend, the last the verifier) and reports the verdict.
func proves(t *testing.T, nodes []opot.NodeParams, order []int) bool {
	t.Helper()
	f := opot.F61
	m, err := opot.Init(f, nodes[order[0]], 0, 12345<<opot.RandBits)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range order[1 : len(order)-1] {
		if m, err = opot.Transit(f, nodes[j], m); err != nil {
			t.Fatal(err)
		}
	}
	_, err = opot.Verify(f, nodes[order[len(order)-1]], m)
	return err == nil
}

// TestKeepOPoTKeys: two compiles of the same OPoT spec draw different
// keys; KeepOPoTKeys gives the second the first's, so every node's
// digest is equal again (a re-apply changes nothing). When the chain's
// members change (the NFs swapped: r3 becomes hop 1), nothing is kept
// and the fresh profile stays.
func TestKeepOPoTKeys(t *testing.T) {
	s := opotTestbed(t)
	a, err := CompileKeys(s, keyStream(1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := CompileKeys(s, keyStream(2))
	if err != nil {
		t.Fatal(err)
	}
	digests := func(n *state.Network) map[string]string {
		m := map[string]string{}
		for _, x := range n.Nodes {
			m[x.Name] = x.Digest
		}
		return m
	}
	da, db := digests(a), digests(b)
	if da["r1"] == db["r1"] || da["r4"] != db["r4"] {
		t.Fatalf("digests: r1 %v (want different), r4 %v (want equal)", da["r1"] == db["r1"], da["r4"] == db["r4"])
	}
	kept, err := KeepOPoTKeys(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, []string{"verified"}) {
		t.Fatalf("kept %v, want [verified]", kept)
	}
	if db := digests(b); !maps.Equal(da, db) {
		t.Errorf("after keeping the keys the digests differ:\n%v\n%v", da, db)
	}
	for i := range b.Nodes {
		if !b.Nodes[i].Sealed() {
			t.Errorf("%s not sealed", b.Nodes[i].Name)
		}
	}
	if kept, _ := KeepOPoTKeys(b, nil); kept != nil {
		t.Errorf("nothing to keep from: kept %v", kept)
	}

	// NFs swapped: the hops change, the fresh keys stay.
	s2 := opotTestbed(t)
	s2.Chains[0].NFs = []string{"vnf3", "vnf2"}
	c, err := CompileKeys(s2, keyStream(3))
	if err != nil {
		t.Fatal(err)
	}
	before := digests(c)
	kept, err = KeepOPoTKeys(c, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 0 || !maps.Equal(before, digests(c)) {
		t.Errorf("members changed: kept %v, digests changed %v", kept, !maps.Equal(before, digests(c)))
	}
}

// TestRotateOPoTKeys: a rotation gives the free slot (1, then 0) a new
// profile on every member, which proves the chain's order and no other;
// the slot in use keeps its keys and the headend keeps starting packets
// with it until SwitchOPoTSlots. The network the rotation started from
// (a shallow copy's nodes) keeps the old keys and slot: the lab applies
// the difference between the two.
func TestRotateOPoTKeys(t *testing.T) {
	s := opotTestbed(t)
	net, err := CompileKeys(s, keyStream(1))
	if err != nil {
		t.Fatal(err)
	}
	order := []string{"r1", "r2", "r3", "r6"}
	paramsOf := func(n *state.Network, slot int) []opot.NodeParams {
		var ps []opot.NodeParams
		for _, name := range order {
			var p opot.NodeParams
			if err := p.UnmarshalBinary(secretOf(n, name, slot).Value); err != nil {
				t.Fatalf("%s slot %d: %v", name, slot, err)
			}
			ps = append(ps, p)
		}
		return ps
	}
	headSlot := func(n *state.Network) uint8 {
		i := slices.IndexFunc(n.Nodes, func(x state.Node) bool { return x.Name == "r1" })
		slot, err := opotHeadendSlot(&n.Nodes[i], "verified")
		if err != nil {
			t.Fatal(err)
		}
		return slot
	}
	cur := net
	for round, want := range []uint8{1, 0, 1} {
		next := *cur
		next.Nodes = slices.Clone(cur.Nodes)
		rs, err := RotateOPoTKeys(&next, nil, keyStream(byte(10+round)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Chain != "verified" || rs[0].Slot != want || rs[0].Headend != "r1" || !slices.Equal(rs[0].Nodes, order) {
			t.Fatalf("round %d: rotations %+v, want chain verified to slot %d over %v", round, rs, want, order)
		}
		old, fresh := paramsOf(cur, int(want)), paramsOf(&next, int(want))
		for j := range order {
			if old[j] == fresh[j] {
				t.Errorf("round %d: %s kept its slot %d keys", round, order[j], want)
			}
		}
		if !slices.Equal(paramsOf(cur, int(1-want)), paramsOf(&next, int(1-want))) {
			t.Errorf("round %d: the slot in use changed", round)
		}
		if !proves(t, fresh, []int{0, 1, 2, 3}) || proves(t, fresh, []int{0, 2, 1, 3}) {
			t.Errorf("round %d: the new profile does not prove the chain's order (alone)", round)
		}
		if headSlot(&next) != 1-want {
			t.Errorf("round %d: the headend switched before SwitchOPoTSlots", round)
		}
		switched := next
		switched.Nodes = slices.Clone(next.Nodes)
		if err := SwitchOPoTSlots(&switched, rs); err != nil {
			t.Fatal(err)
		}
		if headSlot(&switched) != want || headSlot(&next) != 1-want || headSlot(cur) != 1-want {
			t.Errorf("round %d: headend slots %d / %d / %d, want %d after the switch only", round, headSlot(&switched), headSlot(&next), headSlot(cur), want)
		}
		for i := range switched.Nodes {
			if !switched.Nodes[i].Sealed() {
				t.Errorf("round %d: %s not sealed", round, switched.Nodes[i].Name)
			}
		}
		cur = &switched
		// A again compile of the spec keeps the rotated keys and slot.
		again, err := CompileKeys(s, keyStream(byte(20+round)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := KeepOPoTKeys(again, cur); err != nil {
			t.Fatal(err)
		}
		if headSlot(again) != want {
			t.Errorf("round %d: kept keys, headend slot %d, want %d", round, headSlot(again), want)
		}
		for i := range again.Nodes {
			if again.Nodes[i].Digest != cur.Nodes[i].Digest {
				t.Errorf("round %d: %s differs from the rotated state after KeepOPoTKeys", round, again.Nodes[i].Name)
			}
		}
	}
	if _, err := RotateOPoTKeys(cur, []string{"nope"}, nil); !errors.Is(err, ErrNoOPoTChain) {
		t.Errorf("unknown chain: %v, want ErrNoOPoTChain", err)
	}
	plain, err := CompileKeys(opotTestbedPlain(t), keyStream(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RotateOPoTKeys(plain, nil, nil); !errors.Is(err, ErrNoOPoTChain) {
		t.Errorf("no opot chain: %v, want ErrNoOPoTChain", err)
	}
}

// opotTestbedPlain is the testbed without opot.
func opotTestbedPlain(t *testing.T) *spec.Spec {
	s := opotTestbed(t)
	s.Chains[0].OPoT = false
	return s
}

// TestOPoTInEnd: on the testbed with srchain's eBPF End on r2 and r3,
// their transit entries are done in the End (InEnd), their OPoT programs
// attach no receive stage (no ingress interfaces), and their End
// programs are told to load the OPoT maps; with the kernel's End (the
// testbed as written) none of that.
func TestOPoTInEnd(t *testing.T) {
	for _, ebpf := range []bool{false, true} {
		s := opotTestbed(t)
		if ebpf {
			for i := range s.Nodes {
				if n := s.Nodes[i].Name; n == "r2" || n == "r3" {
					s.Nodes[i].Datapath = spec.DatapathEBPF
				}
			}
		}
		net, err := CompileKeys(s, keyStream(2))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range net.Nodes {
			if n.Name != "r2" && n.Name != "r3" {
				continue
			}
			var cfg state.OPoTConfig
			var endCfg state.EndConfig
			hasEnd := false
			for _, p := range n.Programs {
				switch p.Kind {
				case state.ProgramOPoT:
					if err := json.Unmarshal(p.Config, &cfg); err != nil {
						t.Fatal(err)
					}
				case state.ProgramEnd:
					hasEnd = true
					if len(p.Config) > 0 {
						if err := json.Unmarshal(p.Config, &endCfg); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if len(cfg.Chains) != 1 || cfg.Chains[0].InEnd != ebpf || (len(cfg.Ingress) == 0) != ebpf ||
				hasEnd != ebpf || endCfg.OPoT != ebpf {
				t.Errorf("ebpf End %v, %s: opot %+v, end program %v %+v", ebpf, n.Name, cfg, hasEnd, endCfg)
			}
		}
	}
}

// TestOPoTInProxy: on examples/proxy-testbed.yaml with opot on the
// chains through the firewall (web: End.AD fw-out; web-back: fw-in made
// End.AD.flow) and the monitor (mon6: End.AM), the proxy node's transit
// entries of the End.AD and End.AD.flow SIDs are done in the proxy
// (InEnd), End.AM's is not (its TLV crosses the NF in the packet: the
// stage in front does it, so the program keeps its receive stage), and
// the node has no End program to tell. The OPoT program comes before
// every proxy program of the node, since the node's one loaded proxy
// reads its maps whichever NF's apply loads it: also with opot on
// web-back alone, whose proxy program is not the node's first.
func TestOPoTInProxy(t *testing.T) {
	raw, err := os.ReadFile("../../examples/proxy-testbed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	web := [2]string{"    nfs: [fw-out]\n", "    nfs: [fw-out]\n    opot: true\n"}
	back := [2]string{"    nfs: [fw-in]\n", "    nfs: [fw-in]\n    opot: true\n"}
	mon := [2]string{"    nfs: [mon]\n", "    nfs: [mon]\n    opot: true\n"}
	flow := [2]string{"behavior: end.ad, to_nf: eth3, from_nf: eth2", "behavior: end.ad-flow, to_nf: eth3, from_nf: eth2"}
	for _, c := range []struct {
		name  string
		edits [][2]string
		want  map[string]bool
		stage bool // a receive stage (End.AM's transit)
	}{
		{"three chains", [][2]string{web, back, mon, flow}, map[string]bool{"web": true, "web-back": true, "mon6": false}, true},
		{"web-back alone", [][2]string{back, flow}, map[string]bool{"web-back": true}, false},
	} {
		y := string(raw)
		for _, r := range c.edits {
			if !strings.Contains(y, r[0]) {
				t.Fatalf("example lacks %q", r[0])
			}
			y = strings.Replace(y, r[0], r[1], 1)
		}
		s, err := spec.Parse([]byte(y), "proxy-opot.yaml")
		if err != nil {
			t.Fatal(err)
		}
		net, err := CompileKeys(s, keyStream(3))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(net.Nodes, func(n state.Node) bool { return n.Name == "proxy" })
		if i < 0 {
			t.Fatal("no proxy node")
		}
		n := net.Nodes[i]
		at := slices.IndexFunc(n.Programs, func(p state.Program) bool { return p.Kind == state.ProgramOPoT })
		if at < 0 {
			t.Fatalf("%s: proxy node has no opot program", c.name)
		}
		var cfg state.OPoTConfig
		if err := json.Unmarshal(n.Programs[at].Config, &cfg); err != nil {
			t.Fatal(err)
		}
		inEnd := map[string]bool{}
		for _, ch := range cfg.Chains {
			inEnd[ch.Name] = ch.InEnd
		}
		if !maps.Equal(inEnd, c.want) {
			t.Errorf("%s: transit entries in the proxy %v, want %v", c.name, inEnd, c.want)
		}
		if (len(cfg.Ingress) > 0) != c.stage {
			t.Errorf("%s: receive stage on %v, want one: %v", c.name, cfg.Ingress, c.stage)
		}
		proxies := 0
		for j, p := range n.Programs {
			if p.Kind == "proxy" {
				proxies++
				if j < at {
					t.Errorf("%s: proxy program of %s at %d, before the opot program at %d", c.name, p.NF, j, at)
				}
			}
			if p.Kind == state.ProgramEnd {
				t.Errorf("%s: proxy node has an end program: %+v", c.name, p)
			}
		}
		if proxies < 2 {
			t.Errorf("%s: %d proxy programs, want them all", c.name, proxies)
		}
	}
}

// TestOPoTVerifierPrefix: the verifier's entry carries the egress SID
// route's length (LOC+FUNCT, 112 on the testbed's default format), so
// the verifier owns every packet the route would decapsulate, any ARGS
// (docs/opot.md "Egress: nothing decapsulates unproven"); the SID
// prefix it names is the egress SID's route; no other role has one.
func TestOPoTVerifierPrefix(t *testing.T) {
	s := opotTestbed(t)
	net, err := CompileKeys(s, keyStream(3))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, n := range net.Nodes {
		for _, p := range n.Programs {
			if p.Kind != state.ProgramOPoT {
				continue
			}
			var cfg state.OPoTConfig
			if err := json.Unmarshal(p.Config, &cfg); err != nil {
				t.Fatal(err)
			}
			for _, ch := range cfg.Chains {
				if ch.Role != state.OPoTVerifier {
					if ch.SIDBits != 0 {
						t.Errorf("%s: %s entry with sid_bits %d", n.Name, ch.Role, ch.SIDBits)
					}
					continue
				}
				seen++
				pfx, err := ch.SID.Prefix(ch.SIDBits)
				if err != nil || ch.SIDBits != s.SIDFormat.SIDBits() {
					t.Fatalf("%s: verifier sid_bits %d (%v), want %d", n.Name, ch.SIDBits, err, s.SIDFormat.SIDBits())
				}
				found := false
				for _, sid := range n.SIDs {
					found = found || (sid.Chain == ch.Name && sid.SID == pfx)
				}
				if !found {
					t.Errorf("%s: no egress SID route %s of chain %s (SIDs %v)", n.Name, pfx, ch.Name, n.SIDs)
				}
			}
		}
	}
	if seen != 1 {
		t.Fatalf("%d verifier entries, want 1", seen)
	}
}
