package compile

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	_ "github.com/srchain/srchain/internal/kinds/all" // goldens with every kind linked in
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// TestGolden compiles every example and compares the JSON state with its
// golden file; run with -update after an intended change and review the diff.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	extra, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, extra...)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			s, err := spec.Load(f)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			// OPoT keys from a fixed stream (Compile draws them from
			// crypto/rand): the goldens stay reviewable.
			net, err := CompileKeys(s, keyStream(0))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got, err := json.MarshalIndent(net, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s; run go test ./internal/compile -update and review the diff", name, golden)
			}
			// Determinism: a second compile gives the same bytes.
			again, _ := CompileKeys(s, keyStream(0))
			b, _ := json.MarshalIndent(again, "", "  ")
			if !bytes.Equal(append(b, '\n'), got) {
				t.Errorf("second compile differs")
			}
			// The controller stores each node as its base and one part
			// per chain (state.Split): joined back, they are the node.
			for _, n := range net.Nodes {
				base, parts := state.Split(n)
				for name, p := range parts {
					if p.Empty() {
						t.Errorf("node %s: empty part %q", n.Name, name)
					}
				}
				if j := state.Join(base, parts); !reflect.DeepEqual(j, n) {
					t.Errorf("node %s: Join(Split(node)) differs from the node", n.Name)
				}
			}
		})
	}
}

func TestSRUnawareUnsupported(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := false
	s.NFs[0].SRAware = &f
	if _, err := Compile(s); !errors.Is(err, ErrUnsupported) {
		t.Errorf("err = %v, want ErrUnsupported", err)
	}
}

func TestProtoNumber(t *testing.T) {
	for _, c := range []struct {
		name string
		fam  int
		want uint8
	}{{"", 4, 0}, {"tcp", 6, 6}, {"udp", 4, 17}, {"icmp", 4, 1}, {"icmp", 6, 58}, {"icmpv6", 6, 58}} {
		if got, err := ProtoNumber(c.name, c.fam); err != nil || got != c.want {
			t.Errorf("ProtoNumber(%q, %d) = %d, %v; want %d", c.name, c.fam, got, err, c.want)
		}
	}
	if _, err := ProtoNumber("gre", 4); !errors.Is(err, ErrUnsupported) {
		t.Errorf("gre: %v", err)
	}
}

// TestFirewallOnEBPFNode: a firewall NF gets its program, and its node
// (ebpf datapath) the End program, firewall first so it filters before
// End runs.
func TestFirewallOnEBPFNode(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.NFs[0].Kind = "firewall"
	s.Nodes[slices.IndexFunc(s.Nodes, func(n spec.Node) bool { return n.Name == s.NFs[0].Node })].Datapath = spec.DatapathEBPF
	net, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range net.Nodes {
		if n.Name != s.NFs[0].Node {
			continue
		}
		if n.SIDs[0].Datapath != state.EBPF || len(n.Programs) != 2 || n.Programs[0].Kind != "firewall" || n.Programs[0].NF != s.NFs[0].Name || n.Programs[1].Kind != ProgramEnd {
			t.Errorf("%s: sids %+v programs %+v", n.Name, n.SIDs, n.Programs)
		}
	}
}

// TestUnknownKind: a kind that is not linked in does not compile (it used
// to compile as a plain End).
func TestUnknownKind(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.NFs[0].Kind = "opot"
	if _, err := Compile(s); !errors.Is(err, ErrUnsupported) {
		t.Errorf("compile with kind opot = %v, want ErrUnsupported", err)
	}
}

// TestStateVersionAndDigest: the state carries its format version and
// each node a digest of its content.
func TestStateVersionAndDigest(t *testing.T) {
	s, err := spec.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	net, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	if net.Version != state.FormatVersion {
		t.Errorf("version %d", net.Version)
	}
	for _, n := range net.Nodes {
		if !n.Sealed() {
			t.Errorf("node %s: digest %q does not match", n.Name, n.Digest)
		}
		n.Routes = append(n.Routes, state.Route{})
		if n.Sealed() {
			t.Errorf("node %s: digest unchanged by a change", n.Name)
		}
	}
}
