package ingress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/state"
)

// Names of the programs in the kernel.
const (
	ProgName    = "srchain_ingress"
	XDPProgName = "srchain_ingress_xdp"
)

// Options configure Load.
type Options struct {
	// PinPath, when set, is a bpffs directory: every map is pinned there
	// by name (and reused by the next Load with the same path, so a
	// re-apply keeps the tables and counters the running program uses).
	PinPath string
	// Rules and Prefixes size the classifier tables (zero: room for
	// what Rules needs, see Capacity).
	Capacity firewall.Capacity
	// XDP also loads the XDP fast path.
	XDP bool
	// Pipeline are the node's XDP pipeline maps (pipeline.Maps
	// Replacements), in place of the object's own; not pinned here.
	Pipeline map[string]*ebpf.Map
	// OPoT are the OPoT driver's maps the headend extension reads and
	// counts in (opotdp.HeadendMaps), in place of the object's own, for
	// chains with Chain.Ext = ExtOPoT; not pinned here. Without them the
	// object's own OPoT maps stay empty: such chains are dropped, counted
	// (opot-no-profile).
	OPoT map[string]*ebpf.Map
}

// ExtOPoT is Chain.Ext of a chain whose headend writes its OPoT TLV
// (bpf/lib/ingress.h ING_EXT_OPOT).
const ExtOPoT = state.IngressExtOPoT

// Ingress is a loaded ingress program and its maps.
type Ingress struct {
	objs ingressProgObjects
	tabs firewall.Tables
}

// Load loads the program (and with Options.XDP its XDP twin), the
// classifier tables sized by opts.Capacity. A pinned map whose layout no
// longer fits (ebpf.ErrMapIncompatible: other capacity) is an error the
// caller handles by removing the pins (Unpin) and loading again.
func Load(opts Options) (*Ingress, error) {
	spec, err := loadIngressProg()
	if err != nil {
		return nil, fmt.Errorf("load ingress spec: %w", err)
	}
	capy := opts.Capacity
	capy.Bitmaps, capy.Prefixes = max(capy.Bitmaps, 64), max(capy.Prefixes, 64)
	if err := firewall.SizeTables(spec, &firewall.Classifier{}, capy); err != nil {
		return nil, fmt.Errorf("load ingress: %w", err)
	}
	// The OPoT maps the header declares and the headend extension does
	// not take from the OPoT driver are never read (the anti-replay
	// windows alone would lock 0.6 MB).
	bpfrt.ShrinkUnused(spec, "opot_", opts.OPoT)
	var copts ebpf.CollectionOptions
	copts.MapReplacements = maps.Clone(opts.Pipeline)
	if copts.MapReplacements == nil {
		copts.MapReplacements = map[string]*ebpf.Map{}
	}
	maps.Copy(copts.MapReplacements, opts.OPoT)
	if opts.PinPath != "" {
		for name, m := range spec.Maps {
			// The OPoT maps are the OPoT driver's (or empty stand-ins).
			_, shared := copts.MapReplacements[name]
			if !shared && !strings.HasPrefix(name, "opot_") && m.Name != "" && m.Name[0] != '.' {
				m.Pinning = ebpf.PinByName
			}
		}
		copts.Maps.PinPath = opts.PinPath
	}
	in := &Ingress{}
	if opts.XDP {
		err = spec.LoadAndAssign(&in.objs, &copts)
	} else {
		var tc struct {
			ingressProgMaps
			SrchainIngress *ebpf.Program `ebpf:"srchain_ingress"`
		}
		if err = spec.LoadAndAssign(&tc, &copts); err == nil {
			in.objs.ingressProgMaps, in.objs.SrchainIngress = tc.ingressProgMaps, tc.SrchainIngress
		}
	}
	if err != nil {
		return nil, bpfrt.WrapLoad("load ingress program", err)
	}
	o := &in.objs
	in.tabs = firewall.Tables{Bitmaps: o.FwBitmaps, LPM: o.FwLpm, Idx: o.FwIdx, Fdef: o.FwFdef, Cfg: o.FwCfg,
		Gen: o.FwGen, Rules: o.FwRules, RuleCounters: o.FwRuleCounters, Args: o.FwArgs}
	return in, nil
}

// CapacityFor is room for entries classifier rules and later growth
// (a chain set that outgrows it gets new maps on Apply).
// Sizes go by powers of two from 1024, so a chain set that grows a
// little reuses the pinned maps.
func CapacityFor(entries int) firewall.Capacity {
	room := 1024
	for room < 256+2*entries {
		room *= 2
	}
	return firewall.Capacity{Bitmaps: room, Prefixes: room}
}

// Close releases the program and maps (pinned ones stay pinned; links
// attached by Attach stay attached only when pinned).
func (in *Ingress) Close() error { return in.objs.Close() }

// Program is the tc program; XDPProgram the XDP twin (nil unless loaded).
func (in *Ingress) Program() *ebpf.Program    { return in.objs.SrchainIngress }
func (in *Ingress) XDPProgram() *ebpf.Program { return in.objs.SrchainIngressXdp }

// Update makes the program steer by cfg with settings s: the classifier
// and the chains' policies are written into the idle generation, then
// one word switches packets over (a packet sees the old or the new chain
// set, never a mix). It returns the generation that ran before (for
// Revert). Per-chain counters restart from zero. Callers sharing pins
// with other processes hold bpfrt.LockDir(pin, Exclusive).
func (in *Ingress) Update(cfg Config, s Settings) (prev int, err error) {
	entries, err := Rules(cfg)
	if err != nil {
		return 0, fmt.Errorf("update ingress: %w", err)
	}
	if !s.TunSrc.Is6() || s.TunSrc.Is4In6() {
		return 0, fmt.Errorf("update ingress: %w: tunsrc %v is not IPv6", ErrInvalid, s.TunSrc)
	}
	rules := make([]firewall.Rule, len(entries))
	for i, e := range entries {
		rules[i] = e.Rule
	}
	prev, err = in.tabs.Active()
	if err != nil {
		return 0, fmt.Errorf("update ingress: %w", err)
	}
	g, _, err := in.tabs.Stage(firewall.Config{Mode: firewall.Advanced, Rules: rules})
	if err != nil {
		return 0, fmt.Errorf("update ingress: %w", err)
	}
	keys := make([]uint32, 0, len(entries)+1)
	vals := make([]ingressProgIngPolicy, 0, len(entries)+1)
	for i, e := range entries {
		c := cfg.Chains[e.Chain]
		v := ingressProgIngPolicy{Chain: uint32(e.Chain), Mode: modeEncap, Nsegs: uint32(len(c.Segments)),
			HopLimit4: uint32(hopLimit(s, c.Dev)), Ext: c.Ext}
		if c.Mode == state.ModeInsert {
			v.Mode = modeInsert
		}
		for k, seg := range c.Segments {
			v.Segs[k].In6U.U6Addr8 = seg.As16()
		}
		keys = append(keys, uint32(g*firewall.RuleSlots+i))
		vals = append(vals, v)
	}
	// The policy slot (no rule matched): no chain.
	keys = append(keys, uint32(g*firewall.RuleSlots+len(entries)))
	vals = append(vals, ingressProgIngPolicy{})
	// Pool chains: the variants, from vbase on, in the same generation.
	pools := poolSlots(cfg)
	var vkeys []uint32
	var vvals []ingressProgIngPolicy
	for i := range vals[:len(entries)] {
		c := cfg.Chains[entries[i].Chain]
		ps, ok := pools[entries[i].Chain]
		if !ok {
			continue
		}
		vals[i].Pool, vals[i].Nvariants, vals[i].Vbase = ps.id, uint32(len(c.Pool.Variants)), ps.base
		for v, segs := range c.Pool.Variants {
			pv := ingressProgIngPolicy{Chain: uint32(entries[i].Chain), Mode: modeEncap, Nsegs: uint32(len(segs)),
				HopLimit4: uint32(hopLimit(s, c.Dev)), Ext: c.Ext}
			for k, seg := range segs {
				pv.Segs[k].In6U.U6Addr8 = seg.As16()
			}
			vkeys = append(vkeys, uint32(g*VariantSlots)+ps.base+uint32(v))
			vvals = append(vvals, pv)
		}
	}
	if len(vkeys) > 0 {
		if _, err := in.objs.IngVariants.BatchUpdate(vkeys, vvals, nil); err != nil {
			return 0, fmt.Errorf("update ingress: write pool variants: %w", err)
		}
	}
	if _, err := in.objs.IngPolicies.BatchUpdate(keys, vals, nil); err != nil {
		return 0, fmt.Errorf("update ingress: write policies: %w", err)
	}
	conf := ingressProgIngConfig{Flowlabel: int32(s.FlowLabel), Hash: Hash(cfg, s)}
	if s.FIBDirect {
		conf.FibDirect = 1
	}
	conf.Tunsrc.In6U.U6Addr8 = s.TunSrc.As16()
	// The node settings are one word-sized-or-larger value read per
	// packet; tunsrc and the flow label mode only change with the node's
	// own configuration, so writing them before the flip is harmless.
	if err := in.objs.IngConfigMap.Put(uint32(0), conf); err != nil {
		return 0, fmt.Errorf("update ingress: write settings: %w", err)
	}
	if err := in.tabs.Flip(g); err != nil {
		return 0, fmt.Errorf("update ingress: %w", err)
	}
	if err := in.resetCounters(len(cfg.Chains)); err != nil {
		return prev, fmt.Errorf("update ingress: %w", err)
	}
	return prev, nil
}

// Per-flow setup limits (bpf/lib/ingress.h).
const (
	// VariantSlots is ING_VARIANT_SLOTS: pool variants per generation.
	VariantSlots = 1024
	// MaxVariants is ING_MAX_VARIANTS: instances of one pool.
	MaxVariants = 8
)

// poolSlot is where a pool chain's variants live and its pool id.
type poolSlot struct{ id, base uint32 }

// poolSlots gives each pool chain of cfg (by index) its variant base and
// its pool id: a hash of the chain's name, pool and variants, so a flow
// entry installed for one variant set never applies to another (an
// applied change makes old entries unreachable; they age out of the
// LRU). Never 0 (0: not a pool chain).
func poolSlots(cfg Config) map[int]poolSlot {
	out := map[int]poolSlot{}
	base := uint32(0)
	for i, c := range cfg.Chains {
		if c.Pool == nil {
			continue
		}
		h := fnv.New32a()
		fmt.Fprintf(h, "%s %s %v", c.Name, c.Pool.Name, c.Pool.Variants)
		id := h.Sum32()
		if id == 0 {
			id = 1
		}
		out[i] = poolSlot{id: id, base: base}
		base += uint32(len(c.Pool.Variants))
	}
	return out
}

// PoolID is the pool id the ingress gives chain i of cfg (0: not a pool
// chain): the flow-setup loop keys its flows with it.
func PoolID(cfg Config, i int) uint32 { return poolSlots(cfg)[i].id }

// Revert switches packets back to generation g (Update's prev), whose
// tables are intact until the next Update.
func (in *Ingress) Revert(g int) error { return in.tabs.Flip(g) }

const (
	modeEncap  = 1 // ING_MODE_ENCAP
	modeInsert = 2 // ING_MODE_INSERT
)

func hopLimit(s Settings, dev string) uint8 {
	if h, ok := s.HopLimit4[dev]; ok && h > 0 {
		return h
	}
	return 64 // the kernel's default net.ipv6.conf.*.hop_limit
}

func (in *Ingress) resetCounters(n int) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("reset chain counters: %w", err)
	}
	zero := make([]ingressProgSidCounter, ncpu)
	for i := 0; i < n && i < maxChains; i++ {
		if err := in.objs.IngCounters.Put(uint32(i), zero); err != nil {
			return fmt.Errorf("reset chain counters: %w", err)
		}
	}
	return nil
}

// maxChains is ING_MAX_CHAINS (bpf/lib/ingress.h).
const maxChains = 20000

// Hash is the hash of the config Update last wrote.
func (in *Ingress) Hash() ([32]byte, error) {
	var conf ingressProgIngConfig
	if err := in.objs.IngConfigMap.Lookup(uint32(0), &conf); err != nil {
		return [32]byte{}, fmt.Errorf("read ingress settings: %w", err)
	}
	return conf.Hash, nil
}

// TunSrc is the outer source the program writes.
func (in *Ingress) TunSrc() (netip.Addr, error) {
	var conf ingressProgIngConfig
	if err := in.objs.IngConfigMap.Lookup(uint32(0), &conf); err != nil {
		return netip.Addr{}, fmt.Errorf("read ingress settings: %w", err)
	}
	return netip.AddrFrom16(conf.Tunsrc.In6U.U6Addr8), nil
}

// Attach attaches the tc program to ifindex's tcx ingress in the current
// network namespace (inside netns.NS.Do), taking over a link pinned at
// pin ("" : not pinned) with an atomic program swap. It goes right
// before srchain's End program if that runs there (End ends the tcx
// chain with TC_ACT_OK for packets not to its SIDs), else last: a
// firewall at the head filters first, as it does before the kernel's
// encap.
func (in *Ingress) Attach(ifindex int, pin string) (link.Link, error) {
	before, err := programBefore(ifindex, endProgName)
	if err != nil {
		return nil, fmt.Errorf("attach ingress: %w", err)
	}
	l, _, err := bpfrt.Attach(bpfrt.Hook{Ifindex: ifindex}, in.objs.SrchainIngress, bpfrt.AttachOptions{Pin: pin, Before: before})
	if err != nil {
		return nil, fmt.Errorf("attach ingress: %w", err)
	}
	return l, nil
}

// endProgName is the kernel name of srchain's tc End program
// (internal/kinds/end).
const endProgName = "srchain_end"

// programBefore returns the id of the first program called name on
// ifindex's tcx ingress (0: none).
func programBefore(ifindex int, name string) (ebpf.ProgramID, error) {
	atts, err := bpfrt.TCXIngress(ifindex)
	if err != nil {
		return 0, err
	}
	for _, a := range atts {
		p, err := ebpf.NewProgramFromID(a.Program)
		if err != nil {
			continue
		}
		info, err := p.Info()
		p.Close()
		if err == nil && info.Name == name {
			return a.Program, nil
		}
	}
	return 0, nil
}

// AttachXDP attaches the XDP twin (loaded with Options.XDP); the tc
// program must run on the same interface (XDP passes what it does not
// finish). Native XDP_REDIRECT into a veth needs GRO on the peer.
func (in *Ingress) AttachXDP(ifindex int, pin string) (link.Link, error) {
	if in.objs.SrchainIngressXdp == nil {
		return nil, fmt.Errorf("attach ingress xdp: loaded without Options.XDP: %w", ErrInvalid)
	}
	if err := in.RecordMAC(ifindex); err != nil {
		return nil, fmt.Errorf("attach ingress xdp: %w", err)
	}
	l, _, err := bpfrt.Attach(bpfrt.Hook{Ifindex: ifindex, XDP: true}, in.objs.SrchainIngressXdp, bpfrt.AttachOptions{Pin: pin})
	if err != nil {
		return nil, fmt.Errorf("attach ingress xdp: %w", err)
	}
	return l, nil
}

// macSlots is ING_MAC_SLOTS (bpf/lib/ingress.h).
const macSlots = 4096

// RecordMAC writes ifindex's Ethernet address (in the current network
// namespace) into ing_macs: XDP runs before the stack sets
// skb->pkt_type, and the program leaves other hosts' frames to tc.
func (in *Ingress) RecordMAC(ifindex int) error {
	iface, err := net.InterfaceByIndex(ifindex)
	if err != nil {
		return fmt.Errorf("record mac: %w", err)
	}
	// struct ing_mac: the address, 2 bytes of padding, the ifindex the
	// slot holds (slots are ifindex modulo macSlots).
	var mac [12]byte
	if copy(mac[:6], iface.HardwareAddr) != 6 {
		return fmt.Errorf("record mac: interface %s has no Ethernet address: %w", iface.Name, ErrInvalid)
	}
	binary.NativeEndian.PutUint32(mac[8:], uint32(ifindex))
	if err := in.objs.IngMacs.Put(uint32(ifindex)%macSlots, mac); err != nil {
		return fmt.Errorf("record mac of %s: %w", iface.Name, err)
	}
	return nil
}

// ChainCount is the traffic one chain received at this ingress.
type ChainCount struct {
	Packets, Bytes uint64
}

// ChainCounts reads the per-chain counters of the first n chains
// (Config.Chains order), summed over CPUs.
func (in *Ingress) ChainCounts(n int) ([]ChainCount, error) {
	return readChainCounts(in.objs.IngCounters, n)
}

func readChainCounts(m *ebpf.Map, n int) ([]ChainCount, error) {
	out := make([]ChainCount, 0, n)
	for i := 0; i < n && i < maxChains; i++ {
		var per []ingressProgSidCounter
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read chain counter %d: %w", i, err)
		}
		var c ChainCount
		for _, x := range per {
			c.Packets += x.Packets
			c.Bytes += x.Bytes
		}
		out = append(out, c)
	}
	return out, nil
}

// Outcome names of ing_outcomes slots (bpf/lib/ingress.h ING_OUT_*).
var outcomeNames = []string{"redirect", "stack", "xdp-pass", "no-chain", "not-ours", "flow-setup", "kernel", "too-big"}

// Outcomes reads what happened to the packets the program looked at.
func (in *Ingress) Outcomes() (map[string]uint64, error) { return readOutcomes(in.objs.IngOutcomes) }

func readOutcomes(m *ebpf.Map) (map[string]uint64, error) {
	out := map[string]uint64{}
	for i, name := range outcomeNames {
		v, err := bpfrt.SumPerCPU(m, uint32(i))
		if err != nil {
			return nil, fmt.Errorf("read ingress outcomes: %w", err)
		}
		out[name] = v
	}
	return out, nil
}

// DropCounts reads the drop reasons.
func (in *Ingress) DropCounts() (drop.Counts, error) {
	return bpfrt.ReadDropCounts(in.objs.DropCounters)
}

// Unpin removes the pinned maps under dir (links pinned there by the
// driver are detached by it first).
func Unpin(dir string) error {
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin ingress: %w", err)
	}
	return nil
}
