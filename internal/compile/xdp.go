package compile

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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

// xdp places the XDP hook of every `datapath: xdp` router. XDP allows one
// program per interface and runs before every tcx program, so it goes to
// the End program only when no other stage of the node must see a packet
// first: a firewall or End.AN.NF at tcx would be bypassed by an End that
// rewrites and redirects at XDP (issue 13's rule: a packet is never
// forwarded by a stage that runs before a filtering NF of the same node).
// Such a node runs its End at tc and says why (EndConfig.XDPFallback,
// shown by lab status). A node with no eBPF SIDs gives the hook to its
// ingress program, if any. The peers of a node with an XDP program get
// GRO, which XDP_REDIRECT into a veth needs.
func (c *compiler) xdp() error {
	for _, n := range c.s.Nodes {
		if n.Role != spec.RoleRouter || n.Datapath != spec.DatapathXDP {
			continue
		}
		sn := c.nodes[n.Name]
		var stages []string
		end, ingress := -1, -1
		for i, p := range sn.Programs {
			switch p.Kind {
			case ProgramEnd:
				end = i
			case ProgramIngress:
				ingress = i
			default:
				stages = append(stages, p.Kind+" "+p.NF)
			}
		}
		attached := false
		switch {
		case end >= 0:
			cfg := state.EndConfig{XDP: len(stages) == 0}
			if !cfg.XDP {
				slices.Sort(stages)
				cfg.XDPFallback = "End runs at tc: an XDP End would forward before " + strings.Join(stages, ", ")
			}
			b, err := json.Marshal(cfg)
			if err != nil {
				return fmt.Errorf("compile node %s end: %w", n.Name, err)
			}
			sn.Programs[end].Config = b
			attached = cfg.XDP
		case ingress >= 0 && len(stages) == 0:
			var cfg state.IngressConfig
			if err := json.Unmarshal(sn.Programs[ingress].Config, &cfg); err != nil {
				return fmt.Errorf("compile node %s ingress: %w", n.Name, err)
			}
			cfg.XDP = true
			b, err := json.Marshal(cfg)
			if err != nil {
				return fmt.Errorf("compile node %s ingress: %w", n.Name, err)
			}
			sn.Programs[ingress].Config = b
			attached = true
		}
		if attached {
			for _, i := range sn.Interfaces {
				c.setGRO(i.Peer)
			}
		}
	}
	return nil
}

// setGRO turns GRO on at endpoint e (a node's interface).
func (c *compiler) setGRO(e state.Endpoint) {
	sn := c.nodes[e.Node]
	if sn == nil {
		return
	}
	for k := range sn.Interfaces {
		if sn.Interfaces[k].Name == e.Interface {
			sn.Interfaces[k].GRO = true
		}
	}
}
