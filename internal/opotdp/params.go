package opotdp

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/opot"
)

// Map value and key types, generated from bpf/lib/opot*.h by bpf2go.
type (
	Params   = opotProgOpotParams
	Key      = opot.SlotKey
	ChainKey = opotProgOpotChainKey
	Chain    = opotProgOpotChain
	Window   = opotProgOpotWindow
	Objects  = opotProgObjects
)

// FromNode converts node parameters to the opot_node_params value.
func FromNode(n opot.NodeParams) Params {
	return Params{
		Role:   uint32(n.Role),
		Share:  n.Share,
		Lpc:    n.LPC,
		DecR:   n.Dec.R,
		DecCml: n.Dec.CML,
		EncR:   n.Enc.R,
		EncCml: n.Enc.CML,
		Secret: n.Secret,
	}
}

// LoadSpec returns the programs' collection spec.
func LoadSpec() (*ebpf.CollectionSpec, error) { return loadOpotProg() }

// Load loads the programs and maps, pinned nowhere, with repl in place
// of maps of the same names (nil: none): for tests and benchmarks, which
// fill them with PutChain. The caller closes them.
func Load(repl map[string]*ebpf.Map) (*Objects, error) {
	spec, err := LoadSpec()
	if err != nil {
		return nil, fmt.Errorf("load opot spec: %w", err)
	}
	o := &Objects{}
	if err := spec.LoadAndAssign(o, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, fmt.Errorf("load opot programs: %w", err)
	}
	return o, nil
}

// PutChain installs, in loaded (unpinned) objects o, node n's entry of
// chain id (sid: the DA the entry applies to; last: the chain's last
// SID), its parameters of slot, and the headend's counter or the
// verifier's window, as the driver would: for tests and benchmarks
// that run the programs without the driver.
func PutChain(o *Objects, id uint32, slot uint8, n opot.NodeParams, sid, last netip.Addr) error {
	ck := ChainKey{Last: last.As16()}
	if err := o.OpotChains.Put(&ck, &Chain{Profile: id, Slot: uint32(slot), Role: uint32(n.Role), Idx: id, Sid: sid.As16()}); err != nil {
		return fmt.Errorf("set opot chain: %w", err)
	}
	if err := TouchChains(o.OpotChainGen); err != nil {
		return err
	}
	k := Key{Index: id, Slot: uint32(slot)}
	v := FromNode(n)
	if err := o.OpotNodeParams.Put(k.Array(), &v); err != nil {
		return fmt.Errorf("set opot params: %w", err)
	}
	switch n.Role {
	case opot.RoleHeadend:
		if err := o.OpotSeqs.Put(k.Array(), uint64(0)); err != nil {
			return fmt.Errorf("set opot sequence: %w", err)
		}
	case opot.RoleVerifier:
		if err := o.OpotWindows.Put(k.Array(), &Window{}); err != nil {
			return fmt.Errorf("set opot window: %w", err)
		}
		// The verifier takes the packets to its SID (the DA): here the
		// SID alone; PutEgress gives it the route's LOC+FUNCT.
		if err := PutEgress(o, netip.PrefixFrom(sid, 128), last); err != nil {
			return err
		}
	}
	return nil
}

// PutEgress makes the verifier of the chain ending in last take every
// packet whose DA falls in p (opot_egress), as the driver does with a
// verifier entry's EgressPrefix: for tests and benchmarks.
func PutEgress(o *Objects, p netip.Prefix, last netip.Addr) error {
	k, v := egressKeyOf(p.Masked()), ChainKey{Last: last.As16()}
	if err := o.OpotEgress.Put(&k, &v); err != nil {
		return fmt.Errorf("set opot egress prefix: %w", err)
	}
	return nil
}

// ChainInEnd is Chain.Flags of a transit entry whose SID an srchain
// End.* program serves: the eBPF End (bpf/lib/end_opot.h) or an End.AD
// / End.AD.flow proxy (bpf/lib/proxy.h proxy_opot_hop) updates the
// proof, the transit stages leave it alone (OPOT_CHAIN_IN_END).
const ChainInEnd = 1

// SetInEnd marks the entry of the chain ending in last, in loaded objects
// o, as ChainInEnd, as the driver does for state.OPoTChain.InEnd: for
// tests and benchmarks.
func SetInEnd(o *Objects, last netip.Addr) error {
	ck := ChainKey{Last: last.As16()}
	var ch Chain
	if err := o.OpotChains.Lookup(&ck, &ch); err != nil {
		return fmt.Errorf("read opot chain: %w", err)
	}
	ch.Flags |= ChainInEnd
	if err := o.OpotChains.Put(&ck, &ch); err != nil {
		return fmt.Errorf("set opot chain: %w", err)
	}
	return TouchChains(o.OpotChainGen)
}

// EndMapsOf is EndMaps for loaded objects o (not closed separately:
// they are o's). Its keys name the maps srchain's End programs share to
// update the proof of the transit entries marked ChainInEnd: the chains,
// their generation (so the End's cached lookups see every change) and
// the node's parameters.
func EndMapsOf(o *Objects) map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"opot_chains": o.OpotChains, "opot_chain_gen": o.OpotChainGen, "opot_node_params": o.OpotNodeParams,
	}
}

// HeadendMapsOf is HeadendMaps for loaded objects o (not closed
// separately: they are o's). Its keys name the maps srchain's eBPF
// ingress shares to write a chain's TLV as it encapsulates
// (bpf/lib/ingress.h ING_EXT_OPOT): the chain entry, the headend's
// parameters and sequence counters, and the per-chain verdict counters.
func HeadendMapsOf(o *Objects) map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"opot_chains": o.OpotChains, "opot_node_params": o.OpotNodeParams,
		"opot_seqs": o.OpotSeqs, "opot_stats": o.OpotStats,
	}
}
