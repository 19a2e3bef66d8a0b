// Package proxydp loads the SR proxy programs (bpf/proxy.c, behaviours
// and limits in bpf/lib/proxy.h): End.AS, End.AD, End.AM (plain and NAT)
// and End.AD.flow for SR-unaware NFs (seed 001,
// draft-ietf-spring-sr-service-programming section 6). Model is the pure
// Go reference of what the programs do to a packet.
package proxydp

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/srv6"
)

// Behavior is a proxy behaviour (PROXY_BEH_* of bpf/lib/proxy.h).
type Behavior uint32

// Behaviours.
const (
	BehaviorAS     Behavior = 1 // End.AS, static proxy
	BehaviorAD     Behavior = 2 // End.AD, dynamic proxy (cache per IFACE-IN)
	BehaviorAM     Behavior = 3 // End.AM, masquerading proxy
	BehaviorAMNAT  Behavior = 4 // End.AM with NAT: SRH[0] = returned DA
	BehaviorADFlow Behavior = 5 // End.AD.flow, per-flow dynamic proxy
)

func (b Behavior) String() string {
	switch b {
	case BehaviorAS:
		return "End.AS"
	case BehaviorAD:
		return "End.AD"
	case BehaviorAM:
		return "End.AM"
	case BehaviorAMNAT:
		return "End.AM.NAT"
	case BehaviorADFlow:
		return "End.AD.flow"
	}
	return fmt.Sprintf("behavior-%d", uint32(b))
}

// Limits of the programs (bpf/lib/proxy.h).
const (
	MaxSIDs  = 256 // PROXY_MAX_SIDS
	HdrMax   = 512 // PROXY_HDR_MAX: largest cached / pushed header stack
	MaxSegs  = 16  // SRCHAIN_MAX_SEGS
	statSlot = 16  // PROXY_STAT_SLOTS
	// End.AD.flow header table per SID (PROXY_HDR_*): hdrBuckets buckets
	// of hdrWays slots.
	hdrWays    = 4
	hdrBuckets = 16
	hdrSlots   = hdrWays * hdrBuckets
	// DefaultFlowCapacity is the End.AD.flow cache size when Options
	// leaves it 0.
	DefaultFlowCapacity = 65536
	// ProtoIPv6, ProtoIPv4 and ProtoEthernet are the inner types of
	// SID.Inner (Ethernet: End.AS and End.AD only).
	ProtoIPv6     = 41
	ProtoIPv4     = 4
	ProtoEthernet = 143
)

// Per-SID statistics (PS_* of bpf/lib/proxy.h), by name.
var statNames = [...]string{
	"to-nf", "from-nf", "cache-hit", "cache-miss", "cache-full", "cache-write",
	"wrong-inner", "sl", "ttl", "stack", "control", "drop", "hdr-write", "hdr-replace",
	"opot-save", "opot-miss",
}

// StatNames are the per-SID counter names Counters reports
// ("sid/<addr>/<name>").
func StatNames() []string { return slices.Clone(statNames[:]) }

// SID is one proxy SID and its NF.
type SID struct {
	Addr        netip.Addr    // the proxy SID, exact match
	Behavior    Behavior      //
	OutIfindex  int           // IFACE-OUT, towards the NF
	InIfindex   int           // IFACE-IN, back from the NF (may equal OutIfindex)
	NFNext6     netip.Addr    // the NF's IPv6 address on IFACE-OUT (IPv6 inner / End.AM); invalid: on-link DA
	NFNext4     netip.Addr    // the NF's IPv4 address on IFACE-OUT (IPv4 inner); invalid when none
	Inner       uint8         // 41, 4 or 143 (End.AS/AD only): the inner type End.AS/AD/AD.flow accept
	Source      netip.Addr    // End.AS: outer source of the pushed header
	Segments    []netip.Addr  // End.AS: travel order, first = next DA after the NF
	FlowTimeout time.Duration // End.AD.flow idle timeout (0: none)
	// OPoT carries each packet's OPoT TLV across the NF (End.AD and
	// End.AD.flow; docs/proxy.md "OPoT through a proxy").
	OPoT bool
}

// ErrBadSID is wrapped by SetSIDs for a SID it refuses.
var ErrBadSID = errors.New("invalid proxy sid")

// Validate checks a SID on its own.
func (s SID) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("sid %s: %w: %s", s.Addr, ErrBadSID, fmt.Sprintf(f, a...))
	}
	if !s.Addr.Is6() || s.Addr.Is4In6() {
		return bad("address must be IPv6")
	}
	if s.Behavior < BehaviorAS || s.Behavior > BehaviorADFlow {
		return bad("unknown behavior %d", s.Behavior)
	}
	if s.OutIfindex <= 0 || s.InIfindex <= 0 {
		return bad("IFACE-OUT and IFACE-IN ifindexes must be set")
	}
	if s.NFNext6.IsValid() && (!s.NFNext6.Is6() || s.NFNext6.Is4In6()) {
		return bad("NFNext6 %s is not IPv6", s.NFNext6)
	}
	if s.NFNext4.IsValid() && !s.NFNext4.Is4() {
		return bad("NFNext4 %s is not IPv4", s.NFNext4)
	}
	if s.OPoT && s.Behavior != BehaviorAD && s.Behavior != BehaviorADFlow && s.Behavior != BehaviorAM {
		return bad("%s cannot carry OPoT: End.AS pushes a header of its own, End.AM.NAT rewrites the chain's last segment", s.Behavior)
	}
	if s.Behavior == BehaviorAM || s.Behavior == BehaviorAMNAT {
		return nil
	}
	switch {
	case s.Inner == ProtoEthernet && s.Behavior == BehaviorADFlow:
		return bad("End.AD.flow keys its cache by the inner IP flow: no Ethernet inner type")
	case s.Inner == ProtoEthernet && s.OPoT:
		return bad("no OPoT carry over an Ethernet inner type")
	case s.Inner != ProtoIPv6 && s.Inner != ProtoIPv4 && s.Inner != ProtoEthernet:
		return bad("inner type %d: want 41 (IPv6), 4 (IPv4) or 143 (Ethernet)", s.Inner)
	}
	if s.FlowTimeout < 0 {
		return bad("negative flow timeout")
	}
	if s.Behavior == BehaviorAS {
		if _, err := s.ASHeader(); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// ASHeader is the header End.AS pushes in front of a packet from the NF
// (payload length 0, the program fills it): IPv6 from Source to
// Segments[0], hop limit 64, and an SRH with the segments (SL = last
// entry) unless there is just one.
func (s SID) ASHeader() ([]byte, error) {
	if !s.Source.Is6() || s.Source.Is4In6() {
		return nil, fmt.Errorf("source %v is not IPv6", s.Source)
	}
	if len(s.Segments) == 0 || len(s.Segments) > MaxSegs {
		return nil, fmt.Errorf("%d segments: want 1..%d", len(s.Segments), MaxSegs)
	}
	for _, a := range s.Segments {
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("segment %v is not IPv6", a)
		}
	}
	h := srv6.IPv6{HopLimit: srv6.DefaultHopLimit, Src: s.Source, Dst: s.Segments[0], NextHeader: s.Inner}
	if len(s.Segments) == 1 {
		return h.AppendTo(nil), nil
	}
	h.NextHeader = srv6.ProtoRouting
	b := h.AppendTo(nil)
	b, err := srv6.NewSRH(s.Inner, s.Segments).AppendTo(b)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Options configure Load.
type Options struct {
	PinPath      string // bpffs directory for the maps; "" = not pinned
	FlowCapacity int    // End.AD.flow cache entries; 0 = DefaultFlowCapacity
	// OPoTStale is how long a kept OPoT TLV holds its slot against
	// another packet's (its packet is presumed dropped by the NF after
	// that); 0 = DefaultOPoTStale. docs/proxy.md "OPoT through a proxy".
	OPoTStale time.Duration
	// OPoT are the node's OPoT maps (opotdp.EndMaps) the programs read,
	// in place of their own, to do the node's transit of the chains the
	// OPoT driver marks for the SID's program (bpf/lib/proxy.h
	// proxy_opot_hop, cfg_opot); not pinned here. Nil: no transit in the
	// proxy, and its own OPoT maps shrink to one entry.
	OPoT map[string]*ebpf.Map
	// Pipeline are the node's XDP pipeline maps (pipeline.Maps
	// Replacements) the pipeline stage srchain_proxy_xdp tail-calls
	// through; not pinned here. Nil: private ones (the stage is then no
	// node's).
	Pipeline map[string]*ebpf.Map

	mapsOnly bool // OpenPinnedMaps
}

// DefaultOPoTStale is Options.OPoTStale's default.
const DefaultOPoTStale = time.Second

// Proxy is the loaded programs and their maps.
type Proxy struct {
	objs    proxyProgObjects
	pinPath string
	mu      sync.Mutex
	links   map[string]link.Link
	sids    map[netip.Addr]uint32 // SID -> entry index (counters)
}

// pinnedMaps are the maps Load pins (configuration, state, counters).
var pinnedMaps = []string{
	proxyProgMapProxyCfg, proxyProgMapProxySids, proxyProgMapProxyNf, proxyProgMapProxySrIfs, proxyProgMapProxyAdCache,
	proxyProgMapProxyFlows, proxyProgMapProxyHslots, proxyProgMapProxyHgen, proxyProgMapProxyStats,
	proxyProgMapProxyOpot, proxyProgMapProxyOpotQ, proxyProgMapProxyOpotSlots, proxyProgMapDropCounters, proxyProgMapFibCounters,
}

// Load loads the proxy programs. With a PinPath, maps already pinned
// there are reused (state and counters survive a restart) and the others
// pinned.
func Load(o Options) (*Proxy, error) {
	spec, err := loadProxyProg()
	if err != nil {
		return nil, fmt.Errorf("load proxy spec: %w", err)
	}
	if o.FlowCapacity < 0 {
		return nil, fmt.Errorf("load proxy: negative flow capacity %d", o.FlowCapacity)
	}
	if o.FlowCapacity > 0 {
		spec.Maps[proxyProgMapProxyFlows].MaxEntries = uint32(o.FlowCapacity)
	}
	stale := o.OPoTStale
	if stale == 0 {
		stale = DefaultOPoTStale
	}
	if stale < 0 {
		return nil, fmt.Errorf("load proxy: negative OPoT stale time %v", o.OPoTStale)
	}
	if err := spec.Variables["cfg_opot_stale_ns"].Set(uint64(stale)); err != nil {
		return nil, fmt.Errorf("load proxy: set OPoT stale time: %w", err)
	}
	keep := maps.Clone(o.OPoT)
	if o.OPoT != nil {
		if err := spec.Variables["cfg_opot"].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("load proxy: set opot: %w", err)
		}
		keep[proxyProgMapOpotChainCache] = nil // the proxy's own, per CPU
	}
	bpfrt.ShrinkUnused(spec, "opot_", keep)
	copts := ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{}}
	maps.Copy(copts.MapReplacements, o.OPoT)
	maps.Copy(copts.MapReplacements, o.Pipeline)
	var reused []*ebpf.Map
	defer func() {
		for _, m := range reused {
			m.Close()
		}
	}()
	if o.PinPath != "" {
		if err := os.MkdirAll(o.PinPath, 0o700); err != nil {
			return nil, fmt.Errorf("create pin path: %w", err)
		}
		for _, name := range pinnedMaps {
			m, err := ebpf.LoadPinnedMap(filepath.Join(o.PinPath, name), nil)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("open pinned map %s: %w", name, err)
			}
			reused = append(reused, m)
			if name == proxyProgMapProxyFlows && o.FlowCapacity == 0 {
				spec.Maps[name].MaxEntries = m.MaxEntries()
			}
			if err := spec.Maps[name].Compatible(m); err != nil {
				return nil, fmt.Errorf("reuse pinned map %s: %w", name, err)
			}
			copts.MapReplacements[name] = m
		}
	}
	p := &Proxy{pinPath: o.PinPath, links: map[string]link.Link{}, sids: map[netip.Addr]uint32{}}
	if o.mapsOnly {
		// A map an older build did not pin gets a private, empty
		// instance, pinned nowhere: nothing of the node changes.
		if err := spec.LoadAndAssign(&p.objs.proxyProgMaps, &copts); err != nil {
			return nil, fmt.Errorf("open pinned proxy maps: %w", err)
		}
	} else if err := spec.LoadAndAssign(&p.objs, &copts); err != nil {
		return nil, bpfrt.WrapLoad("load proxy programs", err)
	}
	if o.PinPath != "" && !o.mapsOnly {
		for _, name := range pinnedMaps {
			m := p.mapByName(name)
			path := filepath.Join(o.PinPath, name)
			if _, ok := copts.MapReplacements[name]; ok {
				continue
			}
			if err := m.Pin(path); err != nil {
				p.objs.Close()
				return nil, fmt.Errorf("pin map %s: %w", name, err)
			}
		}
	}
	if err := p.readSIDs(); err != nil {
		p.objs.Close()
		return nil, err
	}
	return p, nil
}

// OpenPinned loads the programs over the maps pinned at pinPath by an
// earlier Load (which must exist): the running configuration, caches and
// counters are this Proxy's. opot and pipe are Options.OPoT and
// Options.Pipeline.
func OpenPinned(pinPath string, opot, pipe map[string]*ebpf.Map) (*Proxy, error) {
	if _, err := os.Stat(filepath.Join(pinPath, proxyProgMapProxyCfg)); err != nil {
		return nil, fmt.Errorf("open pinned proxy: %w", err)
	}
	return Load(Options{PinPath: pinPath, OPoT: opot, Pipeline: pipe})
}

// OpenPinnedMaps is OpenPinned without the programs (loading them means
// verifying them): enough for the SID table (SetSIDs, Installed), the
// caches and the counters. Attach, and anything else that needs a
// program, fails. A map the pin directory lacks (pinned by an older
// build) is a private one, pinned nowhere.
func OpenPinnedMaps(pinPath string) (*Proxy, error) {
	if _, err := os.Stat(filepath.Join(pinPath, proxyProgMapProxyCfg)); err != nil {
		return nil, fmt.Errorf("open pinned proxy: %w", err)
	}
	return Load(Options{PinPath: pinPath, mapsOnly: true})
}

func (p *Proxy) mapByName(name string) *ebpf.Map {
	switch name {
	case proxyProgMapProxyCfg:
		return p.objs.ProxyCfg
	case proxyProgMapProxySids:
		return p.objs.ProxySids
	case proxyProgMapProxyNf:
		return p.objs.ProxyNf
	case proxyProgMapProxySrIfs:
		return p.objs.ProxySrIfs
	case proxyProgMapProxyAdCache:
		return p.objs.ProxyAdCache
	case proxyProgMapProxyFlows:
		return p.objs.ProxyFlows
	case proxyProgMapProxyHslots:
		return p.objs.ProxyHslots
	case proxyProgMapProxyHgen:
		return p.objs.ProxyHgen
	case proxyProgMapProxyStats:
		return p.objs.ProxyStats
	case proxyProgMapProxyOpot:
		return p.objs.ProxyOpot
	case proxyProgMapProxyOpotQ:
		return p.objs.ProxyOpotQ
	case proxyProgMapProxyOpotSlots:
		return p.objs.ProxyOpotSlots
	case proxyProgMapDropCounters:
		return p.objs.DropCounters
	case proxyProgMapFibCounters:
		return p.objs.FibCounters
	}
	return nil
}

// readSIDs loads the SID -> index table from the map (pinned state).
func (p *Proxy) readSIDs() error {
	var k proxyProgIn6Addr
	var v uint32
	it := p.objs.ProxySids.Iterate()
	for it.Next(&k, &v) {
		p.sids[netip.AddrFrom16(k.In6U.U6Addr8)] = v
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read proxy sids: %w", err)
	}
	return nil
}

func in6(a netip.Addr) proxyProgIn6Addr {
	var r proxyProgIn6Addr
	if a.IsValid() {
		r.In6U.U6Addr8 = a.As16()
	}
	return r
}

// entry is the proxy_cfg value of s.
func entry(s SID) (proxyProgProxySid, error) {
	e := proxyProgProxySid{
		Sid:           in6(s.Addr),
		Behavior:      uint32(s.Behavior),
		OutIfindex:    uint32(s.OutIfindex),
		InIfindex:     uint32(s.InIfindex),
		Inner:         uint32(s.Inner),
		FlowTimeoutNs: uint64(s.FlowTimeout),
	}
	if s.NFNext6.IsValid() {
		e.Nf6 = in6(s.NFNext6)
		e.Flags |= 1
	}
	if s.NFNext4.IsValid() {
		a := s.NFNext4.As4()
		e.Nf4 = uint32(a[0]) | uint32(a[1])<<8 | uint32(a[2])<<16 | uint32(a[3])<<24 // network order in memory
		e.Flags |= 2
	}
	if s.OPoT && (s.Behavior == BehaviorAD || s.Behavior == BehaviorADFlow) {
		e.Flags |= 4
	}
	if s.Behavior == BehaviorAS {
		h, err := s.ASHeader()
		if err != nil {
			return e, err
		}
		e.HdrLen = uint32(copy(e.Hdr[:], h))
	}
	return e, nil
}

// SetSIDs replaces the SID table. A SID keeps its entry index (and so
// its counters) across calls; a new SID gets a free index with its
// counters zeroed. IFACE-IN must differ between SIDs.
func (p *Proxy) SetSIDs(sids []SID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	seenAddr := map[netip.Addr]bool{}
	seenIn := map[int]netip.Addr{}
	entries := make([]proxyProgProxySid, len(sids))
	for i, s := range sids {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("set proxy sids: %w", err)
		}
		if seenAddr[s.Addr] {
			return fmt.Errorf("set proxy sids: sid %s: %w: listed twice", s.Addr, ErrBadSID)
		}
		seenAddr[s.Addr] = true
		if o, ok := seenIn[s.InIfindex]; ok {
			return fmt.Errorf("set proxy sids: sid %s: %w: IFACE-IN %d already serves %s", s.Addr, ErrBadSID, s.InIfindex, o)
		}
		seenIn[s.InIfindex] = s.Addr
		e, err := entry(s)
		if err != nil {
			return fmt.Errorf("set proxy sids: sid %s: %w", s.Addr, err)
		}
		entries[i] = e
	}
	if len(sids) > MaxSIDs {
		return fmt.Errorf("set proxy sids: %d sids, at most %d", len(sids), MaxSIDs)
	}
	// Indexes: kept for known SIDs, the lowest free ones for new SIDs.
	used := map[uint32]bool{}
	idx := make([]uint32, len(sids))
	for i, s := range sids {
		if v, ok := p.sids[s.Addr]; ok {
			idx[i], used[v] = v, true
		} else {
			idx[i] = ^uint32(0)
		}
	}
	next := uint32(0)
	fresh := map[uint32]bool{}
	for i := range sids {
		if idx[i] != ^uint32(0) {
			continue
		}
		for used[next] {
			next++
		}
		idx[i], used[next], fresh[next] = next, true, true
		if err := p.resetStats(next); err != nil {
			return fmt.Errorf("set proxy sids: %w", err)
		}
	}
	// A reused entry index must not inherit its old SID's flows, and an
	// IFACE-IN now serving another entry not its old cached header.
	if err := p.purgeFlows(fresh); err != nil {
		return fmt.Errorf("set proxy sids: %w", err)
	}
	for i, s := range sids {
		var old uint32
		err := p.objs.ProxyNf.Lookup(uint32(s.InIfindex), &old)
		if err == nil && old != idx[i] {
			if err := p.objs.ProxyAdCache.Delete(uint32(s.InIfindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("set proxy sids: drop cache of IFACE-IN %d: %w", s.InIfindex, err)
			}
		}
	}
	// Write configuration first, then the lookups that lead to it.
	for i := range sids {
		if err := p.objs.ProxyCfg.Update(idx[i], &entries[i], ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set proxy sids: write %s: %w", sids[i].Addr, err)
		}
	}
	newSIDs := map[netip.Addr]uint32{}
	for i, s := range sids {
		newSIDs[s.Addr] = idx[i]
		if err := p.objs.ProxySids.Update(in6(s.Addr), idx[i], ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set proxy sids: index %s: %w", s.Addr, err)
		}
		if err := p.objs.ProxyNf.Update(uint32(s.InIfindex), idx[i], ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set proxy sids: IFACE-IN of %s: %w", s.Addr, err)
		}
	}
	// Remove what is gone: SIDs, IFACE-INs, their cached headers.
	for a := range p.sids {
		if _, ok := newSIDs[a]; !ok {
			if err := p.objs.ProxySids.Delete(in6(a)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("set proxy sids: remove %s: %w", a, err)
			}
		}
	}
	var k, v uint32
	var stale []uint32
	it := p.objs.ProxyNf.Iterate()
	for it.Next(&k, &v) {
		if _, ok := seenIn[int(k)]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("set proxy sids: list IFACE-INs: %w", err)
	}
	for _, k := range stale {
		if err := p.objs.ProxyNf.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set proxy sids: remove IFACE-IN %d: %w", k, err)
		}
		if err := p.objs.ProxyAdCache.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set proxy sids: remove cache of IFACE-IN %d: %w", k, err)
		}
	}
	// Entries no SID points at any more: behaviour 0 (ignored).
	for _, old := range p.sids {
		if !used[old] {
			if err := p.objs.ProxyCfg.Update(old, &proxyProgProxySid{}, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("set proxy sids: clear entry %d: %w", old, err)
			}
		}
	}
	p.sids = newSIDs
	return nil
}

// purgeFlows deletes the End.AD.flow entries and header slots of the
// given entry indexes. The slots' generation counters stay: a flow that
// survived would see a new generation and miss.
func (p *Proxy) purgeFlows(idx map[uint32]bool) error {
	if len(idx) == 0 {
		return nil
	}
	for i := range idx {
		for s := uint32(0); s < hdrSlots; s++ {
			if err := p.objs.ProxyHslots.Delete(i*hdrSlots + s); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("delete header slot: %w", err)
			}
		}
	}
	var k proxyProgProxyFlowKey
	var stale []proxyProgProxyFlowKey
	it := p.objs.ProxyFlows.Iterate()
	var v proxyProgProxyFlow
	for it.Next(&k, &v) {
		if idx[k.Sid] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list flows: %w", err)
	}
	for _, k := range stale {
		if err := p.objs.ProxyFlows.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete flow: %w", err)
		}
	}
	return nil
}

func (p *Proxy) resetStats(idx uint32) error {
	zeros := make([]uint64, ebpf.MustPossibleCPU())
	for s := range uint32(statSlot) {
		if err := p.objs.ProxyStats.Update(idx*statSlot+s, zeros, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("reset counters of entry %d: %w", idx, err)
		}
	}
	return nil
}

// SRProgram and NFProgram are the tc programs (test runs, benchmarks).
func (p *Proxy) SRProgram() *ebpf.Program { return p.objs.SrchainProxySr }

// NFProgram is srchain_proxy_nf.
func (p *Proxy) NFProgram() *ebpf.Program { return p.objs.SrchainProxyNf }

// Attach attaches srchain_proxy_nf (nfSide: ifindex is an IFACE-IN) or
// srchain_proxy_sr (the SR-facing interface) to ifindex's tcx ingress in
// the current network namespace. linkPin, when set, is the bpffs path of
// the link: a link pinned there is taken over (program swap, no gap).
// srchain_proxy_nf also serves packets to a proxy SID, so an interface
// that is both SR-facing and an IFACE-IN (one-armed NF) needs only the
// NF side attached.
func (p *Proxy) Attach(ifindex int, nfSide bool, linkPin string) error {
	h := bpfrt.Hook{Ifindex: ifindex}
	l, _, err := bpfrt.Attach(h, p.Program(nfSide), bpfrt.AttachOptions{Pin: linkPin})
	if err != nil {
		return fmt.Errorf("attach proxy: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	key := fmt.Sprintf("%s/%v", h, nfSide)
	if old, ok := p.links[key]; ok {
		old.Close()
	}
	p.links[key] = l
	return nil
}

// StageProgram is srchain_proxy_xdp, the proxy stage of the node's XDP
// pipeline (internal/pipeline): both sides, on the interfaces SetSIDs
// (IFACE-INs) and SetSRSide name.
func (p *Proxy) StageProgram() *ebpf.Program { return p.objs.SrchainProxyXdp }

// SetSRSide makes ifindexes the SR-side interfaces, where the pipeline
// stage serves packets to a proxy SID (as srchain_proxy_sr, attached
// there, does at tc), and no others.
func (p *Proxy) SetSRSide(ifindexes []int) error {
	want := map[uint32]bool{}
	for _, i := range ifindexes {
		if i <= 0 {
			return fmt.Errorf("set proxy sr side: bad ifindex %d", i)
		}
		want[uint32(i)] = true
	}
	if len(want) > int(p.objs.ProxySrIfs.MaxEntries()) {
		return fmt.Errorf("set proxy sr side: %d interfaces, at most %d", len(want), p.objs.ProxySrIfs.MaxEntries())
	}
	have, err := p.SRSide()
	if err != nil {
		return err
	}
	for i := range want {
		if err := p.objs.ProxySrIfs.Update(i, uint32(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set proxy sr side: add %d: %w", i, err)
		}
	}
	for _, i := range have {
		if want[uint32(i)] {
			continue
		}
		if err := p.objs.ProxySrIfs.Delete(uint32(i)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set proxy sr side: remove %d: %w", i, err)
		}
	}
	return nil
}

// SRSide lists the SR-side interfaces (SetSRSide), sorted.
func (p *Proxy) SRSide() ([]int, error) {
	var k, v uint32
	var out []int
	it := p.objs.ProxySrIfs.Iterate()
	for it.Next(&k, &v) {
		out = append(out, int(k))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list proxy sr side: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// XDPProgram is srchain_proxy_sr_xdp.
func (p *Proxy) XDPProgram() *ebpf.Program { return p.objs.SrchainProxySrXdp }

// NFXDPProgram is srchain_proxy_nf_xdp.
func (p *Proxy) NFXDPProgram() *ebpf.Program { return p.objs.SrchainProxyNfXdp }

// AttachXDP attaches an XDP twin to ifindex (native mode where the
// driver has it): srchain_proxy_nf_xdp on an IFACE-IN (nfSide; it also
// serves packets to a proxy SID, as srchain_proxy_nf does), else
// srchain_proxy_sr_xdp on an SR-facing interface. A twin forwards what
// it can finish with a FIB lookup and passes the rest to tc untouched, so
// Attach(ifindex, nfSide, ...) must be done on the same interface too.
// linkPin as for Attach.
func (p *Proxy) AttachXDP(ifindex int, nfSide bool, linkPin string) error {
	prog := p.objs.SrchainProxySrXdp
	if nfSide {
		prog = p.objs.SrchainProxyNfXdp
	}
	h := bpfrt.Hook{Ifindex: ifindex, XDP: true}
	l, _, err := bpfrt.Attach(h, prog, bpfrt.AttachOptions{Pin: linkPin})
	if err != nil {
		return fmt.Errorf("attach proxy xdp: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.links[h.String()]; ok {
		old.Close()
	}
	p.links[h.String()] = l
	return nil
}

// Attached reports whether this Proxy's program for the side (nfSide:
// srchain_proxy_nf, else srchain_proxy_sr) runs on ifindex's tcx
// ingress in the current network namespace, asking the kernel.
func (p *Proxy) Attached(ifindex int, nfSide bool) (bool, error) {
	return bpfrt.Attached(p.Program(nfSide), bpfrt.Hook{Ifindex: ifindex})
}

// Program is the tc program of a side: srchain_proxy_nf for an IFACE-IN
// (nfSide), else srchain_proxy_sr.
func (p *Proxy) Program(nfSide bool) *ebpf.Program {
	if nfSide {
		return p.NFProgram()
	}
	return p.SRProgram()
}

// Detach removes the program Attach put on ifindex (and the link pin
// linkPin when set; a link only pinned there, e.g. by an earlier
// process, is detached through the pin).
func (p *Proxy) Detach(ifindex int, nfSide bool, linkPin string) error {
	h := bpfrt.Hook{Ifindex: ifindex}
	key := fmt.Sprintf("%s/%v", h, nfSide)
	p.mu.Lock()
	l, ok := p.links[key]
	delete(p.links, key)
	p.mu.Unlock()
	if ok {
		if err := bpfrt.Detach(h, l, linkPin != ""); err != nil {
			return fmt.Errorf("detach proxy: %w", err)
		}
		return nil
	}
	if linkPin != "" {
		if err := bpfrt.DetachPinned(linkPin); err != nil {
			return fmt.Errorf("detach proxy: %w", err)
		}
	}
	return nil
}

// Remove deletes a pinned proxy: every link pinned in pinPath is
// detached, then the directory (maps) removed. No directory: nothing to do.
func Remove(pinPath string) error {
	ents, err := os.ReadDir(pinPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove proxy pins: %w", err)
	}
	for _, e := range ents {
		if slices.Contains(pinnedMaps, e.Name()) {
			continue
		}
		if err := bpfrt.DetachPinned(filepath.Join(pinPath, e.Name())); err != nil {
			return fmt.Errorf("remove proxy pins: %w", err)
		}
	}
	if err := os.RemoveAll(pinPath); err != nil {
		return fmt.Errorf("remove proxy pins: %w", err)
	}
	return nil
}

// Installed reads the SID table back from the maps (what the programs
// serve), sorted by address: for drift checks against the desired SIDs.
// End.AS's Source and Segments are decoded from its pushed header.
func (p *Proxy) Installed() ([]SID, error) {
	var out []SID
	var k proxyProgIn6Addr
	var idx uint32
	nf := map[uint32]uint32{} // entry index -> IFACE-IN in proxy_nf
	var in, v uint32
	it := p.objs.ProxyNf.Iterate()
	for it.Next(&in, &v) {
		nf[v] = in
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read proxy sids: %w", err)
	}
	it = p.objs.ProxySids.Iterate()
	for it.Next(&k, &idx) {
		var e proxyProgProxySid
		if err := p.objs.ProxyCfg.Lookup(idx, &e); err != nil {
			return nil, fmt.Errorf("read proxy sid entry %d: %w", idx, err)
		}
		s := SID{
			Addr:        netip.AddrFrom16(k.In6U.U6Addr8),
			Behavior:    Behavior(e.Behavior),
			OutIfindex:  int(e.OutIfindex),
			InIfindex:   int(e.InIfindex),
			Inner:       uint8(e.Inner),
			FlowTimeout: time.Duration(e.FlowTimeoutNs),
		}
		if got, ok := nf[idx]; !ok || int(got) != s.InIfindex {
			s.InIfindex = 0 // not reachable from its IFACE-IN: drift
		}
		if e.Flags&1 != 0 {
			s.NFNext6 = netip.AddrFrom16(e.Nf6.In6U.U6Addr8)
		}
		if e.Flags&2 != 0 {
			s.NFNext4 = netip.AddrFrom4([4]byte{byte(e.Nf4), byte(e.Nf4 >> 8), byte(e.Nf4 >> 16), byte(e.Nf4 >> 24)})
		}
		s.OPoT = e.Flags&4 != 0
		if s.Behavior == BehaviorAS && e.HdrLen >= 40 && int(e.HdrLen) <= len(e.Hdr) {
			h := e.Hdr[:e.HdrLen]
			ip, err := srv6.ParseIPv6(h)
			if err == nil {
				s.Source = ip.Src
				s.Segments = []netip.Addr{ip.Dst}
				if ip.NextHeader == srv6.ProtoRouting {
					if srh, err := srv6.ParseSRH(h[40:]); err == nil {
						s.Segments = srh.Travel()
					}
				}
			}
		}
		out = append(out, s)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read proxy sids: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr.Less(out[j].Addr) })
	return out, nil
}

// Counters reads the counters: "sid/<addr>/<stat>" for every SID and
// StatNames entry, "drop/<reason>" and "fib/<outcome>" where non-zero.
func (p *Proxy) Counters() (map[string]uint64, error) {
	p.mu.Lock()
	sids := make(map[netip.Addr]uint32, len(p.sids))
	for a, i := range p.sids {
		sids[a] = i
	}
	p.mu.Unlock()
	out := map[string]uint64{}
	addrs := make([]netip.Addr, 0, len(sids))
	for a := range sids {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	for _, a := range addrs {
		for s, name := range statNames {
			v, err := bpfrt.SumPerCPU(p.objs.ProxyStats, sids[a]*statSlot+uint32(s))
			if err != nil {
				return nil, fmt.Errorf("read proxy counters: %w", err)
			}
			out["sid/"+a.String()+"/"+name] = v
		}
	}
	d, err := bpfrt.ReadDropCounts(p.objs.DropCounters)
	if err != nil {
		return nil, err
	}
	for name, v := range d.NonZero() {
		out["drop/"+name] = v
	}
	f, err := bpfrt.ReadFIBCounts(p.objs.FibCounters)
	if err != nil {
		return nil, err
	}
	for name, v := range f {
		out["fib/"+name] = v
	}
	return out, nil
}

// Drops returns the drop counters summed over CPUs.
func (p *Proxy) Drops() (drop.Counts, error) { return bpfrt.ReadDropCounts(p.objs.DropCounters) }

// Close releases the programs, maps and links of this process; pinned
// maps and links stay (the datapath keeps running).
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for k, l := range p.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close link %s: %w", k, err))
		}
		delete(p.links, k)
	}
	if err := p.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close proxy objects: %w", err))
	}
	return errors.Join(errs...)
}
