package opotdp

import (
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
