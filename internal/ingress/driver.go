package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/drop"
	"github.com/srchain/srchain/internal/firewall"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opotdp"
	"github.com/srchain/srchain/internal/pipeline"
	"github.com/srchain/srchain/internal/state"
)

func init() { kind.RegisterDriver(Program, Driver{}) }

// Driver makes a node's state.Program of kind Program real: it loads the
// program with its maps pinned under PinDir(ns), fills them, attaches
// the tc program (and with Program.XDP pins the XDP twin as the node
// pipeline's ingress stage) to the program's
// interfaces, and on a later Apply with another config swaps the chain
// set in atomically (one generation word).
type Driver struct{}

// PinDir is where the driver pins the ingress's maps and links.
func PinDir(ns *netns.NS) string { return kind.PinDir(ns) + "/ingress" }

func linkPin(dir string, ifindex int, xdp bool) string {
	if xdp {
		return fmt.Sprintf("%s/xdp_%d", dir, ifindex)
	}
	return fmt.Sprintf("%s/tcx_ingress_%d", dir, ifindex)
}

// ConfigFromProgram decodes the program's typed config.
func ConfigFromProgram(p state.Program) (Config, error) {
	var cfg Config
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		return cfg, fmt.Errorf("decode ingress config: %w", err)
	}
	return cfg, nil
}

// ReadSettings reads what the kernel's seg6 encap takes from the node at
// packet time: net.ipv6.seg6_flowlabel and the IPv6 hop_limit of each
// chain's route device.
func ReadSettings(ns *netns.NS, node state.Node, cfg Config) (Settings, error) {
	s := Settings{TunSrc: node.TunSrc, HopLimit4: map[string]uint8{}}
	err := ns.Do(func() error {
		v, err := readInt("/proc/sys/net/ipv6/seg6_flowlabel")
		if err != nil {
			return err
		}
		s.FlowLabel = v
		for _, c := range cfg.Chains {
			if _, ok := s.HopLimit4[c.Dev]; ok || c.Dev == "" {
				continue
			}
			h, err := readInt("/proc/sys/net/ipv6/conf/" + c.Dev + "/hop_limit")
			if err != nil {
				return err
			}
			s.HopLimit4[c.Dev] = uint8(h)
		}
		return nil
	})
	if err == nil {
		s.FIBDirect, err = onlyOwnRules(ns)
	}
	if err != nil {
		return s, fmt.Errorf("read ingress settings: %w", err)
	}
	return s, nil
}

// onlyOwnRules reports whether every ip rule of ns (both families) is
// one of the kernel's defaults (priorities 0, 32766, 32767) or srchain's
// (RTProto).
func onlyOwnRules(ns *netns.NS) (bool, error) {
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rules, err := ns.Netlink().RuleList(fam)
		if err != nil {
			return false, fmt.Errorf("list rules: %w", err)
		}
		for _, r := range rules {
			if r.Protocol != RTProto && r.Priority != 0 && r.Priority != 32766 && r.Priority != 32767 {
				return false, nil
			}
		}
	}
	return true, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// Apply is idempotent: a config whose hash already runs, on interfaces
// where the kernel confirms the pinned links are attached, changes
// nothing (nil undo). A first Apply's undo removes everything; a later
// one's undo switches packets back to the previous chain set (intact in
// the other generation until the next Apply).
func (Driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	entries, err := Rules(cfg)
	if err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	s, err := ReadSettings(ns, node, cfg)
	if err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	idxs, err := kind.Ifindexes(ns, p.Interfaces)
	if err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	dir := PinDir(ns)
	_, statErr := os.Stat(dir + "/fw_gen")
	fresh := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ingress: create pin dir: %w", err)
	}
	release, err := bpfrt.LockDir(dir, bpfrt.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("ingress: %w", err)
	}
	defer release()
	removeAll := func() error { return removePins(dir) }
	// replaced: the pinned maps were too small and are new; the previous
	// chain set is gone with them, so this Apply cannot be undone.
	replaced := false

	pipe, err := pipeline.OpenMaps(pipeline.NodeDir(ns))
	if err != nil {
		if fresh {
			err = errors.Join(err, removeAll())
		}
		return nil, fmt.Errorf("ingress: %w", err)
	}
	defer pipe.Close()
	var shared map[string]*ebpf.Map
	if slices.ContainsFunc(cfg.Chains, func(c state.IngressChain) bool { return c.Ext == ExtOPoT }) {
		if shared, err = opotdp.HeadendMaps(ns); err != nil {
			if fresh {
				err = errors.Join(err, removeAll())
			}
			return nil, fmt.Errorf("ingress: %w", err)
		}
		defer bpfrt.CloseMaps(shared)
	}
	in, err := Load(Options{PinPath: dir, Capacity: pinnedCapacity(dir, CapacityFor(len(entries))), XDP: p.XDP, Pipeline: pipe.Replacements(), OPoT: shared})
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		// Tables too small for the new chain set: new maps, then the
		// links are taken over by the new program (an atomic swap).
		if err := removeMapPins(dir); err != nil {
			return nil, fmt.Errorf("ingress: %w", err)
		}
		replaced = true
		in, err = Load(Options{PinPath: dir, Capacity: CapacityFor(len(entries)), XDP: p.XDP, Pipeline: pipe.Replacements(), OPoT: shared})
	}
	if err != nil {
		if fresh {
			err = errors.Join(err, removeAll())
		}
		return nil, fmt.Errorf("ingress: %w", err)
	}
	defer in.Close()

	want := Hash(cfg, s)
	have, _ := in.Hash()
	changed := fresh || replaced || have != want
	prev := -1
	if changed {
		if prev, err = in.Update(cfg, s); err != nil {
			if fresh {
				err = errors.Join(err, removeAll())
			}
			return nil, fmt.Errorf("ingress: %w", err)
		}
	}
	// A program reading the OPoT driver's maps is swapped in at every
	// Apply: it holds the maps it was loaded with, and that driver
	// replaces them when their layout changes (opotdp load).
	swap := changed || shared != nil
	// repaired: a link attached again or swapped from another srchain
	// build's code (an upgrade): a change, kept on undo.
	repaired := false
	for _, idx := range idxs {
		ok, runs, err := kind.LinkRuns(ns, linkPin(dir, idx, false), bpfrt.Hook{Ifindex: idx}, in.Program())
		if err == nil && ok && runs && !swap {
			continue
		}
		repaired = repaired || err != nil || !ok || !runs
		err = ns.Do(func() error {
			l, err := in.Attach(idx, linkPin(dir, idx, false))
			if err == nil {
				l.Close() // pinned: stays attached
			}
			return err
		})
		if err != nil {
			if fresh {
				err = errors.Join(err, removeAll())
			}
			return nil, fmt.Errorf("ingress: %w", err)
		}
	}
	// The XDP twin is the node pipeline's ingress stage (its driver runs
	// after this one), or leaves it: the tc program does the whole job.
	// It needs the interfaces' MACs (written every time: an address may
	// have changed; not a change of the program).
	if p.XDP {
		err = ns.Do(func() error {
			for _, idx := range idxs {
				if err := in.RecordMAC(idx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if fresh {
				err = errors.Join(err, removeAll())
			}
			return nil, fmt.Errorf("ingress: %w", err)
		}
	}
	pdir := pipeline.NodeDir(ns)
	old := p.XDP && !pipeline.StageRuns(pdir, pipeline.Ingress, in.XDPProgram())
	repaired = repaired || old
	switch {
	case p.XDP && (swap || old):
		err = pipeline.PinStage(pdir, pipeline.Ingress, in.XDPProgram())
	case !p.XDP:
		err = pipeline.UnpinStage(pdir, pipeline.Ingress)
	}
	if err != nil {
		if fresh {
			err = errors.Join(err, removeAll())
		}
		return nil, fmt.Errorf("ingress: %w", err)
	}
	switch {
	case fresh:
		return removeAll, nil
	case replaced:
		// A change that cannot be taken back: the previous chain set
		// went with the old maps.
		return func() error { return nil }, nil
	case prev >= 0:
		return func() error { return revertPinned(dir, prev) }, nil
	case repaired:
		return func() error { return nil }, nil
	}
	return nil, nil
}

// pinnedCapacity is the capacity of the pinned tables under dir when
// they hold at least need (so Load reuses them and a new chain set is
// swapped in place), else need (new maps).
func pinnedCapacity(dir string, need firewall.Capacity) firewall.Capacity {
	size := func(name string) int {
		m, err := ebpf.LoadPinnedMap(dir+"/"+name, nil)
		if err != nil {
			return 0
		}
		defer m.Close()
		return int(m.MaxEntries()) / 2 // two generations
	}
	have := firewall.Capacity{Bitmaps: size("fw_bitmaps"), Prefixes: size("fw_lpm")}
	if have.Bitmaps >= need.Bitmaps && have.Prefixes >= need.Prefixes {
		return have
	}
	return need
}

// revertPinned switches the pinned ingress back to generation g.
func revertPinned(dir string, g int) error {
	release, err := bpfrt.LockDir(dir, bpfrt.Exclusive)
	if err != nil {
		return fmt.Errorf("revert ingress: %w", err)
	}
	defer release()
	m, err := ebpf.LoadPinnedMap(dir+"/fw_gen", nil)
	if err != nil {
		return fmt.Errorf("revert ingress: %w", err)
	}
	defer m.Close()
	if err := m.Put(uint32(0), uint32(g&1)); err != nil {
		return fmt.Errorf("revert ingress: %w", err)
	}
	return nil
}

func isLinkPin(name string) bool {
	return strings.HasPrefix(name, "tcx_ingress_") || strings.HasPrefix(name, "xdp_")
}

func removeMapPins(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read pin dir: %w", err)
	}
	for _, e := range ents {
		if isLinkPin(e.Name()) {
			continue
		}
		if err := os.RemoveAll(dir + "/" + e.Name()); err != nil {
			return fmt.Errorf("remove map pin: %w", err)
		}
	}
	return nil
}

// removePins detaches the pinned links and removes the directory.
func removePins(dir string) error { return bpfrt.RemovePinDir(dir, isLinkPin) }

// Check reports, changing nothing, what differs: not loaded, another
// chain set or settings running, a link not attached.
func (Driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	dir := PinDir(ns)
	m, err := ebpf.LoadPinnedMap(dir+"/ing_config_map", nil)
	if err != nil {
		return []string{fmt.Sprintf("program ingress (%s) not loaded", ProgName)}, nil
	}
	defer m.Close()
	var conf ingressProgIngConfig
	if err := m.Lookup(uint32(0), &conf); err != nil {
		return nil, fmt.Errorf("check ingress: %w", err)
	}
	var drift []string
	s, err := ReadSettings(ns, node, cfg)
	if err != nil {
		return nil, fmt.Errorf("check ingress: %w", err)
	}
	if conf.Hash != Hash(cfg, s) {
		drift = append(drift, "ingress runs another chain set or settings (tunsrc, seg6_flowlabel, hop_limit) than desired")
	}
	idxs, err := kind.Ifindexes(ns, p.Interfaces)
	if err != nil {
		return nil, fmt.Errorf("check ingress: %w", err)
	}
	// This build's programs, only to compare code with what runs:
	// loaded over private maps (the tag leaves map references out), so
	// Check pins nothing.
	in, err := Load(Options{XDP: p.XDP})
	if err != nil {
		return nil, fmt.Errorf("check ingress: %w", err)
	}
	defer in.Close()
	for i, idx := range idxs {
		live, runs, err := kind.LinkRuns(ns, linkPin(dir, idx, false), bpfrt.Hook{Ifindex: idx}, in.Program())
		switch {
		case err != nil || !live:
			drift = append(drift, fmt.Sprintf("program ingress (%s) not attached on %s", ProgName, p.Interfaces[i]))
		case !runs:
			drift = append(drift, fmt.Sprintf("program ingress (%s) on %s runs another build's code", ProgName, p.Interfaces[i]))
		}
	}
	if p.XDP && !pipeline.StageRuns(pipeline.NodeDir(ns), pipeline.Ingress, in.XDPProgram()) {
		drift = append(drift, fmt.Sprintf("program ingress (%s) not loaded as the xdp pipeline's ingress stage (or an older build's)", XDPProgName))
	}
	return drift, nil
}

// Remove detaches the links and removes the pins.
func (Driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.XDP {
		if err := pipeline.UnpinStage(pipeline.NodeDir(ns), pipeline.Ingress); err != nil {
			return err
		}
	}
	return removePins(PinDir(ns))
}

// Counters: per chain "chain/NAME/packets|bytes" (packets the ingress
// steered into the chain, IP bytes as they arrived), what happened to
// classified packets ("outcome/redirect|stack|xdp-pass|no-chain|not-ours|flow-setup|kernel|too-big"),
// drop reasons and FIB results.
func (Driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := ConfigFromProgram(p)
	if err != nil {
		return nil, err
	}
	dir := PinDir(ns)
	open := func(name string) (*ebpf.Map, error) {
		m, err := ebpf.LoadPinnedMap(dir+"/"+name, nil)
		if err != nil {
			return nil, fmt.Errorf("read ingress counters: %w", err)
		}
		return m, nil
	}
	var out []kind.Counter
	cm, err := open("ing_counters")
	if err != nil {
		return nil, err
	}
	defer cm.Close()
	counts, err := readChainCounts(cm, len(cfg.Chains))
	if err != nil {
		return nil, err
	}
	for i, c := range counts {
		n := cfg.Chains[i].Name
		out = append(out, kind.Counter{Name: "chain/" + n + "/packets", Value: c.Packets},
			kind.Counter{Name: "chain/" + n + "/bytes", Value: c.Bytes})
	}
	om, err := open("ing_outcomes")
	if err != nil {
		return nil, err
	}
	defer om.Close()
	outc, err := readOutcomes(om)
	if err != nil {
		return nil, err
	}
	for _, name := range outcomeNames {
		out = append(out, kind.Counter{Name: "outcome/" + name, Value: outc[name]})
	}
	dm, err := open("drop_counters")
	if err != nil {
		return nil, err
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
	fm, err := open("fib_counters")
	if err != nil {
		return nil, err
	}
	defer fm.Close()
	fib, err := bpfrt.ReadFIBCounts(fm)
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(fib) {
		if fib[k] != 0 {
			out = append(out, kind.Counter{Name: "fib/" + k, Value: fib[k]})
		}
	}
	return out, nil
}

func sortedKeys(m map[string]uint64) []string {
	return slices.Sorted(maps.Keys(m))
}
