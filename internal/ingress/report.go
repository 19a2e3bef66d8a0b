package ingress

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Per-flow setup (bpf/lib/ingress.h, internal/flowsetup): the ingress
// copies the first packet of a pool chain's new flow into ing_reports.

// Report is one ing_flow_report (bpf/lib/ingress.h).
type Report struct {
	KTime   uint64
	Key     [44]byte // struct ing_flow_key, as the map wants it
	Pool    uint32
	Chain   uint32
	Ifindex uint32
	Len     uint32
	Data    []byte // Caplen bytes of the packet, from its IP header
}

// Layout of struct ing_flow_report (bpf/lib/ingress.h).
const (
	reportKeyOff   = 8
	reportKeyLen   = 44
	reportPoolOff  = reportKeyOff + 32
	reportChainOff = reportKeyOff + reportKeyLen
	reportDataOff  = reportChainOff + 16
)

// ErrBadReport is a record that is not an ing_flow_report.
var ErrBadReport = errors.New("bad flow report")

// ParseReport decodes one ring buffer record.
func ParseReport(b []byte) (Report, error) {
	if len(b) < reportDataOff {
		return Report{}, fmt.Errorf("parse report: %d bytes: %w", len(b), ErrBadReport)
	}
	le := binary.LittleEndian
	r := Report{KTime: le.Uint64(b), Pool: le.Uint32(b[reportPoolOff:]), Chain: le.Uint32(b[reportChainOff:]),
		Ifindex: le.Uint32(b[reportChainOff+4:]), Len: le.Uint32(b[reportChainOff+8:])}
	copy(r.Key[:], b[reportKeyOff:reportKeyOff+reportKeyLen])
	caplen := int(le.Uint32(b[reportChainOff+12:]))
	if caplen > len(b)-reportDataOff {
		return Report{}, fmt.Errorf("parse report: caplen %d: %w", caplen, ErrBadReport)
	}
	r.Data = b[reportDataOff : reportDataOff+caplen]
	return r, nil
}
