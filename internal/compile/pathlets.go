package compile

import (
	"fmt"
	"net/netip"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// pathlets turns the segment list of a chain split into pathlets (seed
// 004; spec.Pathlets) into the list its ingress pushes, and instantiates
// each pathlet's binding SID (End.B6.Encaps with the pathlet's list) on
// the pathlet's host and the End.DT6 that closes it on its end node (one
// per node, shared by every pathlet that ends there). full is the chain's
// unsplit list: one segment per NF, then the egress SID.
func (c *compiler) pathlets(ch *spec.Chain, full []netip.Addr) ([]netip.Addr, error) {
	ps := c.s.Pathlets(ch)
	if ps == nil {
		return full, nil
	}
	bind := c.sids.Binding[ch.Name]
	if len(bind) != len(ps)-1 {
		return nil, fmt.Errorf("%w: %d binding SIDs for %d pathlets", ErrUnroutable, len(bind), len(ps)-1)
	}
	list := func(k int) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, it := range ps[k].Items {
			if it.Sub > 0 {
				out = append(out, bind[it.Sub-1].Addr())
			} else {
				out = append(out, full[it.NF])
			}
		}
		if k == 0 {
			return append(out, full[len(full)-1]), nil
		}
		end, ok := c.sids.PathletEnd[ps[k].End]
		if !ok {
			return nil, fmt.Errorf("%w: no pathlet end SID on %s", ErrUnroutable, ps[k].End)
		}
		return append(out, end.Addr()), nil
	}
	for k := 1; k < len(ps); k++ {
		segs, err := list(k)
		if err != nil {
			return nil, err
		}
		host, end := c.nodes[ps[k].Host], c.nodes[ps[k].End]
		if host == nil || end == nil {
			return nil, fmt.Errorf("%w: pathlet %d on unknown nodes %q, %q", ErrUnroutable, k, ps[k].Host, ps[k].End)
		}
		host.SIDs = append(host.SIDs, state.LocalSID{SID: bind[k-1].Masked(), Behavior: state.EndB6Encaps, Datapath: state.Kernel, Segments: segs, Chain: ch.Name})
		if !c.pathletEnds[ps[k].End] {
			c.pathletEnds[ps[k].End] = true
			sid := c.sids.PathletEnd[ps[k].End]
			end.SIDs = append(end.SIDs, state.LocalSID{SID: sid.Masked(), Behavior: state.EndDT6, Table: TableMain, Datapath: state.Kernel})
		}
	}
	return list(0)
}
