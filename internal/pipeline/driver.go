package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
	"github.com/srchain/srchain/internal/kind"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/state"
)

func init() { kind.RegisterDriver(state.ProgramPipeline, Driver{}) }

// Driver makes a node's pipeline program real: the stages its config
// names (their drivers ran first and pinned their XDP programs at
// StagePin) become the pipeline in one switch (Maps.Set), then the
// dispatcher is attached to every interface. A pipeline with no stages
// leaves the XDP hooks free.
type Driver struct{}

// NodeDir is the pipeline directory of the node in ns.
func NodeDir(ns *netns.NS) string { return Dir(kind.PinDir(ns)) }

func linkPin(dir string, ifindex int) string {
	return filepath.Join(dir, bpfrt.Hook{Ifindex: ifindex, XDP: true}.String())
}

const dispatcherPin = "dispatcher"

func decode(p state.Program) (state.PipelineConfig, []Stage, error) {
	var cfg state.PipelineConfig
	if len(p.Config) > 0 {
		if err := json.Unmarshal(p.Config, &cfg); err != nil {
			return cfg, nil, fmt.Errorf("decode pipeline config: %w", err)
		}
	}
	var stages []Stage
	for _, n := range cfg.Stages {
		s, err := ParseStage(n)
		if err != nil {
			return cfg, nil, fmt.Errorf("decode pipeline config: %w", err)
		}
		stages = append(stages, s)
	}
	return cfg, stages, nil
}

// wanted opens the pinned programs of stages.
func wanted(dir string, stages []Stage) (map[Stage]*ebpf.Program, error) {
	out := map[Stage]*ebpf.Program{}
	for _, s := range stages {
		p, err := ebpf.LoadPinnedProgram(StagePin(dir, s), nil)
		if err != nil {
			closeProgs(out)
			return nil, fmt.Errorf("open %s stage (its driver pins it): %w", s, err)
		}
		out[s] = p
	}
	return out, nil
}

func closeProgs(ps map[Stage]*ebpf.Program) {
	for _, p := range ps {
		p.Close()
	}
}

func ids(ps map[Stage]*ebpf.Program) (map[Stage]ebpf.ProgramID, error) {
	out := map[Stage]ebpf.ProgramID{}
	for s, p := range ps {
		id, err := bpfrt.ProgramID(p)
		if err != nil {
			return nil, err
		}
		out[s] = id
	}
	return out, nil
}

// dispatcher returns the pinned dispatcher, loading and pinning it once.
func dispatcher(dir string, m *Maps) (*ebpf.Program, error) {
	path := filepath.Join(dir, dispatcherPin)
	p, err := ebpf.LoadPinnedProgram(path, nil)
	if err == nil {
		return p, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open pinned dispatcher: %w", err)
	}
	if p, err = LoadDispatcher(m); err != nil {
		return nil, err
	}
	if err := p.Pin(path); err != nil {
		p.Close()
		return nil, fmt.Errorf("pin dispatcher: %w", err)
	}
	return p, nil
}

// Apply switches the pipeline to the program's stages, then attaches the
// dispatcher where it is missing (or, with no stages, detaches it). The
// stages are in the maps before the first packet reaches the dispatcher.
//
// A held OPoT stage runs too, until Finish (withHeld).
func (Driver) Apply(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, stages, err := decode(p)
	if err != nil {
		return nil, err
	}
	stages = withHeld(NodeDir(ns), stages)
	ifindexes, err := kind.Ifindexes(ns, p.Interfaces)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	dir := NodeDir(ns)
	m, err := OpenMaps(dir)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	defer m.Close()
	var undo kind.Undo
	switched, err := switchTo(m, dir, stages)
	if err != nil {
		return nil, err
	}
	if switched != nil {
		undo.Add(switched)
	}
	if len(stages) == 0 {
		for _, idx := range ifindexes {
			if err := bpfrt.DetachPinned(linkPin(dir, idx)); err != nil {
				return undo.Fail(fmt.Errorf("pipeline: %w", err))
			}
		}
	} else {
		prog, err := dispatcher(dir, m)
		if err != nil {
			return undo.Fail(fmt.Errorf("pipeline: %w", err))
		}
		defer prog.Close()
		for _, idx := range ifindexes {
			h := bpfrt.Hook{Ifindex: idx, XDP: true}
			var live bool
			if err := ns.Do(func() (err error) { live, err = bpfrt.Attached(prog, h); return err }); err != nil {
				return undo.Fail(fmt.Errorf("pipeline: %w", err))
			}
			if live {
				continue
			}
			pin := linkPin(dir, idx)
			if err := ns.Do(func() error {
				l, _, err := bpfrt.Attach(h, prog, bpfrt.AttachOptions{Pin: pin})
				if err == nil {
					l.Close()
				}
				return err
			}); err != nil {
				return undo.Fail(fmt.Errorf("pipeline: %w", err))
			}
			undo.Add(func() error { return bpfrt.DetachPinned(pin) })
		}
	}
	return undo.Result(), nil
}

// Finish switches the pipeline to exactly the config's stages, after
// every program of the node was applied and finished: without the OPoT
// stage Apply held, once the OPoT driver's Finish has moved its chains'
// transit into the End or proxy stage. The dispatcher is Apply's.
func (Driver) Finish(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, stages, err := decode(p)
	if err != nil || len(stages) == 0 {
		return nil, err // no stages: Apply held none
	}
	dir := NodeDir(ns)
	m, err := OpenMaps(dir)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	defer m.Close()
	return switchTo(m, dir, stages)
}

// switchTo makes the pinned programs of stages the pipeline of m
// (Maps.Switch: nil undo when they already are).
func switchTo(m *Maps, dir string, stages []Stage) (func() error, error) {
	want, err := wanted(dir, stages)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	defer closeProgs(want)
	undo, err := m.Switch(want)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return undo, nil
}

// withHeld adds the OPoT stage to a pipeline of stages when its program
// is still pinned though the config no longer names it: the OPoT driver
// keeps it so while chains whose transit it did move into the End or an
// SR proxy on this apply, and unpins it in its Finish once their entries
// are marked for that program (docs/opot.md "Changing sides"). Until
// then it goes on updating their proofs in front of the new End, which
// leaves unmarked entries alone. A node leaving XDP altogether (no
// stages) does not keep the dispatcher for it.
func withHeld(dir string, stages []Stage) []Stage {
	if len(stages) == 0 || slices.Contains(stages, OPoT) || !StagePinned(dir, OPoT) {
		return stages
	}
	out := append(slices.Clone(stages), OPoT)
	slices.Sort(out)
	return out
}

// Check reports stages that differ from the config and interfaces whose
// XDP hook does not run the dispatcher.
func (Driver) Check(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]string, error) {
	_, stages, err := decode(p)
	if err != nil {
		return nil, err
	}
	dir := NodeDir(ns)
	var drift []string
	if len(stages) == 0 {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(dir, MapConfig)); err != nil {
		return []string{"pipeline maps not pinned at " + dir}, nil // Check creates nothing
	}
	m, err := OpenMaps(dir)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	defer m.Close()
	have, err := m.Active()
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	want, err := wanted(dir, stages)
	if err != nil {
		return []string{"pipeline: " + err.Error()}, nil
	}
	defer closeProgs(want)
	wantIDs, err := ids(want)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if !maps.Equal(have, wantIDs) {
		var names []string
		for s := Stage(0); s < Slots; s++ {
			if _, ok := have[s]; ok {
				names = append(names, s.String())
			}
		}
		drift = append(drift, fmt.Sprintf("pipeline runs [%s], not [%s]", strings.Join(names, " "), strings.Join(stageNamesOf(stages), " ")))
	}
	prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, dispatcherPin), nil)
	if err != nil {
		return append(drift, "pipeline dispatcher not loaded"), nil
	}
	defer prog.Close()
	for _, ifn := range p.Interfaces {
		idx, err := kind.Ifindexes(ns, []string{ifn})
		if err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		var live bool
		if err := ns.Do(func() (err error) {
			live, err = bpfrt.Attached(prog, bpfrt.Hook{Ifindex: idx[0], XDP: true})
			return err
		}); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		if !live {
			drift = append(drift, fmt.Sprintf("program pipeline (%s) not attached at xdp on %s", ProgName, ifn))
		}
	}
	return drift, nil
}

func stageNamesOf(stages []Stage) []string {
	out := make([]string, len(stages))
	for i, s := range stages {
		out[i] = s.String()
	}
	return out
}

// Remove frees the XDP hooks and empties the pipeline. The maps stay
// pinned while the node lives: stage programs loaded with them keep
// tail-calling into them (package doc).
func (Driver) Remove(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) error {
	dir := NodeDir(ns)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove pipeline: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "xdp_") {
			errs = append(errs, bpfrt.DetachPinned(filepath.Join(dir, e.Name())))
		}
	}
	if m, err := OpenMaps(dir); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, m.Set(nil), m.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove pipeline: %w", err)
	}
	return nil
}

// Counters reads the per-stage outcome counters ("stage/end/redirect").
func (Driver) Counters(ctx context.Context, ns *netns.NS, node state.Node, p state.Program) ([]kind.Counter, error) {
	dir := NodeDir(ns)
	if _, err := os.Stat(filepath.Join(dir, MapConfig)); err != nil {
		return nil, nil // never applied: nothing counted
	}
	m, err := OpenMaps(dir)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	st, err := m.Stats()
	if err != nil {
		return nil, err
	}
	var out []kind.Counter
	for _, k := range sortedKeys(st) {
		out = append(out, kind.Counter{Name: k, Value: st[k]})
	}
	return out, nil
}

func sortedKeys(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
