package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/proxydp"
	"github.com/srchain/srchain/internal/state"
)

// The proxy programs' kernel names (bpf/proxy.c).
const (
	SRProgName    = "srchain_proxy_sr"
	NFProgName    = "srchain_proxy_nf"
	StageProgName = "srchain_proxy_xdp" // the XDP pipeline's proxy stage
)

// PinDir is where the driver pins the node's proxy maps and links. All
// proxy NFs of a router share one loaded proxy (one SID table, one flow
// cache, one attachment per interface and side); the programs pass
// packets that are not theirs to the next tcx program (TC_ACT_UNSPEC).
func PinDir(ns *netns.NS) string { return kind.PinDir(ns) + "/proxy" }

// linkPin names the pinned tcx link of one attachment.
func linkPin(pin string, ifindex int, nfSide bool) string {
	side := "sr"
	if nfSide {
		side = "nf"
	}
	return fmt.Sprintf("%s/link_%d_%s", pin, ifindex, side)
}

var behaviorDP = map[state.Behavior]proxydp.Behavior{
	state.EndAS: proxydp.BehaviorAS, state.EndAD: proxydp.BehaviorAD, state.EndADFlow: proxydp.BehaviorADFlow,
	state.EndAM: proxydp.BehaviorAM, state.EndAMNAT: proxydp.BehaviorAMNAT,
}

type driver struct{}

// attachment is one tcx attachment a proxy NF needs.
type attachment struct {
	ifname  string
	ifindex int
	nfSide  bool
}

// dpSID resolves one proxy program's SID in ns.
func dpSID(ns *netns.NS, p state.Program) (Program, proxydp.SID, []attachment, error) {
	prog, err := Decode(p)
	if err != nil {
		return prog, proxydp.SID{}, nil, err
	}
	idx, err := kind.Ifindexes(ns, []string{prog.IfaceOut, prog.IfaceIn})
	if err != nil {
		return prog, proxydp.SID{}, nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	sid := proxydp.SID{
		Addr: prog.SID.Addr(), Behavior: behaviorDP[prog.Behavior], OutIfindex: idx[0], InIfindex: idx[1],
		NFNext6: prog.NFNext6, NFNext4: prog.NFNext4, Source: prog.Source, Segments: prog.Segments,
		FlowTimeout: time.Duration(prog.IdleTimeoutMS) * time.Millisecond, OPoT: prog.OPoT,
	}
	switch prog.Inner {
	case 4:
		sid.Inner = proxydp.ProtoIPv4
	case 6:
		sid.Inner = proxydp.ProtoIPv6
	}
	sr, err := kind.Ifindexes(ns, prog.SRSide)
	if err != nil {
		return prog, proxydp.SID{}, nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	var atts []attachment
	for i, n := range prog.SRSide {
		atts = append(atts, attachment{n, sr[i], false})
	}
	atts = append(atts, attachment{prog.IfaceIn, idx[1], true})
	return prog, sid, atts, nil
}

// nodeSIDs is the SID table of the node: every proxy program of node
// but skip, plus add (when not already there), in program order; with
// the SR-side interfaces of them all (sorted) and their flow caches'
// total size.
func nodeSIDs(ns *netns.NS, node state.Node, skip string, add *state.Program) ([]proxydp.SID, []int, int, error) {
	var sids []proxydp.SID
	var srSide []int
	flows := 0
	progs := slices.Clone(node.Programs)
	if add != nil && !slices.ContainsFunc(progs, func(q state.Program) bool { return q.Kind == Name && q.NF == add.NF }) {
		progs = append(progs, *add)
	}
	for _, q := range progs {
		if q.Kind != Name || q.NF == skip {
			continue
		}
		prog, sid, atts, err := dpSID(ns, q)
		if err != nil {
			return nil, nil, 0, err
		}
		flows += prog.CacheSize
		sids = append(sids, sid)
		for _, a := range atts {
			if !a.nfSide && !slices.Contains(srSide, a.ifindex) {
				srSide = append(srSide, a.ifindex)
			}
		}
	}
	slices.Sort(srSide)
	return sids, srSide, flows, nil
}

// Apply loads the node's proxy (maps pinned under PinDir) if it is not
// loaded, writes the node's whole SID table (every proxy NF of the node,
// this one included), and attaches the programs this NF needs at tcx
// ingress: srchain_proxy_sr on its SR-side interfaces, srchain_proxy_nf
// on its IFACE-IN, over the node's OPoT maps when its proxies do a
// transit (opotInProxy). A link that runs this program already, reading
// the OPoT maps it should, is left alone; another is swapped in place; a
// stale pin is replaced. The undo detaches what this call attached,
// swaps back what it swapped for the OPoT maps, and unloads the proxy
// when this call loaded it (else it puts the SID table back).
func (driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, _, atts, err := dpSID(ns, p)
	if err != nil {
		return nil, err
	}
	sids, srSide, flows, err := nodeSIDs(ns, node, "", &p)
	if err != nil {
		return nil, err
	}
	pin := PinDir(ns)
	var undo kind.Undo
	fail := func(err error) (func() error, error) { return undo.Fail(fmt.Errorf("proxy %s: %w", p.NF, err)) }
	shared, chains, err := opotMaps(ns, node)
	if err != nil {
		return fail(err)
	}
	defer bpfrt.CloseMaps(shared)
	pdir := pipeline.Dir(kind.PinDir(ns))
	var pipe map[string]*ebpf.Map
	if p.XDP {
		m, err := pipeline.OpenMaps(pdir)
		if err != nil {
			return fail(err)
		}
		defer m.Close()
		pipe = m.Replacements()
	}
	var dp *proxydp.Proxy
	if _, err := os.Stat(pin); err == nil {
		if dp, err = proxydp.OpenPinned(pin, shared, pipe); err != nil {
			return fail(err)
		}
	} else {
		undo.Add(func() error { return removeAll(pin) })
		undo.Add(func() error { return pipeline.UnpinStage(pdir, pipeline.Proxy) })
		if dp, err = proxydp.Load(proxydp.Options{PinPath: pin, FlowCapacity: max(flows, 1), OPoT: shared, Pipeline: pipe}); err != nil {
			return fail(fmt.Errorf("load proxy: %w", err))
		}
	}
	defer dp.Close()
	loaded := undo.Result() != nil
	prev, err := dp.Installed()
	if err != nil {
		return fail(err)
	}
	if err := dp.SetSIDs(sids); err != nil {
		return fail(err)
	}
	changed := loaded
	if !loaded && !sameTable(prev, sids) {
		// The undo puts the table back as it was (this NF's SID may
		// have been there already, with other settings).
		changed = true
		undo.Add(func() error {
			d, err := proxydp.OpenPinnedMaps(pin)
			if err != nil {
				return err
			}
			defer d.Close()
			return d.SetSIDs(prev)
		})
	}
	for _, a := range atts {
		lp := linkPin(pin, a.ifindex, a.nfSide)
		live, runs, err := kind.LinkRuns(ns, lp, bpfrt.Hook{Ifindex: a.ifindex}, dp.Program(a.nfSide))
		if err != nil {
			return fail(err)
		}
		reads := chains
		if live && runs {
			if reads, err = opotdp.LinkChains(lp); err != nil {
				return fail(err)
			}
		}
		if live && runs && reads == chains {
			continue
		}
		if !live {
			_ = os.Remove(lp) // stale: its link was detached by hand
		}
		// A live link of another build (an upgraded srchain), or one
		// that reads other OPoT maps than the node's (the OPoT driver
		// replaced them, or the node's proxies gained or lost the
		// transit), takes this program in place (bpfrt.Attach swaps a
		// pinned link's program, no gap). The undo of another build's
		// swap leaves the new program running (the old build's is what
		// an upgrade replaces); the undo of an OPoT swap puts the old
		// program back, since the OPoT driver's undo puts back the
		// chain entries' marks that program served.
		var was *ebpf.Program
		if live && runs {
			if was, err = bpfrt.PinnedLinkProgram(lp); err != nil {
				return fail(err)
			}
		}
		if err := ns.Do(func() error { return dp.Attach(a.ifindex, a.nfSide, lp) }); err != nil {
			if was != nil {
				was.Close()
			}
			return fail(fmt.Errorf("attach on %s: %w", a.ifname, err))
		}
		changed = true
		switch {
		case !live:
			undo.Add(func() error { return detach(lp) })
		case was != nil:
			// was stays open until the undo runs (or the garbage
			// collector closes it when the apply keeps the swap).
			h := bpfrt.Hook{Ifindex: a.ifindex}
			undo.Add(func() error {
				defer was.Close()
				return ns.Do(func() error { return bpfrt.AttachPinned(h, was, bpfrt.AttachOptions{Pin: lp}) })
			})
		}
	}
	c, err := applyXDP(dp, pin, pdir, p.XDP, srSide, chains, loaded, &undo)
	if err != nil {
		return fail(err)
	}
	changed = changed || c
	if !changed {
		return nil, nil
	}
	if u := undo.Result(); u != nil {
		return u, nil
	}
	return func() error { return nil }, nil
}

// applyXDP makes the proxy the node's XDP pipeline stage when the node
// runs it at XDP (xdp; the compiler's choice, docs/pipeline.md): the
// SR-side interfaces where the stage serves proxy SIDs, and
// srchain_proxy_xdp pinned for the pipeline driver, which runs after the
// node's stage drivers and switches the pipeline to it. A pinned stage
// of another build, or reading other OPoT maps than chains (the links'
// rule), is pinned again; the stage leaves when the node no longer runs
// it at XDP (the tc programs do the whole job either way). The undo
// puts back the SR-side set and unpins a stage this call pinned first
// (loaded: the whole proxy goes on undo anyway).
func applyXDP(dp *proxydp.Proxy, pin, pdir string, xdp bool, srSide []int, chains ebpf.MapID, loaded bool, undo *kind.Undo) (bool, error) {
	changed := false
	had, err := dp.SRSide()
	if err != nil {
		return false, err
	}
	if !slices.Equal(had, srSide) {
		if err := dp.SetSRSide(srSide); err != nil {
			return false, err
		}
		changed = true
		if !loaded {
			undo.Add(func() error {
				d, err := proxydp.OpenPinnedMaps(pin)
				if err != nil {
					return err
				}
				defer d.Close()
				return d.SetSRSide(had)
			})
		}
	}
	pinned := pipeline.StagePinned(pdir, pipeline.Proxy)
	switch {
	case xdp:
		reads, err := stageChains(pdir)
		if err != nil {
			return false, err
		}
		if pipeline.StageRuns(pdir, pipeline.Proxy, dp.StageProgram()) && reads == chains {
			return changed, nil
		}
		if err := pipeline.PinStage(pdir, pipeline.Proxy, dp.StageProgram()); err != nil {
			return false, err
		}
		if !pinned && !loaded {
			undo.Add(func() error { return pipeline.UnpinStage(pdir, pipeline.Proxy) })
		}
		return true, nil
	case pinned:
		return true, pipeline.UnpinStage(pdir, pipeline.Proxy)
	}
	return changed, nil
}

// stageChains is opotdp.LinkChains of the pinned proxy stage (0: none
// pinned).
func stageChains(pdir string) (ebpf.MapID, error) {
	prog, err := ebpf.LoadPinnedProgram(pipeline.StagePin(pdir, pipeline.Proxy), nil)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open pinned proxy stage: %w", err)
	}
	defer prog.Close()
	return opotdp.ProgramChains(prog)
}

// opotInProxy reports whether the node's proxies do an OPoT transit
// themselves: the node's OPoT program has a transit entry done by the
// program serving its SID (state.OPoTChain.InEnd) on one of the node's
// proxy SIDs (End.AD and End.AD.flow carrying the proof; docs/opot.md
// "Transit in the proxy"). One loaded proxy serves every proxy NF of the
// node, so this is the node's, not one NF's.
func opotInProxy(node state.Node) bool {
	var sids []netip.Prefix
	for _, p := range node.Programs {
		if prog, err := Decode(p); err == nil && prog.OPoT {
			sids = append(sids, prog.SID)
		}
	}
	for _, p := range node.Programs {
		if p.Kind != state.ProgramOPoT {
			continue
		}
		var cfg state.OPoTConfig
		if json.Unmarshal(p.Config, &cfg) != nil {
			continue
		}
		for _, ch := range cfg.Chains {
			if ch.InEnd && slices.ContainsFunc(sids, func(s netip.Prefix) bool { return s.Contains(ch.SID) }) {
				return true
			}
		}
	}
	return false
}

// opotMaps opens the node's OPoT maps the proxy loads when it does the
// node's transit (opotInProxy; the compiler puts the node's OPoT
// program, which pins them, before such a proxy's), and the id of their
// opot_chains, what opotdp.LinkChains of the proxy's links must give.
// None: nil and 0.
func opotMaps(ns *netns.NS, node state.Node) (map[string]*ebpf.Map, ebpf.MapID, error) {
	if !opotInProxy(node) {
		return nil, 0, nil
	}
	shared, err := opotdp.EndMaps(ns)
	if err != nil {
		return nil, 0, err
	}
	info, err := shared["opot_chains"].Info()
	if err != nil {
		bpfrt.CloseMaps(shared)
		return nil, 0, fmt.Errorf("read opot chains map: %w", err)
	}
	id, _ := info.ID()
	return shared, id, nil
}

// detach unpins and closes the link pinned at lp (absent: nothing).
func detach(lp string) error {
	l, err := link.LoadPinnedLink(lp, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open link %s: %w", lp, err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpin link %s: %w", lp, err)
	}
	return nil
}

// removeAll detaches every link pinned under pin and deletes the pins.
func removeAll(pin string) error { return proxydp.Remove(pin) }

// sameTable reports whether two SID tables hold the same SIDs (sameSID),
// in any order.
func sameTable(a, b []proxydp.SID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range b {
		i := slices.IndexFunc(a, func(h proxydp.SID) bool { return h.Addr == s.Addr })
		if i < 0 || !sameSID(a[i], s) {
			return false
		}
	}
	return true
}

// sameSID compares an installed SID with the desired one.
func sameSID(a, b proxydp.SID) bool {
	return a.Addr == b.Addr && a.Behavior == b.Behavior && a.OutIfindex == b.OutIfindex && a.InIfindex == b.InIfindex &&
		a.NFNext6 == b.NFNext6 && a.NFNext4 == b.NFNext4 && a.FlowTimeout == b.FlowTimeout &&
		// The proxy keeps the OPoT flag for End.AD and End.AD.flow only.
		(a.OPoT == b.OPoT || (a.Behavior != proxydp.BehaviorAD && a.Behavior != proxydp.BehaviorADFlow)) &&
		(a.Behavior == proxydp.BehaviorAM || a.Behavior == proxydp.BehaviorAMNAT || a.Inner == b.Inner) &&
		(a.Behavior != proxydp.BehaviorAS || (a.Source == b.Source && slices.Equal(a.Segments, b.Segments)))
}

func describe(s proxydp.SID) string {
	out := fmt.Sprintf("%s out %d in %d nf %s", s.Behavior, s.OutIfindex, s.InIfindex, s.NFNext6)
	if s.NFNext4.IsValid() {
		out += " " + s.NFNext4.String()
	}
	if s.Behavior == proxydp.BehaviorAS {
		out += fmt.Sprintf(" push %s %v", s.Source, s.Segments)
	}
	if s.OPoT {
		out += " opot"
	}
	return out
}

// Check reports, changing nothing, whether the proxy is loaded with this
// NF's SID and attached where the NF needs it.
func (driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, want, atts, err := dpSID(ns, p)
	if err != nil {
		return nil, err
	}
	pin := PinDir(ns)
	if _, err := os.Stat(pin); err != nil {
		return []string{fmt.Sprintf("proxy %s: proxy programs not loaded (no pins at %s)", p.NF, pin)}, nil
	}
	var drift []string
	dp, err := proxydp.OpenPinnedMaps(pin)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	defer dp.Close()
	// This build's programs, only to compare code with what the links
	// run: loaded over private maps (the tag leaves map references out),
	// so Check pins nothing.
	progs, err := proxydp.Load(proxydp.Options{FlowCapacity: 1})
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	defer progs.Close()
	shared, chains, err := opotMaps(ns, node)
	mapsMissing := errors.Is(err, opotdp.ErrNotLoaded)
	if mapsMissing {
		drift = append(drift, fmt.Sprintf("proxy %s: the node's opot maps, which the proxy reads, are not loaded", p.NF))
	} else if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	bpfrt.CloseMaps(shared)
	have, err := dp.Installed()
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	i := slices.IndexFunc(have, func(h proxydp.SID) bool { return h.Addr == want.Addr })
	switch {
	case i < 0:
		drift = append(drift, fmt.Sprintf("proxy %s: sid %s missing from the proxy's SID table", p.NF, want.Addr))
	case !sameSID(have[i], want):
		drift = append(drift, fmt.Sprintf("proxy %s: sid %s in the proxy's table is %s, want %s", p.NF, want.Addr, describe(have[i]), describe(want)))
	}
	for _, a := range atts {
		name := SRProgName
		if a.nfSide {
			name = NFProgName
		}
		live, runs, err := kind.LinkRuns(ns, linkPin(pin, a.ifindex, a.nfSide), bpfrt.Hook{Ifindex: a.ifindex}, progs.Program(a.nfSide))
		switch {
		case err != nil:
			return drift, err
		case !live:
			drift = append(drift, fmt.Sprintf("proxy %s: program %s not attached on %s", p.NF, name, a.ifname))
		case !runs:
			drift = append(drift, fmt.Sprintf("proxy %s: program %s on %s runs another build's code", p.NF, name, a.ifname))
		case mapsMissing:
			// Said above; what the link reads is no use to compare.
		default:
			reads, err := opotdp.LinkChains(linkPin(pin, a.ifindex, a.nfSide))
			switch {
			case err != nil:
				return drift, err
			case reads != chains && chains != 0:
				drift = append(drift, fmt.Sprintf("proxy %s: program %s on %s does not read the node's opot maps (the transit in the proxy)", p.NF, name, a.ifname))
			case reads != chains:
				drift = append(drift, fmt.Sprintf("proxy %s: program %s on %s reads opot maps the node's proxies no longer use", p.NF, name, a.ifname))
			}
		}
	}
	x, err := checkXDP(ns, node, p, dp, progs, chains, mapsMissing)
	return append(drift, x...), err
}

// checkXDP is Check of applyXDP's part.
func checkXDP(ns *netns.NS, node state.Node, p state.Program, dp, progs *proxydp.Proxy, chains ebpf.MapID, mapsMissing bool) ([]string, error) {
	pdir := pipeline.Dir(kind.PinDir(ns))
	if !p.XDP {
		if pipeline.StagePinned(pdir, pipeline.Proxy) {
			return []string{fmt.Sprintf("proxy %s: program %s pinned as the xdp pipeline's proxy stage, which the node runs at tc", p.NF, StageProgName)}, nil
		}
		return nil, nil
	}
	var drift []string
	_, want, _, err := nodeSIDs(ns, node, "", &p)
	if err != nil {
		return nil, err
	}
	have, err := dp.SRSide()
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	if !slices.Equal(have, want) {
		drift = append(drift, fmt.Sprintf("proxy %s: the xdp stage serves proxy SIDs on ifindexes %v, want %v", p.NF, have, want))
	}
	if !pipeline.StageRuns(pdir, pipeline.Proxy, progs.StageProgram()) {
		return append(drift, fmt.Sprintf("proxy %s: program %s not pinned as the xdp pipeline's proxy stage (or an older build's)", p.NF, StageProgName)), nil
	}
	reads, err := stageChains(pdir)
	switch {
	case err != nil:
		return drift, err
	case mapsMissing:
	case reads != chains && chains != 0:
		drift = append(drift, fmt.Sprintf("proxy %s: the xdp stage does not read the node's opot maps (the transit in the proxy)", p.NF))
	case reads != chains:
		drift = append(drift, fmt.Sprintf("proxy %s: the xdp stage reads opot maps the node's proxies no longer use", p.NF))
	}
	return drift, nil
}

// Remove takes p's SID out of the node's table and detaches what only
// p needed; with no proxy NF left on the node it unloads the proxy.
// node is the node's desired state without p (or with it: p is skipped).
func (driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pin := PinDir(ns)
	if _, err := os.Stat(pin); err != nil {
		return nil
	}
	rest, srSide, _, err := nodeSIDs(ns, node, p.NF, nil)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		// The pipeline driver (removed after the node's stages) drops
		// the stage from the pipeline; without its pin it is not put
		// back.
		return errors.Join(pipeline.UnpinStage(pipeline.Dir(kind.PinDir(ns)), pipeline.Proxy), removeAll(pin))
	}
	dp, err := proxydp.OpenPinnedMaps(pin)
	if err != nil {
		return fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	defer dp.Close()
	if err := dp.SetSIDs(rest); err != nil {
		return fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	if err := dp.SetSRSide(srSide); err != nil {
		return fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	// Keep the links some remaining NF needs.
	keep := map[string]bool{}
	for _, q := range node.Programs {
		if q.Kind != Name || q.NF == p.NF {
			continue
		}
		_, _, atts, err := dpSID(ns, q)
		if err != nil {
			return err
		}
		for _, a := range atts {
			keep[linkPin(pin, a.ifindex, a.nfSide)] = true
		}
	}
	links, _ := filepath.Glob(pin + "/link_*")
	var errs []error
	for _, lp := range links {
		if !keep[lp] {
			errs = append(errs, detach(lp))
		}
	}
	return errors.Join(errs...)
}

// Counters reads this NF's SID counters (to-nf, from-nf, cache
// hit/miss/full/write, wrong-inner, sl, ttl, ...: "sid/<stat>") and the
// node's proxy drop reasons and FIB outcomes ("drop/<reason>",
// "fib/<outcome>", shared by the node's proxy NFs).
func (driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog, err := Decode(p)
	if err != nil {
		return nil, err
	}
	dp, err := proxydp.OpenPinnedMaps(PinDir(ns))
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", p.NF, err)
	}
	defer dp.Close()
	m, err := dp.Counters()
	if err != nil {
		return nil, fmt.Errorf("proxy %s: read counters: %w", p.NF, err)
	}
	mine := "sid/" + prog.SID.Addr().String() + "/"
	var out []kind.Counter
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, mine):
			out = append(out, kind.Counter{Name: "sid/" + strings.TrimPrefix(k, mine), Value: v})
		case strings.HasPrefix(k, "drop/"), strings.HasPrefix(k, "fib/"):
			out = append(out, kind.Counter{Name: k, Value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
