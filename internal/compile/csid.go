package compile

import (
	"fmt"
	"net/netip"

	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// compress gives the chain's NF SIDs the NEXT-C-SID flavor on their
// nodes and returns its segment list packed into C-SID containers.
// Validate has checked the layout (one locator block, no ARGS, End only).
func (c *compiler) compress(ch *spec.Chain, segs []netip.Addr) ([]netip.Addr, error) {
	f := c.s.SIDFormat.CSID
	if f == nil {
		return nil, fmt.Errorf("%w: compression without sid_format.csid", ErrUnsupported)
	}
	flavor := state.CSIDFlavor{BlockBits: f.BlockBits, NodeFunctionBits: f.NodeFunctionBits}
	for _, name := range ch.NFs {
		nf := c.s.NF(name)
		sid := c.sids.NF[name].Masked()
		n := c.nodes[nf.Node]
		for k := range n.SIDs {
			if n.SIDs[k].SID == sid {
				n.SIDs[k].NextCSID = flavor
			}
		}
	}
	return PackCSIDs(segs, f.BlockBits, f.NodeFunctionBits)
}

// PackCSIDs packs segs (travel order, each LB:C-SID followed by zeros)
// into NEXT-C-SID containers (RFC 9800 section 4.1.1): each container is
// the locator block followed by as many C-SIDs as fit, in travel order,
// the unused rest zero. An End with the flavor shifts the next C-SID of
// its container into place; at the last one (nothing after it) it moves
// on to the next container (SL - 1).
func PackCSIDs(segs []netip.Addr, blockBits, nfBits int) ([]netip.Addr, error) {
	if blockBits <= 0 || nfBits <= 0 || blockBits%8 != 0 || nfBits%8 != 0 || blockBits+nfBits > 128 {
		return nil, fmt.Errorf("%w: C-SID layout block %d, node+function %d bits", ErrUnsupported, blockBits, nfBits)
	}
	per := (128 - blockBits) / nfBits
	lb, nb := blockBits/8, nfBits/8
	var out []netip.Addr
	var cur, block [16]byte
	n := 0
	for i, s := range segs {
		b := s.As16()
		if i == 0 {
			block = b
		}
		if !s.Is6() || s.Is4In6() || string(b[:lb]) != string(block[:lb]) {
			return nil, fmt.Errorf("%w: segment %s is not in the locator block of %s", ErrUnsupported, s, segs[0])
		}
		for _, x := range b[lb+nb:] {
			if x != 0 {
				return nil, fmt.Errorf("%w: segment %s has bits after its C-SID", ErrUnsupported, s)
			}
		}
		if n == 0 {
			cur = [16]byte{}
			copy(cur[:lb], b[:lb])
		}
		copy(cur[lb+n*nb:lb+(n+1)*nb], b[lb:lb+nb])
		n++
		if n == per {
			out = append(out, netip.AddrFrom16(cur))
			n = 0
		}
	}
	if n > 0 {
		out = append(out, netip.AddrFrom16(cur))
	}
	return out, nil
}
