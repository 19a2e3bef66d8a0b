package proxy

import (
	"errors"
	"net/netip"
	"time"

	"github.com/srchain/srchain/internal/state"
)

// dpSID is one proxy SID as the datapath (internal/proxydp) takes it.
type dpSID struct {
	Addr                  netip.Addr
	Behavior              state.Behavior
	OutIfindex, InIfindex int
	NFNext6, NFNext4      netip.Addr
	Inner                 uint8 // 41 (IPv6) or 4 (IPv4)
	Source                netip.Addr
	Segments              []netip.Addr
	FlowTimeout           time.Duration
}

// dataplane is what the driver needs of a loaded proxy program: its
// SID table, its tcx attachments (nfSide: the interface back from the
// NF, IFACE-IN) and its counters. internal/proxydp provides it
// (dataplane_proxydp.go adapts it).
type dataplane interface {
	SetSIDs(sids []dpSID) error
	Attach(ifindex int, nfSide bool, linkPin string) error
	Counters() (map[string]uint64, error)
	Close() error
}

// ErrNoDatapath: this build has no proxy datapath to load.
var ErrNoDatapath = errors.New("proxy datapath not built in")

// loadDP loads the proxy program with its maps pinned at pinPath (flow
// cache of flowCap entries); openDP opens what an earlier load pinned.
// Set by the datapath adapter; nil: ErrNoDatapath.
var (
	loadDP func(pinPath string, flowCap int) (dataplane, error)
	openDP func(pinPath string) (dataplane, error)
)

// ProgName is the kernel name of the proxy's tcx programs (prefix).
const ProgName = "srchain_proxy"
