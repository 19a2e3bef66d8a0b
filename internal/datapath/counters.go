package datapath

import (
	"github.com/srchain/srchain/internal/bpfrt"
)

// ErrBadMap is returned when a map does not have the layout a reader
// expects (bpfrt.ErrBadMap).
var ErrBadMap = bpfrt.ErrBadMap

// SIDCount is what one SID's counter slot accumulated (all CPUs).
type SIDCount = bpfrt.PacketCount
