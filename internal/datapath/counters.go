package datapath

import (
	"github.com/srchain/srchain/internal/bpfrt"
)

// ErrBadMap is returned when a map does not have the layout a reader
// expects (bpfrt.ErrBadMap).
var ErrBadMap = bpfrt.ErrBadMap

// SIDCount is what one SID's counter slot accumulated (all CPUs). Bytes
// are IP bytes (IPv6 header and payload, no Ethernet header), as the
// kernel's seg6local counters and ip6tables count them.
type SIDCount = bpfrt.PacketCount
