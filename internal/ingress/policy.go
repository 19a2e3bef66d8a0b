package ingress

import (
	"fmt"
	"strings"

	"github.com/srchain/srchain/internal/state"
)

// KernelPolicy is the kernel's steering of chains as the compiler emits
// it beside the program (the path for every packet the fast path leaves
// to the kernel), as `ip` argument lists with every route on dev: a
// 5-tuple chain i gets a rule at priority 1000 + i per source into table
// 1000 + i, which holds its seg6 routes; a destination chain its seg6
// routes in the main table (encap: travel order; inline: iproute2 adds
// the destination's slot itself); rules carry srchain's protocol
// (RTProto) as internal/apply writes them. Tests install it to compare
// the program with the kernel.
func KernelPolicy(chains []Chain, dev string) [][]string {
	mode := map[state.EncapMode]string{state.ModeEncap: "encap", state.ModeInsert: "inline"}
	var cmds [][]string
	for i, c := range chains {
		var segs []string
		for _, a := range c.Segments {
			segs = append(segs, a.String())
		}
		table := "main"
		fiveTuple := c.Proto != 0 || c.SPort != (state.PortRange{}) || c.DPort != (state.PortRange{}) || len(c.Src) > 0
		if fiveTuple {
			table = fmt.Sprint(1000 + i)
		}
		for _, dst := range c.Dst {
			fam := "-6"
			if dst.Addr().Is4() {
				fam = "-4"
			}
			if fiveTuple {
				srcs := []string{""}
				if len(c.Src) > 0 {
					srcs = nil
					for _, p := range c.Src {
						srcs = append(srcs, p.String())
					}
				}
				for _, src := range srcs {
					rule := []string{fam, "rule", "add", "priority", table, "to", dst.String()}
					if src != "" {
						rule = append(rule, "from", src)
					}
					if c.Proto != 0 {
						rule = append(rule, "ipproto", fmt.Sprint(c.Proto))
					}
					if c.SPort != (state.PortRange{}) {
						rule = append(rule, "sport", fmt.Sprintf("%d-%d", c.SPort.From, c.SPort.To))
					}
					if c.DPort != (state.PortRange{}) {
						rule = append(rule, "dport", fmt.Sprintf("%d-%d", c.DPort.From, c.DPort.To))
					}
					cmds = append(cmds, append(rule, "table", table, "protocol", fmt.Sprint(RTProto)))
				}
			}
			cmds = append(cmds, []string{fam, "route", "add", dst.String(), "table", table, "encap", "seg6",
				"mode", mode[c.Mode], "segs", strings.Join(segs, ","), "dev", dev})
		}
	}
	return cmds
}
