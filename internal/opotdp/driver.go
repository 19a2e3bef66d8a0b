package opotdp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
)

func init() { kind.RegisterDriver(state.ProgramOPoT, Driver{}) }

// Driver makes a node's state.Program of kind state.ProgramOPoT real
// (docs/opot.md "Deployment"): it loads bpf/opot.c with its maps pinned
// under PinDir(ns), writes the node's chains and its own parameters of
// each profile slot (from Node.Secrets) into them, and attaches the
// stages of the node's roles: the headend at tcx egress of Config.Egress,
// the transit and verifier at tcx ingress of Config.Ingress, in front of
// srchain's End program when the node runs one.
//
// Profiles change only when the secrets do (the lab keeps a chain's keys
// across applies: internal/compile KeepOPoTKeys); a slot whose parameters change
// starts again at sequence number 1 with an empty anti-replay window,
// one whose parameters stay keeps its counter and window.
type Driver struct{}

// Stage names: the pinned link of a stage at a hook is
// PinDir/<stage>_<hook> (bpfrt.Hook.String).
const (
	stageHeadend = "headend"
	stageTransit = "transit"
	stageVerify  = "verify"
)

// servesSIDs reports whether a program, by its kernel name (15 bytes),
// ends the tcx chain for SIDs it serves, so an OPoT stage must run
// before it: srchain's End and the SR proxy's programs
// (srchain_proxy_sr, srchain_proxy_nf), which send the packet on to the
// next segment or to the legacy NF.
func servesSIDs(name string) bool {
	return name == "srchain_end" || strings.HasPrefix(name, "srchain_proxy_")
}

// PinDir is where the driver pins the OPoT maps and links of ns.
func PinDir(ns *netns.NS) string { return kind.PinDir(ns) + "/opot" }

// mapNames are the maps pinned by name under PinDir.
var mapNames = []string{"opot_chains", "opot_egress", "opot_chain_gen", "opot_node_params", "opot_seqs", "opot_windows", "opot_stats", "opot_events", "drop_counters", "sid_counters"}

func isLinkPin(name string) bool {
	for _, st := range []string{stageHeadend, stageTransit, stageVerify} {
		if strings.HasPrefix(name, st+"_") {
			return true
		}
	}
	return false
}

// parseLinkPin is the stage and tc hook of a link pin's name (linkPin).
func parseLinkPin(name string) (string, bpfrt.Hook, bool) {
	for _, st := range []string{stageHeadend, stageTransit, stageVerify} {
		rest, ok := strings.CutPrefix(name, st+"_")
		if !ok {
			continue
		}
		for _, hk := range []struct {
			prefix string
			egress bool
		}{{"tcx_ingress_", false}, {"tcx_egress_", true}} {
			if n, ok := strings.CutPrefix(rest, hk.prefix); ok {
				idx, err := strconv.Atoi(n)
				if err != nil || idx <= 0 {
					return "", bpfrt.Hook{}, false
				}
				return st, bpfrt.Hook{Ifindex: idx, Egress: hk.egress}, true
			}
		}
	}
	return "", bpfrt.Hook{}, false
}

// ConfigFromProgram decodes the program's typed config.
func ConfigFromProgram(p state.Program) (state.OPoTConfig, error) {
	var cfg state.OPoTConfig
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		return cfg, fmt.Errorf("decode opot config: %w", err)
	}
	return cfg, nil
}

// desired is what the node's maps must hold.
type desired struct {
	chains map[ChainKey]Chain
	params map[Key]Params
	// hooks: the stages to attach, stage -> interfaces.
	stages map[string][]string
}

func roleOf(name string) (opot.Role, error) {
	switch name {
	case state.OPoTHeadend:
		return opot.RoleHeadend, nil
	case state.OPoTTransit:
		return opot.RoleTransit, nil
	case state.OPoTVerifier:
		return opot.RoleVerifier, nil
	}
	return 0, fmt.Errorf("opot role %q: %w", name, ErrConfig)
}

// ErrConfig: the program's config or the node's secrets do not fit.
var ErrConfig = errors.New("bad opot config")

// want builds the desired map contents from the config and the node's
// secrets. A chain without the secret of a slot gets no parameters for
// it (its packets of that slot are dropped at the verifier); a chain
// without any is an error.
//
// Each chain gets a node-local index (Chain.Idx) below
// opot.MaxChainsPerNode, the key of its slots in the parameter, counter
// and window arrays: a chain already in have (same SID pair and profile)
// keeps its index, so its counters and windows stay; the others take the
// lowest free ones.
func want(node state.Node, cfg state.OPoTConfig, have map[ChainKey]Chain) (desired, error) {
	d := desired{chains: map[ChainKey]Chain{}, params: map[Key]Params{}, stages: map[string][]string{}}
	if len(cfg.Chains) > opot.MaxChainsPerNode {
		return d, fmt.Errorf("%w: %d opot chains on the node, at most %d", ErrConfig, len(cfg.Chains), opot.MaxChainsPerNode)
	}
	idx := map[ChainKey]uint32{}
	used := map[uint32]bool{}
	for _, ch := range cfg.Chains {
		k := ChainKey{Last: ch.Last.As16()}
		if h, ok := have[k]; ok && h.Profile == ch.Profile && h.Idx < opot.MaxChainsPerNode && !used[h.Idx] {
			idx[k], used[h.Idx] = h.Idx, true
		}
	}
	next := uint32(0)
	for _, ch := range cfg.Chains {
		k := ChainKey{Last: ch.Last.As16()}
		if _, ok := idx[k]; ok {
			continue
		}
		for used[next] {
			next++
		}
		idx[k], used[next] = next, true
	}
	for _, ch := range cfg.Chains {
		role, err := roleOf(ch.Role)
		if err != nil {
			return d, err
		}
		if !ch.SID.Is6() || !ch.Last.Is6() || ch.Profile == 0 || ch.Slot > 1 {
			return d, fmt.Errorf("opot chain %s: %w: sid, last SID, profile or slot", ch.Name, ErrConfig)
		}
		k := ChainKey{Last: ch.Last.As16()}
		if _, dup := d.chains[k]; dup {
			return d, fmt.Errorf("opot chain %s: %w: two entries with egress SID %s (a node has one role in a chain)", ch.Name, ErrConfig, ch.Last)
		}
		c := Chain{Profile: ch.Profile, Slot: uint32(ch.Slot), Role: uint32(role), Idx: idx[k], Sid: ch.SID.As16()}
		if ch.InEnd {
			if role != opot.RoleTransit {
				return d, fmt.Errorf("opot chain %s: %w: only a transit entry can be in the end program", ch.Name, ErrConfig)
			}
			c.Flags = ChainInEnd
		}
		d.chains[k] = c
		found := 0
		for slot := range state.OPoTSlots {
			name := state.OPoTSecretName(ch.Name, int(ch.Profile), slot)
			i := slices.IndexFunc(node.Secrets, func(s state.Secret) bool { return s.Name == name })
			if i < 0 {
				continue
			}
			var n opot.NodeParams
			if err := n.UnmarshalBinary(node.Secrets[i].Value); err != nil {
				// Never the value: only which secret.
				return d, fmt.Errorf("opot chain %s: secret %s: %w", ch.Name, name, err)
			}
			if n.Role != role {
				return d, fmt.Errorf("opot chain %s: secret %s is for a %s, the node is the chain's %s: %w", ch.Name, name, n.Role, ch.Role, ErrConfig)
			}
			d.params[Key{Index: idx[k], Slot: uint32(slot)}] = FromNode(n)
			found++
		}
		if found == 0 {
			return d, fmt.Errorf("opot chain %s: no secret %s: %w", ch.Name, state.OPoTSecretName(ch.Name, int(ch.Profile), 0), ErrConfig)
		}
		var stage string
		var ifs []string
		switch {
		case ch.InEnd:
			continue // srchain's End program updates the proof: no stage
		case role == opot.RoleHeadend:
			stage, ifs = stageHeadend, cfg.Egress
		case role == opot.RoleTransit:
			stage, ifs = stageTransit, cfg.Ingress
		default:
			stage, ifs = stageVerify, cfg.Ingress
		}
		if len(ifs) == 0 {
			return d, fmt.Errorf("opot chain %s: %w: no interfaces for the %s stage", ch.Name, ErrConfig, stage)
		}
		d.stages[stage] = ifs
	}
	return d, nil
}

// objs is the loaded collection with the pinned maps.
type objs struct {
	Objects
	// recreated: the pinned maps were replaced by new ones (another
	// layout); programs attached before still hold the old ones and
	// must be swapped for these.
	recreated bool
}

// load loads the programs with their maps pinned under dir and the node
// pipeline's maps (pipe: the XDP stage hands packets on through them,
// and the tc stages read its cookie to see what the XDP stage did).
func load(dir string, pipe map[string]*ebpf.Map) (*objs, error) {
	spec, err := LoadSpec()
	if err != nil {
		return nil, fmt.Errorf("load opot spec: %w", err)
	}
	recreated := false
	for _, name := range mapNames {
		if ms, ok := spec.Maps[name]; ok {
			ms.Pinning = ebpf.PinByName
		}
	}
	var o objs
	copts := &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}, MapReplacements: pipe}
	err = spec.LoadAndAssign(&o.Objects, copts)
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		// Maps pinned by an older build with another layout (the
		// per-slot state moved from hash maps to arrays, chains are
		// keyed by their last SID): their state (sequence numbers,
		// windows, counters) cannot be carried over. Start afresh; the
		// headend and the verifier restart together, so at worst
		// packets in flight are dropped as stale.
		for _, name := range mapNames {
			if rerr := os.Remove(dir + "/" + name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return nil, fmt.Errorf("load opot programs: replace old map pins: %w", rerr)
			}
		}
		err = spec.LoadAndAssign(&o.Objects, copts)
		recreated = true
	}
	if err != nil {
		return nil, fmt.Errorf("load opot programs: %w", err)
	}
	o.recreated = recreated
	return &o, nil
}

func (o *objs) prog(stage string) *ebpf.Program { return stageProg(&o.Objects, stage) }

// stageProg is o's program of stage.
func stageProg(o *Objects, stage string) *ebpf.Program {
	switch stage {
	case stageHeadend:
		return o.SrchainOpotHeadend
	case stageTransit:
		return o.SrchainOpotTransit
	}
	return o.SrchainOpotVerify
}

func hookOf(stage string, ifindex int) bpfrt.Hook {
	return bpfrt.Hook{Ifindex: ifindex, Egress: stage == stageHeadend}
}

func linkPin(dir, stage string, h bpfrt.Hook) string { return dir + "/" + stage + "_" + h.String() }

// journal collects the undo steps of one Apply, run in reverse.
type journal []func() error

func (j journal) undo() error {
	var errs []error
	for i := len(j) - 1; i >= 0; i-- {
		errs = append(errs, j[i]())
	}
	return errors.Join(errs...)
}

// Apply is idempotent: entries and links already as desired are left
// alone (nil undo). Otherwise the undo puts back the map entries this
// call changed and detaches the links it attached; a first Apply's undo
// removes everything. On error nothing of this call is left.
func (Driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (undo func() error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	d, err := want(node, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("opot: %w", err)
	}
	ew, err := egressWant(cfg)
	if err != nil {
		return nil, fmt.Errorf("opot: %w", err)
	}
	idx, err := stageIfindexes(ns, d)
	if err != nil {
		return nil, fmt.Errorf("opot: %w", err)
	}
	dir := PinDir(ns)
	_, statErr := os.Stat(dir + "/opot_chains")
	fresh := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opot: create pin dir: %w", err)
	}
	release, err := bpfrt.LockDir(dir, bpfrt.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("opot: %w", err)
	}
	defer release()
	var j journal
	fail := func(err error) (func() error, error) {
		if fresh {
			err = errors.Join(err, removeRules(ns), removePins(dir))
		} else if uerr := j.undo(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
		}
		return nil, fmt.Errorf("opot: %w", err)
	}
	if err := ns.Do(func() error {
		_, err := bpfrt.ClaimPinDir(dir, isLinkPin)
		return err
	}); err != nil {
		return fail(err)
	}
	pipe, err := pipeline.OpenMaps(pipeline.NodeDir(ns))
	if err != nil {
		return fail(err)
	}
	defer pipe.Close()
	o, err := load(dir, pipe.Replacements())
	if err != nil {
		return fail(err)
	}
	defer o.Close()
	have, err := dumpChains(o.OpotChains)
	if err != nil {
		return fail(err)
	}
	if d, err = want(node, cfg, have); err != nil {
		return fail(err)
	}
	// Stages are attached before the entries change and detached after:
	// an entry coming back from the End (OPOT_CHAIN_IN_END) to a stage
	// always has one of them updating its proofs. An entry going into
	// the End is written unmarked and keeps the stages that did its
	// transit until Finish marks it, once the End reads these maps
	// (entering). With an XDP stage the tc stages must read this node's
	// pipeline cookie, and after new maps every stage must read them:
	// attached links are then swapped for the programs just loaded.
	d, held := entering(d, have)
	swap := p.XDP || o.recreated
	if err := attachStages(ctx, ns, dir, o, d, idx, swap, &j); err != nil {
		return fail(err)
	}
	if err := syncXDPStage(ns, o, p.XDP, held, o.recreated, &j); err != nil {
		return fail(err)
	}
	if p.XDP {
		if err := joinXDPStage(ns, &j); err != nil {
			return fail(err)
		}
	}
	if err := syncMaps(dir, &o.Objects, d, &j); err != nil {
		return fail(err)
	}
	// The egress prefixes after their chains, the rules after both: a
	// rule ahead of the stage that marks would drop legitimate packets.
	if err := syncEgress(dir, o.OpotEgress, ew, &j); err != nil {
		return fail(err)
	}
	if err := syncRules(ns, ew, &j); err != nil {
		return fail(err)
	}
	if err := detachStale(ns, dir, d, idx, held, &j); err != nil {
		return fail(err)
	}
	switch {
	case fresh:
		return func() error { return errors.Join(removeRules(ns), removePins(dir)) }, nil
	case len(j) > 0:
		return j.undo, nil
	}
	return nil, nil
}

// stageIfindexes resolves the interfaces of d's stages.
func stageIfindexes(ns *netns.NS, d desired) (map[string]int, error) {
	idx := map[string]int{}
	for _, ifs := range d.stages {
		got, err := kind.Ifindexes(ns, ifs)
		if err != nil {
			return nil, err
		}
		for i, n := range ifs {
			idx[n] = got[i]
		}
	}
	return idx, nil
}

// entering returns d with the mark taken off the entries that go into
// the End or an SR proxy on this apply (InEnd, not marked in have), and
// whether there are any. Marked at once, such an entry would be left by
// its stage before the program serving its SID reads these maps (that
// program is applied after this one): its packets would get no transit
// update and fail at the verifier. Unmarked, the stage goes on updating
// them and the End, reading the maps, leaves them alone; Finish marks
// them once every program of the node is in place, and one map write
// per chain moves its transit.
func entering(d desired, have map[ChainKey]Chain) (desired, bool) {
	out := d
	out.chains = maps.Clone(d.chains)
	held := false
	for k, v := range d.chains {
		if v.Flags&ChainInEnd != 0 && have[k].Flags&ChainInEnd == 0 {
			v.Flags &^= ChainInEnd
			out.chains[k] = v
			held = true
		}
	}
	return out, held
}

// Finish marks the entries Apply wrote unmarked (entering): the
// programs serving their SIDs were applied after this one and read the
// maps now. Then the stages no entry needs any more are detached, the
// XDP stage unpinned when the node has none. Its undo unmarks them and
// attaches those stages again.
func (Driver) Finish(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	dir := PinDir(ns)
	release, err := bpfrt.LockDir(dir, bpfrt.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("opot: %w", err)
	}
	defer release()
	var j journal
	fail := func(err error) (func() error, error) {
		if uerr := j.undo(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
		}
		return nil, fmt.Errorf("opot: finish: %w", err)
	}
	cm, err := ebpf.LoadPinnedMap(dir+"/opot_chains", nil)
	if err != nil {
		return fail(err)
	}
	defer cm.Close()
	gm, err := ebpf.LoadPinnedMap(dir+"/opot_chain_gen", nil)
	if err != nil {
		return fail(err)
	}
	defer gm.Close()
	have, err := dumpChains(cm)
	if err != nil {
		return fail(err)
	}
	d, err := want(node, cfg, have)
	if err != nil {
		return fail(err)
	}
	for _, k := range sortedChainKeys(d.chains) {
		v := d.chains[k]
		old, ok := have[k]
		unmarked := v
		unmarked.Flags &^= ChainInEnd
		if !ok || old == v || old != unmarked {
			continue // not one Apply held back
		}
		if len(j) == 0 {
			// Runs last on undo: the stages' cached lookups see the
			// entries put back.
			j = append(j, func() error { return touchPinned(dir) })
		}
		if err := cm.Put(&k, &v); err != nil {
			return fail(fmt.Errorf("mark opot chain: %w", err))
		}
		j = append(j, restore(dir, "opot_chains", k, old))
	}
	if len(j) > 0 {
		if err := TouchChains(gm); err != nil {
			return fail(err)
		}
	}
	idx, err := stageIfindexes(ns, d)
	if err != nil {
		return fail(err)
	}
	if err := detachStale(ns, dir, d, idx, false, &j); err != nil {
		return fail(err)
	}
	if !p.XDP { // at XDP, Apply pinned the stage already
		if err := syncXDPStage(ns, nil, false, false, false, &j); err != nil {
			return fail(err)
		}
	}
	if len(j) > 0 {
		return j.undo, nil
	}
	return nil, nil
}

// syncMaps makes the pinned maps hold d, journaling what it changes.
func syncMaps(dir string, o *Objects, d desired, j *journal) error {
	// Chains: put the desired, delete the others, then a new generation
	// for the stages' cached lookups (also when an undo puts entries
	// back: that journal entry comes first, so it runs last).
	have, err := dumpChains(o.OpotChains)
	if err != nil {
		return err
	}
	touched := false
	touch := func() {
		if !touched {
			touched = true
			*j = append(*j, func() error { return touchPinned(dir) })
		}
	}
	for k, v := range d.chains {
		old, ok := have[k]
		if ok && old == v {
			continue
		}
		touch()
		if err := o.OpotChains.Put(&k, &v); err != nil {
			return fmt.Errorf("write opot chain: %w", err)
		}
		*j = append(*j, restore(dir, "opot_chains", k, old))
	}
	for k, old := range have {
		if _, ok := d.chains[k]; ok {
			continue
		}
		touch()
		if err := o.OpotChains.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete opot chain: %w", err)
		}
		*j = append(*j, restore(dir, "opot_chains", k, old))
	}
	var gen uint64
	if err := o.OpotChainGen.Lookup(uint32(0), &gen); err != nil {
		return fmt.Errorf("read opot chain generation: %w", err)
	}
	// gen 0 (maps pinned by a build without it) caches nothing: start.
	if touched || gen == 0 {
		if err := TouchChains(o.OpotChainGen); err != nil {
			return err
		}
	}
	// Parameters: a slot whose parameters change starts afresh (its
	// sequence counter and window belong to the old profile). The maps
	// are arrays: a slot no chain uses holds zeros.
	params, err := dumpParams(o.OpotNodeParams)
	if err != nil {
		return err
	}
	for k, v := range d.params {
		old, ok := params[k]
		fresh := !ok || old != v
		if fresh {
			if err := o.OpotNodeParams.Put(k.Array(), &v); err != nil {
				return fmt.Errorf("write opot parameters: %w", err)
			}
			*j = append(*j, restore(dir, "opot_node_params", k.Array(), old))
		}
		switch opot.Role(v.Role) {
		case opot.RoleHeadend:
			if err := resetValue(o.OpotSeqs, k, uint64(0), fresh); err != nil {
				return err
			}
		case opot.RoleVerifier:
			if err := resetValue(o.OpotWindows, k, Window{}, fresh); err != nil {
				return err
			}
		}
	}
	for k, old := range params {
		if _, ok := d.params[k]; ok {
			continue
		}
		if err := o.OpotNodeParams.Put(k.Array(), &Params{}); err != nil {
			return fmt.Errorf("clear opot parameters: %w", err)
		}
		*j = append(*j, restore(dir, "opot_node_params", k.Array(), old))
		if err := o.OpotSeqs.Put(k.Array(), uint64(0)); err != nil {
			return fmt.Errorf("clear opot state: %w", err)
		}
		if err := o.OpotWindows.Put(k.Array(), &Window{}); err != nil {
			return fmt.Errorf("clear opot state: %w", err)
		}
	}
	return nil
}

// resetValue puts zero at k of the array m when reset is set.
// The undo of a reset cannot give back a window or counter that packets
// moved since: it leaves them (the old parameters it restores start over
// from what it finds, which the verifier sees as stale at worst).
func resetValue[V any](m *ebpf.Map, k Key, zero V, reset bool) error {
	if !reset {
		return nil
	}
	if err := m.Put(k.Array(), &zero); err != nil {
		return fmt.Errorf("reset opot %s: %w", m.String(), err)
	}
	return nil
}

// restore is the undo of a write to m at k: it puts old back (for a
// hash map without old, it deletes k). It opens m's pin again when run:
// Apply closes its handles when it returns.
func restore[K, V comparable](dir, name string, k K, old V) func() error {
	return func() error {
		pm, err := ebpf.LoadPinnedMap(dir+"/"+name, nil)
		if err != nil {
			return fmt.Errorf("undo opot map write: %w", err)
		}
		defer pm.Close()
		var zero V
		if old != zero || pm.Type() == ebpf.Array {
			return pm.Put(&k, &old)
		}
		if err := pm.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		return nil
	}
}

func dumpChains(m *ebpf.Map) (map[ChainKey]Chain, error) {
	out := map[ChainKey]Chain{}
	var k ChainKey
	var v Chain
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read opot chains: %w", err)
	}
	return out, nil
}

// dumpParams reads the parameter array: the slots in use (role set).
func dumpParams(m *ebpf.Map) (map[Key]Params, error) {
	out := map[Key]Params{}
	var k uint32
	var v Params
	it := m.Iterate()
	for it.Next(&k, &v) {
		if v.Role != 0 {
			out[Key{Index: k / opot.Slots, Slot: k % opot.Slots}] = v
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read opot parameters: %w", err)
	}
	return out, nil
}

// attachStages attaches each desired stage where the kernel does not
// show its pinned link, and swaps the program of a link that runs
// another build's code (with swap, of every link: each takes the
// program just loaded).
func attachStages(ctx context.Context, ns *netns.NS, dir string, o *objs, d desired, idx map[string]int, swap bool, j *journal) error {
	for _, stage := range slices.Sorted(maps.Keys(d.stages)) {
		for _, ifn := range d.stages[stage] {
			if err := ctx.Err(); err != nil {
				return err
			}
			h := hookOf(stage, idx[ifn])
			pin := linkPin(dir, stage, h)
			// A link of another build (an upgraded srchain) runs
			// other code: swapped like the rest.
			ok, runs, _ := kind.LinkRuns(ns, pin, h, o.prog(stage))
			if ok && runs && !swap {
				continue
			}
			if err := attachStage(ns, o, stage, h, pin); err != nil {
				return fmt.Errorf("attach %s stage on %s: %w", stage, ifn, err)
			}
			switch {
			case !ok:
				*j = append(*j, func() error { return bpfrt.DetachPinned(pin) })
			case !runs:
				// A change, kept on undo: the old build's code is what
				// an upgrade replaces.
				*j = append(*j, func() error { return nil })
			}
		}
	}
	return nil
}

// attachStage attaches o's program of stage at h, its link pinned at pin.
func attachStage(ns *netns.NS, o *objs, stage string, h bpfrt.Hook, pin string) error {
	return ns.Do(func() error {
		opts := bpfrt.AttachOptions{Pin: pin}
		if !h.Egress {
			// In front of srchain's End or SR proxy (which end the tcx
			// chain for their SIDs); else last, after a firewall at the
			// head: a packet the firewall drops needs no proof.
			before, err := programBefore(h.Ifindex)
			if err != nil {
				return err
			}
			opts.Before = before
		}
		return bpfrt.AttachPinned(h, o.prog(stage), opts)
	})
}

// detachStale detaches the pinned stage links d does not want (with
// held, not the transit stage's: entries entering the End still need
// it). The undo attaches them again, with programs loaded afresh from
// the pins (an entry's proofs must not be left to no one when a later
// step fails).
func detachStale(ns *netns.NS, dir string, d desired, idx map[string]int, held bool, j *journal) error {
	want := map[string]bool{}
	for stage, ifs := range d.stages {
		for _, ifn := range ifs {
			want[linkPin(dir, stage, hookOf(stage, idx[ifn]))] = true
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read pin dir: %w", err)
	}
	for _, e := range ents {
		pin := dir + "/" + e.Name()
		if !isLinkPin(e.Name()) || want[pin] {
			continue
		}
		stage, h, ok := parseLinkPin(e.Name())
		if held && stage == stageTransit {
			continue
		}
		if err := bpfrt.DetachPinned(pin); err != nil {
			return err
		}
		if !ok {
			continue
		}
		*j = append(*j, func() error {
			pipe, err := pipeline.OpenMaps(pipeline.NodeDir(ns))
			if err != nil {
				return err
			}
			defer pipe.Close()
			o, err := load(dir, pipe.Replacements())
			if err != nil {
				return err
			}
			defer o.Close()
			return attachStage(ns, o, stage, h, pin)
		})
	}
	return nil
}

// syncXDPStage makes the node pipeline's OPoT stage (pinned for the
// pipeline driver, which runs after this one) follow xdp: the XDP stage
// program of o, or none (with held, a pinned one stays until Finish).
// Once pinned it stays (it reads the pinned maps, as the one just
// loaded would). o may be nil when xdp is not set.
func syncXDPStage(ns *netns.NS, o *objs, xdp, held, swap bool, j *journal) error {
	dir := pipeline.NodeDir(ns)
	have := pipeline.StagePinned(dir, pipeline.OPoT)
	switch {
	case xdp && have:
		// New maps: the pinned stage holds the old ones; or another
		// srchain build's code (a change, kept on undo).
		old := !pipeline.StageRuns(dir, pipeline.OPoT, o.SrchainOpotXdp)
		if !swap && !old {
			break
		}
		if err := pipeline.PinStage(dir, pipeline.OPoT, o.SrchainOpotXdp); err != nil {
			return fmt.Errorf("pin xdp stage: %w", err)
		}
		if old {
			*j = append(*j, func() error { return nil })
		}
	case xdp && !have:
		if err := pipeline.PinStage(dir, pipeline.OPoT, o.SrchainOpotXdp); err != nil {
			return fmt.Errorf("pin xdp stage: %w", err)
		}
		*j = append(*j, func() error { return pipeline.UnpinStage(dir, pipeline.OPoT) })
	case !xdp && have && !held:
		if err := pipeline.UnpinStage(dir, pipeline.OPoT); err != nil {
			return fmt.Errorf("unpin xdp stage: %w", err)
		}
	}
	return nil
}

// joinXDPStage puts the pinned XDP stage into the node's running
// pipeline, in front of the End, before the entries change. At XDP a
// stage runs once it is in the pipeline, which the pipeline driver
// switches only after the End was reloaded: an entry leaving the End
// for the stage would get no transit there until then.
func joinXDPStage(ns *netns.NS, j *journal) error {
	dir := pipeline.NodeDir(ns)
	stage, err := ebpf.LoadPinnedProgram(pipeline.StagePin(dir, pipeline.OPoT), nil)
	if err != nil {
		return fmt.Errorf("open xdp stage: %w", err)
	}
	defer stage.Close()
	u, err := pipeline.Join(dir, pipeline.OPoT, stage)
	if err != nil {
		return fmt.Errorf("join xdp pipeline: %w", err)
	}
	if u != nil {
		*j = append(*j, u)
	}
	return nil
}

// programBefore returns the id of the first program on ifindex's tcx
// ingress that servesSIDs (0: none), in the current namespace.
func programBefore(ifindex int) (ebpf.ProgramID, error) {
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
		if err == nil && servesSIDs(info.Name) {
			return a.Program, nil
		}
	}
	return 0, nil
}

// removePins detaches the pinned links and removes the directory.
func removePins(dir string) error { return bpfrt.RemovePinDir(dir, isLinkPin) }

// Check reports, changing nothing, what differs: not loaded, a chain or
// a slot's parameters missing or different, a stage not attached.
func (Driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	if _, err := want(node, cfg, nil); err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	ew, err := egressWant(cfg)
	if err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	dir := PinDir(ns)
	cm, err := ebpf.LoadPinnedMap(dir+"/opot_chains", nil)
	if err != nil {
		return []string{"program opot not loaded"}, nil
	}
	defer cm.Close()
	pm, err := ebpf.LoadPinnedMap(dir+"/opot_node_params", nil)
	if err != nil {
		return []string{"program opot not loaded"}, nil
	}
	defer pm.Close()
	var drift []string
	chains, err := dumpChains(cm)
	if err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	d, err := want(node, cfg, chains)
	if err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	names := map[uint32]string{}
	for _, ch := range cfg.Chains {
		names[ch.Profile] = ch.Name
	}
	byIdx := map[uint32]string{}
	for _, v := range d.chains {
		byIdx[v.Idx] = names[v.Profile]
	}
	for _, k := range sortedChainKeys(d.chains) {
		v := d.chains[k]
		if have, ok := chains[k]; !ok || have != v {
			drift = append(drift, fmt.Sprintf("opot chain %s: entry missing or different in opot_chains", names[v.Profile]))
		}
	}
	for k := range chains {
		if _, ok := d.chains[k]; !ok {
			drift = append(drift, "opot_chains holds a chain the node does not take part in")
			break
		}
	}
	egress := map[EgressKey]ChainKey{}
	if em, err := ebpf.LoadPinnedMap(dir+"/opot_egress", nil); err == nil {
		egress, err = dumpEgress(em)
		em.Close()
		if err != nil {
			return nil, fmt.Errorf("check opot: %w", err)
		}
	}
	if !maps.Equal(egress, ew) {
		drift = append(drift, "opot_egress does not hold the egress SID prefixes of the chains the node verifies")
	}
	rd, err := rulesDrift(ns, ew)
	if err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	drift = append(drift, rd...)
	params, err := dumpParams(pm)
	if err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	for _, k := range slices.SortedFunc(maps.Keys(d.params), func(a, b Key) int { return int(a.Array()) - int(b.Array()) }) {
		// Never print the parameters: say which slot differs.
		if have, ok := params[k]; !ok || have != d.params[k] {
			drift = append(drift, fmt.Sprintf("opot chain %s: parameters of slot %d missing or different", byIdx[k.Index], k.Slot))
		}
	}
	// This build's programs, only to compare code with what runs:
	// loaded over private maps (the tag leaves map references out), so
	// Check pins nothing.
	o, err := loadPrivate()
	if err != nil {
		return nil, fmt.Errorf("check opot: %w", err)
	}
	defer o.Close()
	for _, stage := range slices.Sorted(maps.Keys(d.stages)) {
		ifs := d.stages[stage]
		got, err := kind.Ifindexes(ns, ifs)
		if err != nil {
			return nil, fmt.Errorf("check opot: %w", err)
		}
		for i, ix := range got {
			h := hookOf(stage, ix)
			live, runs, err := kind.LinkRuns(ns, linkPin(dir, stage, h), h, stageProg(o, stage))
			switch {
			case err != nil || !live:
				drift = append(drift, fmt.Sprintf("program opot (%s stage) not attached on %s", stage, ifs[i]))
			case !runs:
				drift = append(drift, fmt.Sprintf("program opot (%s stage) on %s runs another build's code", stage, ifs[i]))
			}
		}
	}
	if p.XDP && !pipeline.StageRuns(pipeline.NodeDir(ns), pipeline.OPoT, o.SrchainOpotXdp) {
		drift = append(drift, "program opot: not the xdp pipeline's opot stage (or an older build's)")
	}
	return drift, nil
}

// loadPrivate loads this build's programs over maps of their own,
// pinned nowhere.
func loadPrivate() (*Objects, error) {
	spec, err := LoadSpec()
	if err != nil {
		return nil, fmt.Errorf("load opot spec: %w", err)
	}
	var o Objects
	if err := spec.LoadAndAssign(&o, nil); err != nil {
		return nil, bpfrt.WrapLoad("load opot programs", err)
	}
	return &o, nil
}

func sortedChainKeys(m map[ChainKey]Chain) []ChainKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b ChainKey) int {
		return cmpBytes(a.Last[:], b.Last[:])
	})
}

func cmpBytes(a, b []byte) int { return bytes.Compare(a, b) }

// Remove detaches the stages and removes the pins (keys included).
func (Driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := pipeline.UnpinStage(pipeline.NodeDir(ns), pipeline.OPoT); err != nil {
		return fmt.Errorf("opot: %w", err)
	}
	if err := removeRules(ns); err != nil {
		return fmt.Errorf("opot: %w", err)
	}
	return removePins(PinDir(ns))
}

// Counters, per chain the node takes part in: on the verifier
// "chain/NAME/verified" and "chain/NAME/drop/REASON" (opot-bypass, opot-verify,
// opot-replay, opot-stale, opot-no-tlv, opot-no-profile); on the headend
// "chain/NAME/drop/REASON" for packets it could not give a proof
// (opot-seq-exhausted, opot-no-profile...); then the node's drop
// reasons ("drop/REASON"). Zero drops are left out.
func (Driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	dir := PinDir(ns)
	sm, err := ebpf.LoadPinnedMap(dir+"/opot_stats", nil)
	if err != nil {
		return nil, fmt.Errorf("read opot counters: %w", err)
	}
	defer sm.Close()
	cm, err := ebpf.LoadPinnedMap(dir+"/opot_chains", nil)
	if err != nil {
		return nil, fmt.Errorf("read opot counters: %w", err)
	}
	defer cm.Close()
	chains, err := dumpChains(cm)
	if err != nil {
		return nil, err
	}
	var out []kind.Counter
	for _, ch := range cfg.Chains {
		c, ok := chains[ChainKey{Last: ch.Last.As16()}]
		if !ok || c.Profile != ch.Profile {
			continue
		}
		stats, err := readStats(sm, c.Idx)
		if err != nil {
			return nil, err
		}
		pre := "chain/" + ch.Name + "/"
		if ch.Role == state.OPoTVerifier {
			out = append(out, kind.Counter{Name: pre + "verified", Value: stats[drop.None]})
		}
		for r := drop.Reason(1); r < drop.Max; r++ {
			if v := stats[r]; v != 0 {
				out = append(out, kind.Counter{Name: pre + "drop/" + r.String(), Value: v})
			}
		}
	}
	dm, err := ebpf.LoadPinnedMap(dir+"/drop_counters", nil)
	if err != nil {
		return nil, fmt.Errorf("read opot counters: %w", err)
	}
	defer dm.Close()
	drops, err := bpfrt.ReadDropCounts(dm)
	if err != nil {
		return nil, err
	}
	for i, v := range drops {
		if v != 0 {
			out = append(out, kind.Counter{Name: "drop/" + drop.Reason(i).String(), Value: v})
		}
	}
	return out, nil
}

// readStats returns the verdict counters of the chain at index idx,
// summed over CPUs, by reason.
func readStats(m *ebpf.Map, idx uint32) ([drop.Max]uint64, error) {
	var out [drop.Max]uint64
	for r := range drop.Max {
		var per []uint64
		if err := m.Lookup(StatIndex(idx, r), &per); err != nil {
			return out, fmt.Errorf("read opot counters: %w", err)
		}
		for _, v := range per {
			out[r] += v
		}
	}
	return out, nil
}

// StatIndex is the opot_stats key of a chain's counter of reason r
// (bpf/lib/opot_dp.h opot_stat_index).
func StatIndex(idx uint32, r drop.Reason) uint32 { return idx*uint32(drop.Max) + uint32(r) }

// Events drains the verifier's drop events (the opot_events ring) of the
// node: each event is returned once. An event names the chain, the
// profile slot, the drop reason and, for a replay or a stale packet (a
// valid proof), its sequence number.
func (Driver) Events(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	names := map[uint32]string{}
	for _, ch := range cfg.Chains {
		names[ch.Profile] = ch.Name
	}
	m, err := ebpf.LoadPinnedMap(PinDir(ns)+"/opot_events", nil)
	if err != nil {
		return nil, fmt.Errorf("read opot events: %w", err)
	}
	defer m.Close()
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, fmt.Errorf("read opot events: %w", err)
	}
	defer rd.Close()
	rd.SetDeadline(time.Now())
	var out []kind.Event
	for {
		rec, err := rd.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrClosed) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read opot events: %w", err)
		}
		ev, err := ParseEvent(rec.RawSample)
		if err != nil {
			return out, err
		}
		name := names[ev.Profile]
		if name == "" {
			name = fmt.Sprintf("profile-%d", ev.Profile)
		}
		e := kind.Event{Subject: "chain/" + name, Reason: ev.Reason.String(),
			Detail: fmt.Sprintf("slot %d", ev.Slot)}
		if ev.Seq != 0 {
			e.Detail += fmt.Sprintf(" seq %d", ev.Seq)
		}
		out = append(out, e)
	}
	return out, nil
}

// Summary is one line per chain the node verifies, for `srchain demo`.
func (dr Driver) Summary(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	cs, err := dr.Counters(ctx, ns, node, p)
	if err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range cfg.Chains {
		if ch.Role != state.OPoTVerifier {
			continue
		}
		pre := "chain/" + ch.Name + "/"
		var verified uint64
		var drops []string
		for _, c := range cs {
			switch {
			case c.Name == pre+"verified":
				verified = c.Value
			case strings.HasPrefix(c.Name, pre+"drop/"):
				drops = append(drops, fmt.Sprintf("%s %d", strings.TrimPrefix(c.Name, pre+"drop/"), c.Value))
			}
		}
		line := fmt.Sprintf("opot chain %s: verified at %s: %d", ch.Name, node.Name, verified)
		if len(drops) == 0 {
			line += ", none dropped"
		} else {
			line += ", dropped: " + strings.Join(drops, ", ")
		}
		out = append(out, line)
	}
	return out, nil
}

// TouchChains starts a new generation of the chain entries in m (the
// opot_chain_gen map): the stages' cached lookups of opot_chains
// (bpf/lib/opot_dp.h opot_chain_cache) no longer hold. Whoever writes
// opot_chains calls it afterwards.
func TouchChains(m *ebpf.Map) error {
	var g uint64
	if err := m.Lookup(uint32(0), &g); err != nil {
		return fmt.Errorf("read opot chain generation: %w", err)
	}
	if err := m.Put(uint32(0), g+1); err != nil {
		return fmt.Errorf("write opot chain generation: %w", err)
	}
	return nil
}

// touchPinned is TouchChains on the generation pinned under dir.
func touchPinned(dir string) error {
	m, err := ebpf.LoadPinnedMap(dir+"/opot_chain_gen", nil)
	if err != nil {
		return fmt.Errorf("open opot chain generation: %w", err)
	}
	defer m.Close()
	return TouchChains(m)
}

// ErrNotLoaded: the node's OPoT maps are not pinned (the OPoT driver has
// not run there).
var ErrNotLoaded = errors.New("opot maps not loaded")

// HeadendMaps opens the node's pinned OPoT maps that an eBPF headend
// loads in place of its own (ebpf.CollectionOptions.MapReplacements), so
// it takes its sequence numbers from the same counters as the tc headend
// stage and is configured by this driver alone. The caller closes them
// once loaded. The OPoT program is compiled before the ingress program of
// a node (internal/compile), so its driver has pinned them by then.
func HeadendMaps(ns *netns.NS) (map[string]*ebpf.Map, error) {
	return openPinned(ns, HeadendMapsOf(&Objects{}))
}

// EndMaps opens the node's pinned OPoT maps srchain's End programs
// (datapath.EndOptions.OPoT) and SR proxies (proxydp.Options.OPoT) load
// to do the transit of the chain entries marked ChainInEnd. The caller
// closes them once loaded. The compiler puts the End and proxy programs
// after the OPoT program of such a node.
func EndMaps(ns *netns.NS) (map[string]*ebpf.Map, error) {
	return openPinned(ns, EndMapsOf(&Objects{}))
}

// LinkChains is the id of the opot_chains map that the program of the
// tcx link pinned at linkPin reads, 0 when it reads none (loaded
// without the node's OPoT maps, its own map shrunk to one entry) or no
// link is pinned there. srchain's End and SR proxy read the node's
// (EndMaps) when they do its transit.
func LinkChains(linkPin string) (ebpf.MapID, error) {
	l, err := link.LoadPinnedLink(linkPin, nil)
	if err != nil {
		return 0, nil
	}
	defer l.Close()
	prog, err := bpfrt.LinkProgram(l)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", linkPin, err)
	}
	defer prog.Close()
	id, err := ProgramChains(prog)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", linkPin, err)
	}
	return id, nil
}

// ProgramChains is LinkChains of a program: the id of the node's
// opot_chains map it reads, 0 when it reads none.
func ProgramChains(prog *ebpf.Program) (ebpf.MapID, error) {
	pi, err := prog.Info()
	if err != nil {
		return 0, fmt.Errorf("read program info: %w", err)
	}
	ids, _ := pi.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		mi, err := m.Info()
		m.Close()
		if err == nil && mi.Name == "opot_chains" && mi.MaxEntries > 1 {
			return id, nil
		}
	}
	return 0, nil
}

// PinnedChains is the id of the node's pinned opot_chains map (0: none
// pinned), what LinkChains of a program doing the node's transit gives.
func PinnedChains(ns *netns.NS) (ebpf.MapID, error) {
	m, err := ebpf.LoadPinnedMap(PinDir(ns)+"/opot_chains", nil)
	if err != nil {
		return 0, nil
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return 0, fmt.Errorf("read opot chains map: %w", err)
	}
	id, _ := info.ID()
	return id, nil
}

// openPinned opens the maps named by the keys of names from the node's
// pin directory.
func openPinned(ns *netns.NS, names map[string]*ebpf.Map) (map[string]*ebpf.Map, error) {
	dir := PinDir(ns)
	out := map[string]*ebpf.Map{}
	for name := range names {
		m, err := ebpf.LoadPinnedMap(dir+"/"+name, nil)
		if err != nil {
			bpfrt.CloseMaps(out)
			if errors.Is(err, os.ErrNotExist) {
				err = ErrNotLoaded
			}
			return nil, fmt.Errorf("open opot map %s: %w", name, err)
		}
		out[name] = m
	}
	return out, nil
}
