// Package flowsetup is per-flow setup on demand (seed 004 section IV,
// flow setup; docs/controller.md "Per-flow setup"): a chain may name a
// pool of NF instances; its eBPF ingress (bpf/ingress.c) steers a flow
// with an entry in ing_flows by that entry's variant, and hands the first
// packet of a flow without one to this loop through the ing_reports ring
// buffer, consuming it. The loop picks an instance (least loaded: fewest
// active flows; or a hash of the 5-tuple), installs the flow's entry, and
// sends the packet on itself, encapsulated with the chosen variant's
// segment list, through a raw socket in the node's namespace (an
// OpenFlow packet-out). Later packets of the flow stay on that instance
// at the ingress's full speed. An idle sweep removes entries of flows
// quiet for IdleTimeout, so "least loaded" counts live flows.
package flowsetup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/ingress"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/srv6"
	"github.com/srchain/srchain/internal/state"
)

// DefaultIdleTimeout is how long a flow keeps its entry without packets.
const DefaultIdleTimeout = 30 * time.Second

// Options configure Run for one ingress node.
type Options struct {
	NS *netns.NS
	// Config is the node's ingress program config (its pool chains).
	Config state.IngressConfig
	// TunSrc is the outer source of the packets the loop sends on (the
	// node's tunsrc, as the ingress program uses).
	TunSrc netip.Addr
	// IdleTimeout (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Observe, when set, is called for every report handled.
	Observe func(Setup)
	Log     *slog.Logger
}

// Setup is one handled report: the flow's first packet (or a packet that
// arrived before the flow's entry was in place).
type Setup struct {
	Chain   string
	NF      string // the instance chosen
	Variant int
	// New: the flow got its entry now (not a packet of a flow set up
	// a moment ago).
	New bool
	// Sent: the packet went on; false when it could not (truncated
	// copy, stale report).
	Sent bool
	// Latency from the packet's arrival at the ingress program to its
	// departure from the raw socket.
	Latency time.Duration
}

// flowValue is struct ing_flow.
type flowValue struct {
	Variant uint32
	Pad     uint32
	Last    uint64
}

// chainPool is one pool chain of the node.
type chainPool struct {
	chain state.IngressChain
	id    uint32
	live  []int // active flows per variant (least loaded)
}

// Loop is a running flow-setup loop.
type Loop struct {
	opts  Options
	flows *ebpf.Map
	rd    *ringbuf.Reader
	fd    int
	mu    sync.Mutex
	pools map[uint32]*chainPool // by pool id
	// recent are the flows installed in the last seconds: a packet of
	// the flow that was already in the ring when the entry went in is
	// sent the same way without a map lookup.
	recent map[[44]byte]installed
}

type installed struct {
	variant int
	at      uint64 // monotonic ns
}

// sweepBatch is how many flow entries one sweep system call reads.
const sweepBatch = 4096

// recentFor is how long a flow stays in Loop.recent.
const recentFor = 2 * time.Second

// Open opens the node's pinned ingress maps and a raw socket in its
// namespace. The ingress program must be applied.
func Open(opts Options) (*Loop, error) {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if !opts.TunSrc.Is6() {
		return nil, fmt.Errorf("open flow setup: tunsrc %v is not IPv6", opts.TunSrc)
	}
	l := &Loop{opts: opts, fd: -1, pools: map[uint32]*chainPool{}, recent: map[[44]byte]installed{}}
	for i, c := range opts.Config.Chains {
		if c.Pool != nil {
			l.pools[ingress.PoolID(opts.Config, i)] = &chainPool{chain: c, id: ingress.PoolID(opts.Config, i), live: make([]int, len(c.Pool.Variants))}
		}
	}
	dir := ingress.PinDir(opts.NS)
	var err error
	if l.flows, err = ebpf.LoadPinnedMap(dir+"/ing_flows", nil); err != nil {
		return nil, fmt.Errorf("open flow setup: %w", err)
	}
	reports, err := ebpf.LoadPinnedMap(dir+"/ing_reports", nil)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("open flow setup: %w", err)
	}
	l.rd, err = ringbuf.NewReader(reports)
	reports.Close()
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("open flow setup: %w", err)
	}
	err = opts.NS.Do(func() error {
		// IPPROTO_RAW: the packet carries its own IPv6 header.
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		l.fd = fd
		return err
	})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("open flow setup: raw socket: %w", err)
	}
	return l, nil
}

// Close releases the maps, the reader and the socket.
func (l *Loop) Close() {
	if l.rd != nil {
		l.rd.Close()
	}
	if l.flows != nil {
		l.flows.Close()
	}
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// Run serves reports until ctx ends (then it closes l).
func (l *Loop) Run(ctx context.Context) error {
	defer l.Close()
	go func() {
		<-ctx.Done()
		l.rd.Close()
	}()
	go l.sweep(ctx)
	for {
		rec, err := l.rd.Read()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("flow setup: read report: %w", err)
		}
		r, err := ingress.ParseReport(rec.RawSample)
		if err != nil {
			l.opts.Log.Warn("flow setup", "err", err)
			continue
		}
		s, err := l.Handle(r)
		if err != nil {
			l.opts.Log.Warn("flow setup", "chain", s.Chain, "err", err)
		}
		if l.opts.Observe != nil {
			l.opts.Observe(s)
		}
	}
}

// Handle sets up the flow of one report and sends its packet on.
func (l *Loop) Handle(r ingress.Report) (Setup, error) {
	l.mu.Lock()
	cp := l.pools[r.Pool]
	if cp == nil {
		l.mu.Unlock()
		// A report from before the last apply: its chain's pool
		// changed; the sender retransmits into the new one.
		return Setup{}, fmt.Errorf("report for unknown pool %#x (stale)", r.Pool)
	}
	s := Setup{Chain: cp.chain.Name}
	now := monotonic()
	if in, ok := l.recent[r.Key]; ok && in.variant < len(cp.live) {
		// Set up a moment ago (a packet of the flow that was already
		// in the ring when the entry went in).
		s.Variant = in.variant
	} else {
		s.Variant, s.New = l.pick(cp, r.Key), true
		cp.live[s.Variant]++
		l.recent[r.Key] = installed{variant: s.Variant, at: now}
	}
	pool := cp.chain.Pool
	s.NF = pool.NFs[s.Variant]
	segs := pool.Variants[s.Variant]
	l.mu.Unlock()
	if s.New {
		v := flowValue{Variant: uint32(s.Variant), Last: now}
		if err := l.flows.Update(r.Key[:], v, ebpf.UpdateAny); err != nil {
			return s, fmt.Errorf("install flow: %w", err)
		}
	}
	if int(r.Len) != len(r.Data) {
		return s, fmt.Errorf("packet of %d bytes, %d reported: not sent", r.Len, len(r.Data))
	}
	pkt, err := l.encap(segs, r.Data)
	if err != nil {
		return s, err
	}
	dst := unix.SockaddrInet6{Addr: segs[0].As16()}
	if err := unix.Sendto(l.fd, pkt, 0, &dst); err != nil {
		return s, fmt.Errorf("send packet on: %w", err)
	}
	s.Sent = true
	s.Latency = time.Duration(monotonic() - r.KTime)
	return s, nil
}

// encap builds the packet as the ingress would have sent it: H.Encaps
// with the kernel's default outer fields (traffic class, flow label and
// hop limit of an IPv6 packet, seg6_flowlabel 0; hop limit 64 for IPv4),
// then the forwarding hop's hop limit decrement, which a locally sent
// packet does not get.
func (l *Loop) encap(segs []netip.Addr, inner []byte) ([]byte, error) {
	pkt, err := srv6.EncapWith(srv6.EncapOptions{HopLimit: srv6.DefaultHopLimit, Inherit: true}, l.opts.TunSrc, segs, inner)
	if err != nil {
		return nil, fmt.Errorf("encapsulate: %w", err)
	}
	if pkt[7] <= 1 {
		return nil, fmt.Errorf("encapsulate: hop limit %d", pkt[7])
	}
	pkt[7]--
	return pkt, nil
}

// pick chooses a variant for a new flow; cp is locked.
func (l *Loop) pick(cp *chainPool, key [44]byte) int {
	if cp.chain.Pool.Pick == state.PickHash {
		h := fnv.New32a()
		h.Write(key[:])
		return int(h.Sum32() % uint32(len(cp.live)))
	}
	best := 0
	for v, n := range cp.live {
		if n < cp.live[best] {
			best = v
		}
	}
	return best
}

// sweep removes the entries of idle flows and recounts the live ones.
func (l *Loop) sweep(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.Sweep(); err != nil && ctx.Err() == nil {
			l.opts.Log.Warn("flow setup: sweep", "err", err)
		}
	}
}

// Sweep is one pass of the idle sweep. It walks the flow map without
// holding the loop's lock (setups go on meanwhile), then swaps the
// counts in.
func (l *Loop) Sweep() error {
	now := monotonic()
	idle := uint64(l.opts.IdleTimeout)
	l.mu.Lock()
	live := map[uint32][]int{}
	for id, cp := range l.pools {
		live[id] = make([]int, len(cp.live))
	}
	for k, in := range l.recent {
		if now-in.at > uint64(recentFor) {
			delete(l.recent, k)
		}
	}
	l.mu.Unlock()
	// Batches of sweepBatch entries: one system call per batch, not
	// one per flow (the map holds up to 65,536).
	var cursor ebpf.MapBatchCursor
	keys := make([][44]byte, sweepBatch)
	vals := make([]flowValue, sweepBatch)
	var stale [][44]byte
	for {
		n, err := l.flows.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			key, v := keys[i], vals[i]
			pool := binary.LittleEndian.Uint32(key[32:])
			counts, ours := live[pool]
			switch {
			case !ours:
			case now > v.Last && now-v.Last > idle:
				stale = append(stale, key)
			case int(v.Variant) < len(counts):
				counts[v.Variant]++
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("sweep flows: %w", err)
		}
	}
	for _, k := range stale {
		// One by one: a batch delete stops at an entry the LRU
		// evicted meanwhile.
		if err := l.flows.Delete(k[:]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("sweep flows: %w", err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, cp := range l.pools {
		// Flows set up during the walk count too (their entries may
		// have been missed by it).
		for k, in := range l.recent {
			if in.at >= now && binary.LittleEndian.Uint32(k[32:]) == id && in.variant < len(live[id]) {
				live[id][in.variant]++
			}
		}
		cp.live = live[id]
	}
	return nil
}

// Live returns the active flows per instance of each pool chain.
func (l *Loop) Live() map[string][]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]int{}
	for _, cp := range l.pools {
		out[cp.chain.Name] = append([]int(nil), cp.live...)
	}
	return out
}

// monotonic is CLOCK_MONOTONIC in ns, bpf_ktime_get_ns's clock.
func monotonic() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
