package spec

import "fmt"

// Pathlets (seed 004 section III: long source routes are cut into pathlets
// joined by re-encapsulation points). A chain whose segment list would
// exceed its max_sids is split into a tree of segment lists: the ingress
// pushes the top list; a binding SID in a list (End.B6.Encaps, RFC 8986
// section 4.13) pushes the next pathlet's list as a new outer IPv6 header
// and SRH around the whole packet, after moving the packet's own list on
// to its next segment; each pathlet ends with an End.DT6 SID (RFC 8986
// section 4.6, main table) that removes the pathlet's header and hands the
// packet, already pointing at its next segment, back to routing. Transit
// nodes keep no per-chain state: the binding SIDs are the only per-pathlet
// state, on the node where the pathlet starts. What the kernel does was
// measured on Linux 6.18 (docs/controller.md "Pathlets").

// PathletItem is one segment of a pathlet's list before its last one: an
// NF of the chain (NF >= 0, its index in Chain.NFs) or the binding SID of
// another pathlet (Sub > 0, its index in the chain's pathlets).
type PathletItem struct {
	NF  int
	Sub int
}

// Pathlet is one segment list of a split chain. Pathlet 0 is the list the
// ingress pushes; its last segment is the egress SID. Every other pathlet
// is pushed by its binding SID and ends with the End.DT6 SID of End.
type Pathlet struct {
	Items []PathletItem
	// Parent is the pathlet whose list holds this one's binding SID (-1
	// for pathlet 0).
	Parent int
	// Host is the node of the binding SID: where the pathlet starts, the
	// node of its first NF, so the re-encapsulation costs no detour (the
	// packet goes there anyway) and the previous pathlet ends there too.
	Host string
	// End is the node whose End.DT6 SID closes the pathlet: the node of
	// the chain's next NF after it, or the egress. The packet goes there
	// next anyway, and the capture of that hop shows the pathlet's list
	// with segments left 0, which proves its last NF ran (internal/trace).
	End string
	// First and Last are the first and last NF (index in Chain.NFs) the
	// pathlet's subtree carries, in travel order.
	First, Last int
}

// MinMaxSIDs is the smallest useful max_sids: a pathlet then carries at
// least two segments (NFs or binding SIDs) besides its End.DT6, so the
// split terminates.
const MinMaxSIDs = 3

// Splits reports whether the chain's segment list must be cut into
// pathlets: max_sids is set (and valid) and the list would exceed it.
func (c *Chain) Splits() bool {
	return c.MaxSIDs >= MinMaxSIDs && c.MaxSIDs <= MaxSRHSegments && c.Mode == ModeEncap && len(c.NFs)+1 > c.MaxSIDs
}

// Pathlets cuts chain c into pathlets of at most c.MaxSIDs segments each
// (nil when it does not split). The top list is as shallow as possible:
// the fewest levels of binding SIDs that hold every NF; within a list NFs
// come first while the rest still fits, then binding SIDs, the first as
// small as the rest allows. The result depends only on the spec.
func (s *Spec) Pathlets(c *Chain) []Pathlet {
	ps := c.split()
	node := func(i int) string {
		if nf := s.NF(c.NFs[i]); nf != nil {
			return nf.Node
		}
		return ""
	}
	for k := 1; k < len(ps); k++ {
		ps[k].Host = node(ps[k].First)
		ps[k].End = c.Egress
		if next := ps[k].Last + 1; next < len(c.NFs) {
			ps[k].End = node(next)
		}
	}
	return ps
}

// split is Pathlets without the nodes.
func (c *Chain) split() []Pathlet {
	if !c.Splits() {
		return nil
	}
	m := c.MaxSIDs - 1 // items per list besides its last segment
	depth, capacity := 0, m
	for capacity < len(c.NFs) {
		depth++
		capacity *= m
	}
	nfs := make([]int, len(c.NFs))
	for i := range nfs {
		nfs[i] = i
	}
	ps := []Pathlet{{Parent: -1, Host: c.Ingress}}
	var fill func(k int, leaves []int, depth int)
	fill = func(k int, leaves []int, depth int) {
		sub := 1 // leaves one child subtree may carry
		for range depth {
			sub *= m
		}
		ps[k].First, ps[k].Last = leaves[0], leaves[len(leaves)-1]
		slots := m
		for len(leaves) > 0 {
			if len(leaves)-1 <= (slots-1)*sub {
				ps[k].Items = append(ps[k].Items, PathletItem{NF: leaves[0], Sub: -1})
				leaves = leaves[1:]
			} else {
				take := len(leaves) - (slots-1)*sub
				j := len(ps)
				ps = append(ps, Pathlet{Parent: k})
				ps[k].Items = append(ps[k].Items, PathletItem{NF: -1, Sub: j})
				fill(j, leaves[:take], depth-1)
				leaves = leaves[take:]
			}
			slots--
		}
	}
	fill(0, nfs, depth)
	return ps
}

// PathletLen is the number of segments in pathlet k's list (its items
// and the last segment: the egress SID or the End.DT6).
func PathletLen(ps []Pathlet, k int) int { return len(ps[k].Items) + 1 }

// pathletOverhead is the most bytes of headers around the packet while a
// pathlet is active: its own outer IPv6 header and SRH and those of every
// pathlet around it.
func pathletOverhead(ps []Pathlet) int {
	most := 0
	for k := range ps {
		n := 0
		for j := k; j >= 0; j = ps[j].Parent {
			n += IPv6HeaderLen + SRHFixedLen + SIDLen*PathletLen(ps, j)
		}
		most = max(most, n)
	}
	return most
}

// PathletStep is one seg6 step of a split chain's packets, in travel
// order: an NF's SID (NF >= 0), a binding SID (Binding > 0) or a
// pathlet's End.DT6 (End > 0).
type PathletStep struct {
	Node    string
	NF      int
	Binding int
	End     int
}

// PathletSteps lists the seg6 steps of the split chain in travel order
// (the egress SID excluded).
func PathletSteps(ps []Pathlet) []PathletStep {
	var out []PathletStep
	var walk func(k int)
	walk = func(k int) {
		for _, it := range ps[k].Items {
			if it.Sub < 0 {
				out = append(out, PathletStep{NF: it.NF, Binding: -1, End: -1})
				continue
			}
			out = append(out, PathletStep{Node: ps[it.Sub].Host, NF: -1, Binding: it.Sub, End: -1})
			walk(it.Sub)
			out = append(out, PathletStep{Node: ps[it.Sub].End, NF: -1, Binding: -1, End: it.Sub})
		}
	}
	walk(0)
	return out
}

// pathlets checks max_sids and what a split chain may hold.
func (v *validator) pathlets(p string, c *Chain) {
	if c.MaxSIDs == 0 {
		return
	}
	if c.MaxSIDs < MinMaxSIDs || c.MaxSIDs > MaxSRHSegments {
		v.add(p+".max_sids", "max_sids must be %d..%d (or absent for no limit), got %d: a pathlet holds at least two segments besides its End.DT6", MinMaxSIDs, MaxSRHSegments, c.MaxSIDs)
		return
	}
	if len(c.NFs)+1 <= c.MaxSIDs {
		return
	}
	switch {
	case c.Mode != ModeEncap:
		v.add(p+".max_sids", "the chain needs %d segments, more than max_sids %d, and only encap mode can be split into pathlets (End.B6.Encaps wraps the whole packet)", len(c.NFs)+1, c.MaxSIDs)
		return
	case c.Compression != "":
		v.add(p+".max_sids", "a chain split into pathlets cannot also use compression %s", c.Compression)
		return
	case c.OPoT:
		v.add(p+".max_sids", "a chain split into pathlets cannot carry OPoT yet: the proof's TLV would have to ride in every pathlet's SRH")
		return
	}
	ps := v.s.Pathlets(c)
	bits := v.s.SIDFormat.LocatorBits
	for k := 1; k < len(ps); k++ {
		for _, n := range []string{ps[k].Host, ps[k].End} {
			if nd := v.s.Node(n); nd != nil && (nd.Role != RoleRouter || !nd.Locator.IsValid() || nd.Locator.Bits() != bits) {
				v.add(p+".max_sids", "pathlet %d needs a binding SID or End.DT6 on %q, which is not a router with a /%d locator to allocate it from", k, n, bits)
				return
			}
		}
		for _, it := range ps[k].Items {
			if it.Sub >= 0 {
				continue
			}
			// Inside a pathlet the packet is the chain's SR packet
			// wrapped once more: a firewall would classify the pathlet's
			// headers, a proxy or End.AN.NF would hand the wrapped SR
			// packet to its NF. Only End/End.X act the same at any depth.
			if nf := v.s.NF(c.NFs[it.NF]); nf != nil && nf.Kind != DefaultKind {
				v.add(fmt.Sprintf("%s.nfs[%d]", p, it.NF), "NF %q (kind %s) lands in pathlet %d of the split chain (max_sids %d), where it would see the pathlet's headers instead of the chain's packet; only kind forward NFs may be in a pathlet: move it among the first %d NFs or raise max_sids",
					nf.Name, nf.Kind, k, c.MaxSIDs, firstTop(ps))
			}
		}
	}
}

// firstTop is the number of NFs at the head of the chain that stay in the
// top list.
func firstTop(ps []Pathlet) int {
	n := 0
	for _, it := range ps[0].Items {
		if it.Sub >= 0 {
			break
		}
		n++
	}
	return n
}
