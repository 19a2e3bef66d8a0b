package bpfrt

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/drop"
)

// ErrBadMap is returned when a map does not have the layout a reader
// expects.
var ErrBadMap = errors.New("unexpected map layout")

// ReadDropCounts sums the per-CPU drop counter map every srchain program
// declares through bpf/lib/counters.h (drop_counters: per-CPU array,
// key = drop reason, value = __u64) over CPUs.
func ReadDropCounts(m *ebpf.Map) (drop.Counts, error) {
	var c drop.Counts
	if m == nil || m.Type() != ebpf.PerCPUArray || m.ValueSize() != 8 {
		return c, fmt.Errorf("read drop counters: %w", ErrBadMap)
	}
	n := min(uint32(drop.Max), m.MaxEntries())
	for r := uint32(0); r < n; r++ {
		v, err := SumPerCPU(m, r)
		if err != nil {
			return c, fmt.Errorf("read drop counters: %w", err)
		}
		c[r] = v
	}
	return c, nil
}

// SumPerCPU returns the sum over CPUs of the __u64 at key in a per-CPU
// array map.
func SumPerCPU(m *ebpf.Map, key uint32) (uint64, error) {
	var vals []uint64
	if err := m.Lookup(key, &vals); err != nil {
		return 0, fmt.Errorf("look up key %d in %s: %w", key, m.String(), err)
	}
	var sum uint64
	for _, v := range vals {
		sum += v
	}
	return sum, nil
}

// PacketCount is what a {packets, bytes} per-CPU counter accumulated over
// all CPUs (struct sid_counter of bpf/lib/counters.h, struct fw_count of
// bpf/lib/fw_maps.h).
type PacketCount struct {
	Packets uint64
	Bytes   uint64
}

// ReadPacketCount sums slot of a per-CPU array of {__u64 packets, bytes}.
func ReadPacketCount(m *ebpf.Map, slot uint32) (PacketCount, error) {
	if m == nil || m.Type() != ebpf.PerCPUArray || m.ValueSize() != 16 {
		return PacketCount{}, fmt.Errorf("read packet counter %d: %w", slot, ErrBadMap)
	}
	var vals []PacketCount
	if err := m.Lookup(slot, &vals); err != nil {
		return PacketCount{}, fmt.Errorf("look up counter %d in %s: %w", slot, m.String(), err)
	}
	var c PacketCount
	for _, v := range vals {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
	}
	return c, nil
}

// ResetPacketCount zeroes slot on every CPU (a reused slot must not
// inherit the previous owner's counts).
func ResetPacketCount(m *ebpf.Map, slot uint32) error {
	zeros := make([]PacketCount, ebpf.MustPossibleCPU())
	if err := m.Update(slot, zeros, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reset counter %d: %w", slot, err)
	}
	return nil
}

// FIB slots beyond the BPF_FIB_LKUP_RET_* codes (bpf/lib/fib.h FIB_SLOT_*).
const (
	fibSlotRedirectNeigh = 16
	fibSlotStackForward  = 17
	fibSlotHopLimit      = 18
	fibSlotMTU           = 19
	fibSlotMax           = 32
)

var fibRetNames = [...]string{
	"success", "blackhole", "unreachable", "prohibit", "not-forwarded",
	"forwarding-disabled", "unsupported-lwt", "no-neighbour", "frag-needed",
	"no-src-addr",
}

// ReadFIBCounts sums a fib_counters map (bpf/lib/fib.h) into counts keyed
// by outcome name; zero entries are left out. Besides the
// BPF_FIB_LKUP_RET_* names: "redirect-neigh" (End.X forwarded),
// "stack-forward", "hop-limit" and "mtu" (handed to the stack for that
// reason, without a FIB lookup), "helper-error".
func ReadFIBCounts(m *ebpf.Map) (map[string]uint64, error) {
	if m == nil || m.Type() != ebpf.PerCPUArray || m.ValueSize() != 8 {
		return nil, fmt.Errorf("read fib counters: %w", ErrBadMap)
	}
	out := make(map[string]uint64)
	for slot := uint32(0); slot < min(fibSlotMax, m.MaxEntries()); slot++ {
		v, err := SumPerCPU(m, slot)
		if err != nil {
			return nil, fmt.Errorf("read fib counters: %w", err)
		}
		if v == 0 {
			continue
		}
		var name string
		switch {
		case slot < uint32(len(fibRetNames)):
			name = fibRetNames[slot]
		case slot == fibSlotRedirectNeigh:
			name = "redirect-neigh"
		case slot == fibSlotStackForward:
			name = "stack-forward"
		case slot == fibSlotHopLimit:
			name = "hop-limit" // to the stack for ICMPv6 Time Exceeded
		case slot == fibSlotMTU:
			name = "mtu" // End.X too big for the adjacency: to the stack
		case slot == fibSlotMax-1:
			name = "helper-error"
		default:
			name = fmt.Sprintf("ret-%d", slot)
		}
		out[name] += v
	}
	return out, nil
}
