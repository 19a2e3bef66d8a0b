package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/drop"
)

// ErrBadMap is returned when a map does not have the layout a reader expects.
var ErrBadMap = errors.New("unexpected map layout")

// ReadDropCounts sums the per-CPU drop counter map every srchain program
// declares through bpf/lib/counters.h (drop_counters: per-CPU array,
// key = drop reason, value = __u64). Any loader can use it.
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

// SIDCount is what one SID's counter slot accumulated (all CPUs).
type SIDCount struct {
	Packets uint64
	Bytes   uint64
}

// sidCounter mirrors struct sid_counter in bpf/lib/counters.h.
type sidCounter struct {
	Packets uint64
	Bytes   uint64
}

// readSIDCounter sums one slot of a sid_counters map.
func readSIDCounter(m *ebpf.Map, slot uint32) (SIDCount, error) {
	var vals []sidCounter
	if err := m.Lookup(slot, &vals); err != nil {
		return SIDCount{}, fmt.Errorf("look up sid counter %d: %w", slot, err)
	}
	var c SIDCount
	for _, v := range vals {
		c.Packets += v.Packets
		c.Bytes += v.Bytes
	}
	return c, nil
}

// resetSIDCounter zeroes one slot on every CPU (a reused slot must not
// inherit the previous SID's counts).
func resetSIDCounter(m *ebpf.Map, slot uint32) error {
	zeros := make([]sidCounter, ebpf.MustPossibleCPU())
	if err := m.Update(slot, zeros, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("reset sid counter %d: %w", slot, err)
	}
	return nil
}

// FIB slots beyond the BPF_FIB_LKUP_RET_* codes (bpf/lib/fib.h).
const (
	fibSlotRetMax        = 16
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
// reason, without a FIB lookup).
func ReadFIBCounts(m *ebpf.Map) (map[string]uint64, error) {
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
			name = "stack-forward" // EndOptions.StackForward
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
