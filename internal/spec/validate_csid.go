package spec

import (
	"fmt"
	"net/netip"
)

// csid checks sid_format.csid and the chains that ask for compression.
// A compressed chain's SIDs are LB:C-SID with nothing after (RFC 9800
// section 4.1): the locator block is the first block_bits of every
// locator, LOC:FUNCT is exactly block + C-SID, and the SIDs of the chain
// (NFs and the egress) carry no ARGS.
func (v *validator) csid() {
	s := v.s
	f := s.SIDFormat
	if c := f.CSID; c != nil {
		p := "sid_format.csid"
		switch {
		case c.BlockBits <= 0 || c.BlockBits%8 != 0 || c.NodeFunctionBits <= 0 || c.NodeFunctionBits%8 != 0:
			v.add(p, "block_bits %d and node_function_bits %d must be positive multiples of 8 (the kernel's lblen and nflen)", c.BlockBits, c.NodeFunctionBits)
		case c.BlockBits+c.NodeFunctionBits != f.LocatorBits+f.FunctionBits:
			v.add(p, "block_bits + node_function_bits is %d, but a C-SID's node and function must be the SID's LOC:FUNCT after the block: locator_bits + function_bits is %d", c.BlockBits+c.NodeFunctionBits, f.LocatorBits+f.FunctionBits)
		case c.BlockBits >= f.LocatorBits:
			v.add(p+".block_bits", "block_bits %d must be shorter than locator_bits %d (the rest of the locator names the node)", c.BlockBits, f.LocatorBits)
		}
	}
	var plan *SIDPlan
	for i := range s.Chains {
		c := &s.Chains[i]
		p := fmt.Sprintf("chains[%d].compression", i)
		switch c.Compression {
		case "":
			continue
		case CompressionNextCSID:
		default:
			v.add(p, "compression must be %q (or absent), got %q", CompressionNextCSID, c.Compression)
			continue
		}
		if f.CSID == nil {
			v.add(p, "compression %s needs sid_format.csid (block_bits, node_function_bits)", c.Compression)
			continue
		}
		if c.Mode == ModeInsert {
			v.add(p, "compression %s is for encap mode: in insert mode the last segment is the packet's own destination, not a SID of the block", c.Compression)
			continue
		}
		if plan == nil {
			sp := s.SIDs()
			plan = &sp
		}
		var sids []netip.Prefix
		for k, name := range c.NFs {
			nf := s.NF(name)
			if nf == nil {
				continue
			}
			path := fmt.Sprintf("chains[%d].nfs[%d]", i, k)
			if nf.Kind != "forward" || nf.Behavior == BehaviorEndX {
				v.add(path, "NF %q is kind %s %s: a compressed chain crosses forward NFs with End only (the NEXT-C-SID flavor of End)", name, nf.Kind, nf.Behavior)
			}
			if sid, ok := plan.NF[name]; ok {
				sids = append(sids, sid)
			}
		}
		if sid, ok := plan.Egress[c.Name]; ok {
			sids = append(sids, sid)
		}
		block := netip.Prefix{}
		for _, sid := range sids {
			if sid.Addr() != sid.Masked().Addr() {
				v.add(p, "SID %s has ARGS bits set: a C-SID container has no room for them", sid.Addr())
			}
			b, _ := sid.Addr().Prefix(f.CSID.BlockBits)
			if !block.IsValid() {
				block = b
			} else if b != block {
				v.add(p, "SID %s is outside the locator block %s of the chain's other SIDs: one container holds one block", sid.Addr(), block)
			}
		}
	}
}
