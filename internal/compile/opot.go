package compile

import (
	"cmp"
	cryptorand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"

	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// OPoTSlots is how many profiles a chain has at once: slot 0 is the one
// the headend starts with, slot 1 the next key, so that a rotation only
// switches the headend's slot while packets of the old one are still in
// flight (docs/opot.md "Profiles").
const OPoTSlots = state.OPoTSlots

// OPoTSecretName names the secret holding one node's parameters of one
// slot of a chain's profile. id is the chain's profile number, the BPF
// maps' key (chain index + 1, so 0 never names a chain).
func OPoTSecretName(chain string, id, slot int) string {
	return state.OPoTSecretName(chain, id, slot)
}

// opot generates the profiles of every chain with opot: true (seed 003
// III-A; docs/opot.md): k = headend + NF nodes + verifier, one profile
// per slot, and gives each node only its own parameters (NodeParams,
// binary), so no node holds another's share or a mask it does not use.
// Validate has made the nodes distinct. The randomness comes from
// c.keys (crypto/rand in Compile): a compile with OPoT is not
// deterministic, and its digests change with every run.
func (c *compiler) opot() error {
	cfgs := map[string]*state.OPoTConfig{}
	var order []string
	inProxy := map[string]bool{} // nodes whose proxies do a transit
	for i := range c.s.Chains {
		ch := &c.s.Chains[i]
		if !ch.OPoT {
			continue
		}
		where := fmt.Sprintf("compile chains[%d] %s: opot", i, ch.Name)
		type member struct {
			node, nf string
			sid      netip.Addr
		}
		eg, ok := c.sids.Egress[ch.Name]
		if !ok {
			return fmt.Errorf("%s: %w: no egress SID", where, ErrUnroutable)
		}
		last := eg.Addr()
		members := []member{{node: ch.Ingress}}
		for _, name := range ch.NFs {
			nf := c.s.NF(name)
			p, ok := c.sids.NF[name]
			if nf == nil || !ok {
				return fmt.Errorf("%s: %w: NF %q unknown", where, ErrUnroutable, name)
			}
			seg := p.Addr()
			if arg, ok := ch.Args[name]; ok {
				seg = c.s.SIDFormat.WithArgs(seg, arg)
			}
			members = append(members, member{node: nf.Node, nf: name, sid: seg})
		}
		members = append(members, member{node: ch.Egress, sid: last})
		if ch.Compression == spec.CompressionNextCSID {
			// Each member sees its C-SID active in the container (the
			// DA), and the SRH's segment 0 is the last container.
			f := c.s.SIDFormat.CSID
			if f == nil {
				return fmt.Errorf("%s: %w: compression without sid_format.csid", where, ErrUnsupported)
			}
			segs := make([]netip.Addr, 0, len(members)-1)
			for _, m := range members[1:] {
				segs = append(segs, m.sid)
			}
			das, packed, err := CSIDArrivals(segs, f.BlockBits, f.NodeFunctionBits)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			for j := range das {
				members[j+1].sid = das[j]
			}
			last = packed[len(packed)-1]
		}
		// After the encap the packet's destination is the first segment.
		members[0].sid = members[1].sid
		for j, m := range members {
			role := state.OPoTTransit
			switch j {
			case 0:
				role = state.OPoTHeadend
			case len(members) - 1:
				role = state.OPoTVerifier
			}
			cfg := cfgs[m.node]
			if cfg == nil {
				cfg = &state.OPoTConfig{}
				cfgs[m.node] = cfg
				order = append(order, m.node)
			}
			transit := role == state.OPoTTransit && m.nf != ""
			proxy := transit && proxyTransit.serves(c.nodes[m.node], m.nf, m.sid)
			if proxy {
				inProxy[m.node] = true
			}
			oc := state.OPoTChain{
				Name: ch.Name, Profile: uint32(i + 1), Role: role, Hop: j, K: len(members), SID: m.sid, Last: last,
				InEnd: proxy || (transit && endTransit.serves(c.nodes[m.node], m.nf, m.sid)),
			}
			if role == state.OPoTVerifier {
				// The egress SID's route decapsulates on LOC+FUNCT, any
				// ARGS: the verifier takes every packet to that prefix.
				oc.SIDBits = eg.Bits()
			}
			cfg.Chains = append(cfg.Chains, oc)
		}
		for slot := range OPoTSlots {
			p, err := opot.GenerateFrom(c.keys, len(members))
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			for j, m := range members {
				sn := c.nodes[m.node]
				if sn == nil {
					return fmt.Errorf("%s: %w: node %q unknown", where, ErrUnroutable, m.node)
				}
				params, err := p.Node(j)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				b, err := params.MarshalBinary()
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				sn.Secrets = append(sn.Secrets, state.Secret{Name: OPoTSecretName(ch.Name, i+1, slot), NF: m.nf, Value: b})
			}
		}
	}
	// One program per node taking part: every interface runs the stages
	// of its roles (the packet may arrive or leave on any of them), but
	// for the transits srchain's End or SR proxy program does itself.
	for _, name := range order {
		sn, cfg := c.nodes[name], cfgs[name]
		ifs := ifNames(sn)
		for _, ch := range cfg.Chains {
			switch {
			case ch.Role == state.OPoTHeadend:
				cfg.Egress = ifs
			case !ch.InEnd:
				cfg.Ingress = ifs
			}
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("compile opot program of %s: %w", name, err)
		}
		// Before every proxy program of a node whose proxies do a
		// transit: the node's one loaded proxy, which each proxy NF's
		// apply loads, reads its pinned maps (the kinds added their
		// programs earlier; the End comes after it anyway).
		at := len(sn.Programs)
		if inProxy[name] {
			if i := slices.IndexFunc(sn.Programs, func(p state.Program) bool { return isProxyNF(sn, p.NF) }); i >= 0 {
				at = i
			}
		}
		sn.Programs = slices.Insert(sn.Programs, at, state.Program{Kind: state.ProgramOPoT, Interfaces: ifs, Config: b})
	}
	return nil
}

// An OPoT transit is done by the program serving its SID, with no stage
// in front of it, when that program is srchain's eBPF End (End, End.X;
// bpf/lib/end_opot.h, docs/opot.md "Transit in the End") or an SR proxy
// that carries the proof across its NF (End.AD, End.AD.flow; it updates
// the TLV it keeps while the packet is at the NF, bpf/lib/proxy.h
// proxy_opot_hop, "Transit in the proxy"). End.AD is an End behaviour
// too, and the chain's entry is marked the same way (InEnd). Not the
// kernel's End, nor End.AM, which sends the TLV through the NF in the
// packet and keeps the stage.
var (
	endTransit   = transitBy{state.EBPF, []state.Behavior{state.End, state.EndX}}
	proxyTransit = transitBy{state.ProgramDatapath, []state.Behavior{state.EndAD, state.EndADFlow}}
)

// transitBy names the SIDs of one program doing transits.
type transitBy struct {
	datapath  state.Datapath
	behaviors []state.Behavior
}

// serves reports whether such a SID of node sn, fronting NF nf (any NF
// when nf is ""), contains da, the DA a packet of the chain arrives with.
func (t transitBy) serves(sn *state.Node, nf string, da netip.Addr) bool {
	if sn == nil {
		return false
	}
	return slices.ContainsFunc(sn.SIDs, func(s state.LocalSID) bool {
		return (nf == "" || s.NF == nf) && s.Datapath == t.datapath && slices.Contains(t.behaviors, s.Behavior) &&
			s.SID.Contains(da)
	})
}

// isProxyNF reports whether nf's SID on node sn is an SR proxy's.
func isProxyNF(sn *state.Node, nf string) bool {
	return nf != "" && slices.ContainsFunc(sn.SIDs, func(s state.LocalSID) bool { return s.NF == nf && s.Behavior.IsProxy() })
}

// opotInEnd reports whether node sn's OPoT program has a transit entry
// done in the End program (the End then loads the OPoT maps): marked
// InEnd, on a SID of the node's eBPF End, not a proxy's.
func opotInEnd(sn *state.Node) bool {
	byEnd := func(c state.OPoTChain) bool { return c.InEnd && endTransit.serves(sn, "", c.SID) }
	for _, p := range sn.Programs {
		if p.Kind != state.ProgramOPoT {
			continue
		}
		var cfg state.OPoTConfig
		if json.Unmarshal(p.Config, &cfg) == nil && slices.ContainsFunc(cfg.Chains, byEnd) {
			return true
		}
	}
	return false
}

// CSIDArrivals is, for segs packed by PackCSIDs, the destination each
// segment's node sees when its C-SID is the active one (the locator
// block, then that C-SID and the rest of its container, shifted left by
// the NEXT-C-SID Ends before it, RFC 9800 section 4.1.1), and the
// containers themselves.
func CSIDArrivals(segs []netip.Addr, blockBits, nfBits int) (das, packed []netip.Addr, err error) {
	if packed, err = PackCSIDs(segs, blockBits, nfBits); err != nil {
		return nil, nil, err
	}
	per := (128 - blockBits) / nfBits
	lb, nb := blockBits/8, nfBits/8
	for t := range segs {
		c := packed[t/per].As16()
		var da [16]byte
		copy(da[:lb], c[:lb])
		copy(da[lb:], c[lb+(t%per)*nb:])
		das = append(das, netip.AddrFrom16(da))
	}
	return das, packed, nil
}

// keysOrDefault is r, or crypto/rand when r is nil.
func keysOrDefault(r io.Reader) io.Reader {
	if r == nil {
		return cryptorand.Reader
	}
	return r
}

// KeepOPoTKeys gives net, a fresh compile, the OPoT profiles that prev
// (the state a lab or node already runs), and the slot its headend
// starts packets with, for every chain whose
// proof did not change: the same nodes at the same hops in the same
// roles (the chain's name, NF names, SIDs and profile number may change:
// the keys do not depend on them). Re-applying a spec then changes no
// key, so no packet in flight fails its proof and the nodes' digests
// stay equal (the nodes are sealed again). A chain whose members
// changed keeps the fresh profiles of net: all its nodes change keys
// together. It returns the names of the chains whose keys were kept.
// prev nil: nothing to keep.
func KeepOPoTKeys(net, prev *state.Network) ([]string, error) {
	if prev == nil {
		return nil, nil
	}
	cur, err := opotMembers(net)
	if err != nil {
		return nil, err
	}
	old, err := opotMembers(prev)
	if err != nil {
		return nil, err
	}
	prevNodes := map[string]*state.Node{}
	for i := range prev.Nodes {
		prevNodes[prev.Nodes[i].Name] = &prev.Nodes[i]
	}
	nodes := map[string]*state.Node{}
	for i := range net.Nodes {
		nodes[net.Nodes[i].Name] = &net.Nodes[i]
	}
	var kept []string
	touched := map[string]bool{}
	for _, name := range sortedKeys(cur) {
		m, o := cur[name], old[name]
		if o == nil || !sameMembers(m.hops, o.hops) {
			continue
		}
		// Every member node must hold both slots in prev, or nothing is
		// taken (a half-kept profile would not prove anything).
		type repl struct {
			node *state.Node
			idx  int
			val  []byte
		}
		var todo []repl
		complete := true
		for _, h := range m.hops {
			n, pn := nodes[h.node], prevNodes[h.node]
			if n == nil || pn == nil {
				complete = false
				break
			}
			for slot := range OPoTSlots {
				i := secretIndex(n, OPoTSecretName(name, int(m.profile), slot))
				j := secretIndex(pn, OPoTSecretName(name, int(o.profile), slot))
				if i < 0 || j < 0 || len(pn.Secrets[j].Value) == 0 {
					complete = false
					break
				}
				todo = append(todo, repl{node: n, idx: i, val: pn.Secrets[j].Value})
			}
		}
		if !complete {
			continue
		}
		for _, r := range todo {
			r.node.Secrets[r.idx].Value = slices.Clone(r.val)
			touched[r.node.Name] = true
		}
		// And the slot the headend starts packets with: after a rotation
		// (RotateOPoTKeys) the other slot holds the retired keys.
		head := m.hops[0].node
		slot, err := opotHeadendSlot(prevNodes[head], name)
		if err != nil {
			return nil, fmt.Errorf("keep opot keys: %w", err)
		}
		if err := SwitchOPoTSlots(net, []OPoTRotation{{Chain: name, Slot: slot, Headend: head}}); err != nil {
			return nil, fmt.Errorf("keep opot keys: %w", err)
		}
		kept = append(kept, name)
	}
	for _, name := range sortedKeys(touched) {
		if err := nodes[name].Seal(); err != nil {
			return nil, fmt.Errorf("keep opot keys: %w", err)
		}
	}
	return kept, nil
}

// opotHop is one node's place in a chain's proof.
type opotHop struct {
	node, role string
	hop, k     int
}

type opotChainMembers struct {
	profile uint32
	hops    []opotHop // by hop
}

// opotMembers reads, from the nodes' OPoT programs, who takes part in
// each chain's proof.
func opotMembers(net *state.Network) (map[string]*opotChainMembers, error) {
	out := map[string]*opotChainMembers{}
	for _, n := range net.Nodes {
		for _, p := range n.Programs {
			if p.Kind != state.ProgramOPoT {
				continue
			}
			var cfg state.OPoTConfig
			if err := json.Unmarshal(p.Config, &cfg); err != nil {
				return nil, fmt.Errorf("decode opot program of %s: %w", n.Name, err)
			}
			for _, ch := range cfg.Chains {
				m := out[ch.Name]
				if m == nil {
					m = &opotChainMembers{profile: ch.Profile}
					out[ch.Name] = m
				}
				m.hops = append(m.hops, opotHop{node: n.Name, role: ch.Role, hop: ch.Hop, k: ch.K})
			}
		}
	}
	for _, m := range out {
		slices.SortFunc(m.hops, func(a, b opotHop) int { return cmp.Compare(a.hop, b.hop) })
	}
	return out, nil
}

func sameMembers(a, b []opotHop) bool {
	return slices.Equal(a, b) && properHops(a)
}

// properHops reports whether hops are one proof's: hops 0..k-1, each
// once, every node agreeing on k.
func properHops(hops []opotHop) bool {
	if len(hops) == 0 {
		return false
	}
	for i, h := range hops {
		if h.hop != i || h.k != len(hops) {
			return false
		}
	}
	return true
}

func secretIndex(n *state.Node, name string) int {
	return slices.IndexFunc(n.Secrets, func(s state.Secret) bool { return s.Name == name })
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// opotWirePackets keeps GSO packets away from the nodes that write a
// per-packet OPoT proof at tc: a chain's headend (the tc stage behind
// the kernel's encap, or the eBPF ingress), and an SR proxy that puts
// the proof it kept back on a packet from its NF. A GSO packet leaves
// as many packets copying one header, so one proof would reach the
// verifier once per segment, every copy after the first a replay; those
// nodes drop GSO packets instead (drop reason opot-gso; docs/opot.md
// "GSO"). Their peers segment before they send (state.Interface.NoGSO:
// the host's TCP, a forwarded GRO packet), and the node does not
// aggregate what it receives (NoGRO, unless an XDP peer needs the
// interface's GRO for NAPI: then GRO stays on and such packets are
// dropped, counted).
func (c *compiler) opotWirePackets() {
	for _, sn := range c.nodes {
		headend := false
		var proofsBack []string // IFACE-INs of proxies carrying proofs
		for _, p := range sn.Programs {
			switch p.Kind {
			case state.ProgramOPoT:
				var cfg state.OPoTConfig
				if json.Unmarshal(p.Config, &cfg) == nil &&
					slices.ContainsFunc(cfg.Chains, func(ch state.OPoTChain) bool { return ch.Role == state.OPoTHeadend }) {
					headend = true
				}
			default:
				var px struct {
					IfaceIn string `json:"iface_in"`
					OPoT    bool   `json:"opot"`
				}
				if isProxyNF(sn, p.NF) && json.Unmarshal(p.Config, &px) == nil && px.OPoT {
					proofsBack = append(proofsBack, px.IfaceIn)
				}
			}
		}
		for k := range sn.Interfaces {
			i := &sn.Interfaces[k]
			if !headend && !slices.Contains(proofsBack, i.Name) {
				continue
			}
			i.NoGRO = !i.GRO
			if peer := c.endpoint(i.Peer); peer != nil {
				peer.NoGSO = true
			}
		}
	}
}
