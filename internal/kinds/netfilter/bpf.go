package netfilter

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"os"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
)

// Mark layout (bpf/lib/anf.h, docs/netfilter.md "Mark").
const (
	MarkFlag      = 0x80000000 // inner packet of End.AN.NF: routed to the restore device
	MarkSlotShift = 16
	MarkSlotBits  = 13
	// MarkSrchain are the bits srchain owns; rules may change only the others.
	MarkSrchain = 0xffff0000
)

// Slots of anf_stats.
const (
	StatStashed   = 0
	StatRestored  = 1
	StatUnclaimed = 2
	StatToKernel  = 3
	// StatFragKept counts restores of a non-last fragment, which leave
	// the slot live for the next piece of the datagram (ANF_STAT_FRAG_KEPT).
	StatFragKept = 5
)

// Objects are the loaded End.AN.NF programs and maps.
type Objects struct {
	anfProgObjects
}

// Load loads bpf/anf.c with the stash partitioned over the possible CPUs;
// peer is the ifindex of the restore device's peer (srchain_anf_fwd), 0
// for none.
func Load(peer int) (*Objects, error) { return load(peer, nil) }

// LoadPinned is Load over the maps a driver pinned under pin (pinMaps):
// the running SID table, stash and counters are the new programs'. A map
// missing, or pinned by a build with another layout, fails it
// (ErrNotPinned when anf_sids is not there at all).
func LoadPinned(peer int, pin string) (*Objects, error) {
	repl := map[string]*ebpf.Map{}
	defer bpfrt.CloseMaps(repl)
	for _, name := range pinnedMaps {
		m, err := ebpf.LoadPinnedMap(pin+"/"+name, nil)
		if errors.Is(err, os.ErrNotExist) && name == "anf_sids" {
			return nil, fmt.Errorf("open pinned %s: %w", name, ErrNotPinned)
		}
		if err != nil {
			return nil, fmt.Errorf("open pinned %s: %w", name, err)
		}
		repl[name] = m
	}
	return load(peer, repl)
}

// ErrNotPinned: no End.AN.NF maps are pinned there.
var ErrNotPinned = errors.New("not pinned")

// pinnedMaps are the maps pinMaps pins (names as in the C source).
var pinnedMaps = []string{"anf_sids", "anf_stash", "anf_stats", "drop_counters", "fib_counters", "sid_counters"}

func load(peer int, repl map[string]*ebpf.Map) (*Objects, error) {
	spec, err := loadAnfProg()
	if err != nil {
		return nil, err
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count cpus: %w", err)
	}
	cpuBits := uint32(0)
	if ncpu > 1 {
		cpuBits = uint32(bits.Len(uint(ncpu - 1)))
	}
	if cpuBits > 7 {
		cpuBits = 7
	}
	if err := spec.Variables["cfg_cpu_bits"].Set(cpuBits); err != nil {
		return nil, fmt.Errorf("set cfg_cpu_bits: %w", err)
	}
	if err := spec.Variables["cfg_peer_ifindex"].Set(uint32(peer)); err != nil {
		return nil, fmt.Errorf("set cfg_peer_ifindex: %w", err)
	}
	for name, m := range repl {
		if err := spec.Maps[name].Compatible(m); err != nil {
			return nil, fmt.Errorf("reuse pinned %s: %w", name, err)
		}
	}
	var o Objects
	if err := spec.LoadAndAssign(&o.anfProgObjects, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, bpfrt.WrapLoad("anf", err)
	}
	return &o, nil
}

// SIDKey is the anf_sids key of a SID prefix.
func SIDKey(p netip.Prefix) anfProgAnfSidKey {
	var k anfProgAnfSidKey
	k.Prefixlen = uint32(p.Bits())
	k.Addr.In6U.U6Addr8 = p.Masked().Addr().As16()
	return k
}

// SetSID serves p: packets to it get End.AN.NF with args_bits into the mark.
func (o *Objects) SetSID(p netip.Prefix, argsBits int) error {
	v := anfProgAnfSid{ArgsBits: uint32(argsBits)}
	if err := o.AnfSids.Put(SIDKey(p), v); err != nil {
		return fmt.Errorf("put sid %s: %w", p, err)
	}
	return nil
}

// pinMaps pins every map of pinnedMaps under dir.
func (o *Objects) pinMaps(dir string) error {
	byName := map[string]*ebpf.Map{
		"anf_sids": o.AnfSids, "anf_stash": o.AnfStash, "anf_stats": o.AnfStats,
		"drop_counters": o.DropCounters, "fib_counters": o.FibCounters, "sid_counters": o.SidCounters,
	}
	for _, name := range pinnedMaps {
		m := byName[name]
		path := dir + "/" + name
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale pin %s: %w", path, err)
		}
		if err := m.Pin(path); err != nil {
			return fmt.Errorf("pin %s: %w", name, err)
		}
	}
	return nil
}
