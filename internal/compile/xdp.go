package compile

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// sidDatapath is who serves an End / End.X SID of node: srchain's End
// program for datapath ebpf and xdp (XDP is an attach mode of the same
// program, set in its config by xdp), else the kernel.
func sidDatapath(node *spec.Node) state.Datapath {
	if node.EBPFDatapath() {
		return state.EBPF
	}
	return state.Kernel
}

// xdp builds the XDP pipeline of every `datapath: xdp` router (issue 13,
// docs/pipeline.md). The node's programs run in pipeline order
// (pipeline.Place): at XDP the longest prefix of that order whose stages
// all have an XDP program, one per stage; from the first stage XDP cannot
// run (a kind with no XDP program, or a second program for the same
// stage) every later stage stays at tc, because an XDP stage runs before
// every tc program and would forward packets before a stage that must
// see them first (the rule: a packet is never forwarded by a stage that
// runs before a filtering NF of the same node). The pipeline program says
// which stages run at XDP and why others do not (lab status shows it).
// The peers of a node with XDP stages get GRO, which XDP_REDIRECT into a
// veth needs, and checksums completed before they send to it
// (state.Interface.SoftwareChecksum).
func (c *compiler) xdp() error {
	for _, n := range c.s.Nodes {
		if n.Role != spec.RoleRouter || n.Datapath != spec.DatapathXDP {
			continue
		}
		sn := c.nodes[n.Name]
		cfg, xdp := placeXDP(sn.Programs)
		for i := range xdp {
			sn.Programs[i].XDP = xdp[i]
		}
		if len(cfg.Stages) == 0 && cfg.TC == "" {
			continue
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("compile node %s pipeline: %w", n.Name, err)
		}
		sn.Programs = append(sn.Programs, state.Program{Kind: state.ProgramPipeline, Interfaces: ifNames(sn), Config: b})
		if len(cfg.Stages) > 0 {
			for _, i := range sn.Interfaces {
				c.xdpPeer(i.Peer)
			}
		}
	}
	return nil
}

// placeXDP orders progs by pipeline stage and says which run at XDP (the
// longest prefix of XDP-capable stages, one program each) and why the
// others do not.
func placeXDP(progs []state.Program) (state.PipelineConfig, []bool) {
	type stage struct {
		idx  int
		at   pipeline.Placement
		name string
	}
	var stages []stage
	for i, p := range progs {
		if noIngressStage(p) {
			continue
		}
		stages = append(stages, stage{i, pipeline.Place(p.Kind), strings.TrimSpace(p.Kind + " " + p.NF)})
	}
	slices.SortStableFunc(stages, func(a, b stage) int { return cmp.Compare(a.at.Stage, b.at.Stage) })
	var cfg state.PipelineConfig
	xdp := make([]bool, len(progs))
	var blocker string
	var tc []string
	// Programs of one stage share its one XDP slot, unless they are one
	// loaded program anyway (Placement.OnePerNode, same kind).
	clash := func(a, b stage) bool {
		return a.at.Stage == b.at.Stage && !(a.at.OnePerNode && progs[a.idx].Kind == progs[b.idx].Kind)
	}
	for k, s := range stages {
		shared := (k > 0 && clash(stages[k-1], s)) || (k+1 < len(stages) && clash(stages[k+1], s))
		if blocker == "" && (!s.at.XDP || shared) {
			blocker = s.name
			if s.at.XDP {
				blocker += " (one XDP program per stage: " + s.at.Stage.String() + " has several)"
			}
		}
		if blocker != "" {
			if s.at.XDP {
				tc = append(tc, s.name)
			}
			continue
		}
		xdp[s.idx] = true
		if n := s.at.Stage.String(); !slices.Contains(cfg.Stages, n) {
			cfg.Stages = append(cfg.Stages, n)
		}
	}
	if len(tc) > 0 {
		cfg.TC = fmt.Sprintf("%s at tc: XDP would forward before %s", strings.Join(tc, ", "), blocker)
	}
	return cfg, xdp
}

// noIngressStage reports whether p runs no stage on receive and so takes
// no part in the receive pipeline: an OPoT program of a node that is
// only headends (its stage follows the kernel's seg6 encap at egress; an
// eBPF ingress, at XDP or tc, writes the TLV itself, and what XDP
// redirects carries it already) and transits done in the End or SR
// proxy program (OPoTChain.InEnd). An undecodable config counts as
// taking part.
func noIngressStage(p state.Program) bool {
	if p.Kind != state.ProgramOPoT {
		return false
	}
	var cfg state.OPoTConfig
	return json.Unmarshal(p.Config, &cfg) == nil && len(cfg.Ingress) == 0
}

// xdpPeer sets up endpoint e (a node's interface) facing an XDP node:
// GRO on, checksums completed in software.
func (c *compiler) xdpPeer(e state.Endpoint) {
	if i := c.endpoint(e); i != nil {
		i.GRO, i.SoftwareChecksum = true, true
	}
}

// endpoint is the interface e names in the desired state, or nil.
func (c *compiler) endpoint(e state.Endpoint) *state.Interface {
	sn := c.nodes[e.Node]
	if sn == nil {
		return nil
	}
	for k := range sn.Interfaces {
		if sn.Interfaces[k].Name == e.Interface {
			return &sn.Interfaces[k]
		}
	}
	return nil
}
