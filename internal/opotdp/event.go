package opotdp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/srchain/srchain/internal/drop"
)

// Event is one verifier drop from the opot_events ring (struct
// opot_event, bpf/lib/opot_dp.h: u32 profile, slot, reason, pad; u64 seq,
// host byte order).
type Event struct {
	Profile uint32
	Slot    uint8
	Reason  drop.Reason
	// Seq is the packet's sequence number when the proof held (replay,
	// stale), else 0.
	Seq uint64
}

// EventSize is the length of one ring record.
const EventSize = 24

// ErrEvent: a ring record of the wrong size or with an unknown reason.
var ErrEvent = errors.New("malformed opot event")

// ParseEvent decodes one ring record.
func ParseEvent(b []byte) (Event, error) {
	if len(b) < EventSize {
		return Event{}, fmt.Errorf("parse opot event: %d bytes: %w", len(b), ErrEvent)
	}
	le := binary.NativeEndian
	slot, reason := le.Uint32(b[4:]), le.Uint32(b[8:])
	if slot > 1 || reason >= uint32(drop.Max) {
		return Event{}, fmt.Errorf("parse opot event: slot %d reason %d: %w", slot, reason, ErrEvent)
	}
	return Event{Profile: le.Uint32(b), Slot: uint8(slot), Reason: drop.Reason(reason), Seq: le.Uint64(b[16:])}, nil
}
