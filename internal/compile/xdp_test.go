package compile

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// TestXDPPlacement: `datapath: xdp` builds the node's XDP pipeline (the
// firewall in front of the End) and turns GRO on and transmit checksum
// offload off at the node's peers.
func TestXDPPlacement(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   string
		stages []string
	}{
		{"forward NF", "forward", []string{"end"}},
		{"firewall NF", "firewall", []string{"firewall", "end"}},
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
					if i.SoftwareChecksum != i.GRO {
						t.Errorf("%s/%s: gro %v, software checksum %v; want both on a peer of r2, none elsewhere", n.Name, i.Name, i.GRO, i.SoftwareChecksum)
					}
				}
				if n.Name != "r2" {
					continue
				}
				if n.SIDs[0].Datapath != state.EBPF {
					t.Errorf("r2 SID datapath %q, want ebpf", n.SIDs[0].Datapath)
				}
				last := n.Programs[len(n.Programs)-1]
				if last.Kind != state.ProgramPipeline {
					t.Fatalf("r2's last program is %q, want the pipeline (applied after its stages)", last.Kind)
				}
				var cfg state.PipelineConfig
				if err := json.Unmarshal(last.Config, &cfg); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(cfg.Stages, tc.stages) || cfg.TC != "" {
					t.Errorf("r2 pipeline %+v, want stages %v, nothing at tc", cfg, tc.stages)
				}
				for _, p := range n.Programs[:len(n.Programs)-1] {
					if !p.XDP {
						t.Errorf("r2 program %s %s not at XDP", p.Kind, p.NF)
					}
				}
			}
			want := map[string]bool{"r1/eth1": true, "r3/eth0": true}
			if !mapsEqual(gro, want) {
				t.Errorf("gro on %v, want %v", gro, want)
			}
		})
	}
}

// TestPlaceXDP: the XDP part of a pipeline is the longest prefix of
// stages that XDP can run, one program per stage; the first stage it
// cannot run keeps every later one at tc, and the note says why.
func TestPlaceXDP(t *testing.T) {
	prog := func(kind, nf string) state.Program { return state.Program{Kind: kind, NF: nf} }
	for _, tc := range []struct {
		name   string
		progs  []state.Program
		xdp    []bool
		stages []string
		tc     string // substring of the note; "" none
	}{
		{"end alone", []state.Program{prog("end", "")}, []bool{true}, []string{"end"}, ""},
		{"order from kinds, not from the list",
			[]state.Program{prog("ingress", ""), prog("end", ""), prog("firewall", "fw")},
			[]bool{true, true, true}, []string{"firewall", "end", "ingress"}, ""},
		{"netfilter keeps the end at tc",
			[]state.Program{prog("netfilter", "anf"), prog("end", ""), prog("firewall", "fw")},
			[]bool{false, false, true}, []string{"firewall"}, "end at tc: XDP would forward before netfilter anf"},
		{"two firewalls: one XDP slot",
			[]state.Program{prog("firewall", "a"), prog("firewall", "b"), prog("end", "")},
			[]bool{false, false, false}, nil, "firewall a, firewall b, end at tc"},
		{"an opot program with a receive stage runs in front of the end",
			[]state.Program{prog("end", ""), {Kind: "opot", Config: []byte(`{"chains":[],"egress":["eth1"],"ingress":["eth0"]}`)}},
			[]bool{true, true}, []string{"opot", "end"}, ""},
		{"netfilter keeps opot at tc",
			[]state.Program{prog("end", ""), {Kind: "opot", Config: []byte(`{"chains":[],"ingress":["eth0"]}`)}, prog("netfilter", "anf")},
			[]bool{false, false, false}, nil, "opot, end at tc: XDP would forward before netfilter anf"},
		{"an egress-only (headend) opot program is no stage",
			[]state.Program{{Kind: "opot", Config: []byte(`{"chains":[],"egress":["eth1"]}`)}, prog("ingress", "")},
			[]bool{false, true}, []string{"ingress"}, ""},
		{"the node's proxies are one stage, after opot and before the end",
			[]state.Program{prog("end", ""), prog("proxy", "nat"), {Kind: "opot", Config: []byte(`{"chains":[],"ingress":["eth0"]}`)}, prog("proxy", "fw"), prog("firewall", "sera")},
			[]bool{true, true, true, true, true}, []string{"firewall", "opot", "proxy", "end"}, ""},
		{"netfilter keeps the proxies at tc",
			[]state.Program{prog("proxy", "nat"), prog("netfilter", "anf"), prog("end", "")},
			[]bool{false, false, false}, nil, "proxy nat, end at tc: XDP would forward before netfilter anf"},
		{"an unknown kind runs first, at tc",
			[]state.Program{prog("end", ""), prog("mystery", "m")},
			[]bool{false, false}, nil, "end at tc: XDP would forward before mystery m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, xdp := placeXDP(tc.progs)
			if !slices.Equal(xdp, tc.xdp) || !slices.Equal(cfg.Stages, tc.stages) {
				t.Errorf("xdp %v stages %v, want %v %v", xdp, cfg.Stages, tc.xdp, tc.stages)
			}
			if (tc.tc == "") != (cfg.TC == "") || !strings.Contains(cfg.TC, tc.tc) {
				t.Errorf("tc note %q, want one containing %q", cfg.TC, tc.tc)
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
