package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
)

// EndCounters are the counters of a pinned End datapath.
type EndCounters struct {
	Drops drop.Counts
	// FIB as FIBCounts reports it (zero outcomes left out).
	FIB map[string]uint64
	// SIDs as SIDCounts reports it: every SID in the pinned SID map.
	SIDs map[netip.Addr]SIDCount
	// Pass as PassCounts reports it (zero reasons left out).
	Pass map[string]uint64
}

// passReasons names enum end_pass_reason (bpf/lib/end.h) by value; only
// append, in step with the C enum (TestPassReasonsMatchC).
var passReasons = []string{
	"none", "not-host", "ipv6-header", "trailing-bytes", "source", "hop-by-hop",
	"ext-order", "limits", "hmac", "hop-limit", "next-local", "next-special",
	"fib", "mtu", "pull",
}

// readPassCounts sums the per-CPU pass counters by reason name.
func readPassCounts(m *ebpf.Map) (map[string]uint64, error) {
	out := map[string]uint64{}
	for i := 1; i < len(passReasons); i++ {
		v, err := bpfrt.SumPerCPU(m, uint32(i))
		if err != nil {
			return nil, fmt.Errorf("read pass counters: %w", err)
		}
		if v != 0 {
			out[passReasons[i]] = v
		}
	}
	return out, nil
}

// ReadPinnedEndCounters reads the counters of the End datapath pinned at
// pin (an EndOptions.PinPath) through read-only map pins, without loading
// the program: LoadEnd runs the verifier (hundreds of ms) and may create
// missing pins, neither of which a Prometheus scrape should do.
func ReadPinnedEndCounters(pin string) (EndCounters, error) {
	var c EndCounters
	open := func(name string) (*ebpf.Map, error) {
		m, err := ebpf.LoadPinnedMap(filepath.Join(pin, name), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			return nil, fmt.Errorf("read end counters: open pinned map %s: %w", name, err)
		}
		return m, nil
	}
	maps := map[string]*ebpf.Map{}
	defer bpfrt.CloseMaps(maps)
	for _, name := range endSharedMaps {
		m, err := open(name)
		if err != nil {
			if name == endProgMapPassCounters && errors.Is(err, os.ErrNotExist) {
				// Pinned by an End from before issue 8; the next
				// LoadEnd on the pins adds it.
				continue
			}
			if name == endProgMapSidLens {
				continue // not a counter
			}
			return c, err
		}
		maps[name] = m
	}
	var err error
	if c.Drops, err = bpfrt.ReadDropCounts(maps[endProgMapDropCounters]); err != nil {
		return c, err
	}
	if c.FIB, err = bpfrt.ReadFIBCounts(maps[endProgMapFibCounters]); err != nil {
		return c, err
	}
	if m := maps[endProgMapPassCounters]; m != nil {
		if c.Pass, err = readPassCounts(m); err != nil {
			return c, err
		}
	}
	c.SIDs = map[netip.Addr]SIDCount{}
	var key [16]byte
	var val sidEntry
	it := maps[endProgMapSids].Iterate()
	for it.Next(&key, &val) {
		if val.Counter >= maxSIDs {
			continue
		}
		sid := netip.AddrFrom16(key)
		if c.SIDs[sid], err = bpfrt.ReadPacketCount(maps[endProgMapSidCounters], val.Counter); err != nil {
			return c, fmt.Errorf("read counters of sid %s: %w", sid, err)
		}
	}
	if err := it.Err(); err != nil {
		return c, fmt.Errorf("read pinned sids: %w", err)
	}
	return c, nil
}
