package state

// EndConfig is the typed configuration of a node's End program
// (Program.Config of kind ProgramEnd); absent means tc only.
type EndConfig struct {
	// XDP also attaches the End program's XDP twin in front of its tc
	// program (spec `datapath: xdp`).
	XDP bool `json:"xdp,omitempty"`
	// XDPFallback says why a node that asked for XDP runs its End at tc
	// only: an XDP End would forward packets before a stage that must see
	// them first (a firewall, End.AN.NF), docs/datapath.md "XDP from the
	// spec".
	XDPFallback string `json:"xdp_fallback,omitempty"`
}
