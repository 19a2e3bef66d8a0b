package compile

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestXDPPlacement: `datapath: xdp` gives the End program its XDP twin
// and turns GRO on at the node's peers, unless another stage of the node
// (a firewall) must see packets first: then End stays at tc and says why.
func TestXDPPlacement(t *testing.T) {
	for _, tc := range []struct {
		name     string
		kind     string
		wantXDP  bool
		fallback string
	}{
		{"forward NF", "forward", true, ""},
		{"firewall NF", "firewall", false, "firewall fw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := spec.Load("../../examples/quickstart.yaml")
			if err != nil {
				t.Fatal(err)
			}
			s.NFs[0].Kind = tc.kind
			s.Nodes[slices.IndexFunc(s.Nodes, func(n spec.Node) bool { return n.Name == "r2" })].Datapath = spec.DatapathXDP
			net, err := Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			gro := map[string]bool{}
			for _, n := range net.Nodes {
				for _, i := range n.Interfaces {
					if i.GRO {
						gro[n.Name+"/"+i.Name] = true
					}
				}
				if n.Name != "r2" {
					continue
				}
				if n.SIDs[0].Datapath != state.EBPF {
					t.Errorf("r2 SID datapath %q, want ebpf", n.SIDs[0].Datapath)
				}
				i := slices.IndexFunc(n.Programs, func(p state.Program) bool { return p.Kind == ProgramEnd })
				if i < 0 {
					t.Fatalf("r2 has no End program: %+v", n.Programs)
				}
				var cfg state.EndConfig
				if err := json.Unmarshal(n.Programs[i].Config, &cfg); err != nil {
					t.Fatal(err)
				}
				if cfg.XDP != tc.wantXDP || (tc.fallback == "") != (cfg.XDPFallback == "") || !strings.Contains(cfg.XDPFallback, tc.fallback) {
					t.Errorf("r2 end config %+v, want xdp %v fallback mentioning %q", cfg, tc.wantXDP, tc.fallback)
				}
			}
			want := map[string]bool{}
			if tc.wantXDP {
				want = map[string]bool{"r1/eth1": true, "r3/eth0": true}
			}
			if !mapsEqual(gro, want) {
				t.Errorf("gro on %v, want %v", gro, want)
			}
		})
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
