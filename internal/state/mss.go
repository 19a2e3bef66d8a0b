package state

import "net/netip"

// ProgramMSS is the node-wide TCP MSS clamp of the chains crossing a
// node (internal/mss): an nftables table, no interfaces.
const ProgramMSS = "mss"

// MSSConfig is the clamp of one node (Program.Config of kind
// ProgramMSS): one MSSClamp per chain crossing it, in chain order.
type MSSConfig struct {
	Clamps []MSSClamp `json:"clamps"`
}

// MSSClamp lowers to MSS the MSS option of TCP SYNs from Src to Dst
// (ports SPort, DPort when set; empty Src: any) and of those going the
// other way.
type MSSClamp struct {
	Chain string         `json:"chain"`
	Dst   []netip.Prefix `json:"dst"`
	Src   []netip.Prefix `json:"src,omitempty"`
	SPort PortRange      `json:"sport,omitzero"`
	DPort PortRange      `json:"dport,omitzero"`
	MSS   int            `json:"mss"`
}
