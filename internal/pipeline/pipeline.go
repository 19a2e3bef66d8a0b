// Package pipeline runs a node's XDP stages in one defined order behind a
// single XDP program per interface (issue 13; docs/pipeline.md).
//
// The dispatcher (bpf/pipeline.c) tail-calls the stages present in a prog
// array, in Stage order; each stage either finishes a packet or hands it
// to the next (bpf/lib/pipeline.h). Stage programs are loaded by their own
// drivers (firewall, end, ingress) with the node's pipeline maps in place
// of their own (Maps.Replacements), and pinned at StagePin; the pipeline
// driver (driver.go) assembles them with Maps.Set, which switches the
// whole pipeline with one map write.
//
// The maps live in the node's pin directory for as long as the node: a
// stage program holds the prog array it tail-calls into, so replacing the
// maps would cut the programs already loaded off the pipeline.
package pipeline

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/srchain/srchain/internal/bpfrt"
)

// Stage is a slot of the pipeline; the order is the run order
// (bpf/lib/pipeline.h enum pipe_stage).
type Stage uint32

const (
	Firewall  Stage = 0
	Netfilter Stage = 1
	OPoT      Stage = 2
	Proxy     Stage = 3
	End       Stage = 4
	Ingress   Stage = 5
	// Slots per generation (PIPE_STAGES).
	Slots = 8
	// dispatch is where the dispatcher counts (PIPE_DISPATCH).
	dispatch Stage = Slots
)

var stageNames = map[Stage]string{
	Firewall: "firewall", Netfilter: "netfilter", Proxy: "proxy", OPoT: "opot", End: "end", Ingress: "ingress",
	dispatch: "dispatch",
}

func (s Stage) String() string {
	if n, ok := stageNames[s]; ok {
		return n
	}
	return fmt.Sprintf("stage%d", uint32(s))
}

// ErrUnknownStage: a stage name the pipeline has no slot for.
var ErrUnknownStage = errors.New("unknown pipeline stage")

// ParseStage reads a stage name (Stage.String).
func ParseStage(name string) (Stage, error) {
	for s, n := range stageNames {
		if n == name && s != dispatch {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownStage, name)
}

// Outcomes counted per stage (enum pipe_outcome).
var outcomeNames = []string{"next", "pass", "drop", "tx", "redirect", "aborted"}

const outcomeSlots = 8 // PIPE_NOUT

// Names of the maps stage objects share (lib/pipeline.h).
const (
	MapProgs0 = "pipe_progs0" // generation 0
	MapProgs1 = "pipe_progs1" // generation 1
	MapConfig = "pipe_config"
	MapStats  = "pipe_stats"
)

// Dir is the pipeline's pin directory inside a node's pin directory.
func Dir(nodePinDir string) string { return filepath.Join(nodePinDir, "pipeline") }

// StagePin is where a stage's driver pins the XDP program of stage s.
func StagePin(dir string, s Stage) string { return filepath.Join(dir, "stage_"+s.String()) }

// Maps are a node's pipeline maps.
type Maps struct {
	dir              string
	Progs            [2]*ebpf.Map // by generation
	Config, StatsMap *ebpf.Map
}

// OpenMaps opens the pipeline maps pinned in dir, creating them (with a
// fresh random node cookie, lib/pipeline.h pipe_meta) when they are not
// there yet. dir "" makes private maps (tests).
func OpenMaps(dir string) (*Maps, error) {
	spec, err := loadPipeProg()
	if err != nil {
		return nil, fmt.Errorf("open pipeline maps: %w", err)
	}
	m := &Maps{dir: dir}
	specs := map[string]**ebpf.Map{MapProgs0: &m.Progs[0], MapProgs1: &m.Progs[1], MapConfig: &m.Config, MapStats: &m.StatsMap}
	if dir == "" {
		for name, p := range specs {
			if *p, err = ebpf.NewMap(spec.Maps[name]); err != nil {
				m.Close()
				return nil, fmt.Errorf("create pipeline map %s: %w", name, err)
			}
		}
		return m, m.initCookie()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open pipeline maps: %w", err)
	}
	release, err := bpfrt.LockDir(dir, bpfrt.Exclusive)
	if err != nil {
		return nil, fmt.Errorf("open pipeline maps: %w", err)
	}
	defer release()
	for name, p := range specs {
		path := filepath.Join(dir, name)
		mp, err := ebpf.LoadPinnedMap(path, nil)
		if errors.Is(err, os.ErrNotExist) {
			if mp, err = ebpf.NewMap(spec.Maps[name]); err == nil {
				if err = mp.Pin(path); err != nil {
					mp.Close()
				}
			}
		}
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("open pipeline map %s: %w", name, err)
		}
		*p = mp
	}
	return m, m.initCookie()
}

// initCookie gives the node its cookie once (never 0).
func (m *Maps) initCookie() error {
	var c pipeProgPipeCfg
	if err := m.Config.Lookup(uint32(0), &c); err != nil {
		m.Close()
		return fmt.Errorf("read pipeline config: %w", err)
	}
	for c.Cookie == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			m.Close()
			return fmt.Errorf("make pipeline cookie: %w", err)
		}
		c.Cookie = binary.LittleEndian.Uint32(b[:])
		if err := m.Config.Update(uint32(0), c, ebpf.UpdateAny); err != nil {
			m.Close()
			return fmt.Errorf("write pipeline config: %w", err)
		}
	}
	return nil
}

// Replacements are the maps a stage object loads in place of its own
// (ebpf.CollectionOptions.MapReplacements).
func (m *Maps) Replacements() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{MapProgs0: m.Progs[0], MapProgs1: m.Progs[1], MapConfig: m.Config, MapStats: m.StatsMap}
}

// Close releases the maps (pins stay).
func (m *Maps) Close() error {
	var errs []error
	for _, mp := range []*ebpf.Map{m.Progs[0], m.Progs[1], m.Config, m.StatsMap} {
		if mp != nil {
			errs = append(errs, mp.Close())
		}
	}
	return errors.Join(errs...)
}

func (m *Maps) gen() (pipeProgPipeCfg, error) {
	var c pipeProgPipeCfg
	if err := m.Config.Lookup(uint32(0), &c); err != nil {
		return c, fmt.Errorf("read pipeline generation: %w", err)
	}
	return c, nil
}

// Active returns the program ids of the stages packets run now.
func (m *Maps) Active() (map[Stage]ebpf.ProgramID, error) {
	c, err := m.gen()
	if err != nil {
		return nil, err
	}
	out := map[Stage]ebpf.ProgramID{}
	progs := m.Progs[c.Gen&1]
	for s := Stage(0); s < Slots; s++ {
		var id uint32
		err := progs.Lookup(uint32(s), &id)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read pipeline stage %s: %w", s, err)
		}
		out[s] = ebpf.ProgramID(id)
	}
	return out, nil
}

// Set makes stages the pipeline, atomically: it fills the idle
// generation, flips the active one with one map write, then empties the
// old generation from its last stage to its first, so that a packet still
// running there may lose a later stage (it goes to the stack and the tc
// twins) but never an earlier one (lib/pipeline.h).
func (m *Maps) Set(stages map[Stage]*ebpf.Program) error {
	if m.dir != "" {
		release, err := bpfrt.LockDir(m.dir, bpfrt.Exclusive)
		if err != nil {
			return fmt.Errorf("set pipeline: %w", err)
		}
		defer release()
	}
	c, err := m.gen()
	if err != nil {
		return err
	}
	old := c.Gen & 1
	idle := old ^ 1
	for s := Stage(0); s < Slots; s++ {
		key := uint32(s)
		if p, ok := stages[s]; ok && p != nil {
			if err := m.Progs[idle].Update(key, p, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("set pipeline stage %s: %w", s, err)
			}
			continue
		}
		if err := m.Progs[idle].Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clear pipeline stage %s: %w", s, err)
		}
	}
	c.Gen = idle
	if err := m.Config.Update(uint32(0), c, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("switch pipeline generation: %w", err)
	}
	for s := Stage(Slots - 1); ; s-- {
		if err := m.Progs[old].Delete(uint32(s)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clear old pipeline stage %s: %w", s, err)
		}
		if s == 0 {
			break
		}
	}
	return nil
}

// Switch is Set when stages differ from the active ones (nil undo when
// they do not); the undo makes the stages active before it the pipeline
// again, holding them open until it runs.
func (m *Maps) Switch(stages map[Stage]*ebpf.Program) (func() error, error) {
	have, err := m.Active()
	if err != nil {
		return nil, err
	}
	want, err := ids(stages)
	if err != nil {
		return nil, err
	}
	if maps.Equal(have, want) {
		return nil, nil
	}
	old := map[Stage]*ebpf.Program{}
	for s, id := range have {
		if p, err := ebpf.NewProgramFromID(id); err == nil {
			old[s] = p
		}
	}
	if err := m.Set(stages); err != nil {
		closeProgs(old)
		return nil, err
	}
	dir := m.dir
	return func() error {
		defer closeProgs(old)
		m, err := OpenMaps(dir)
		if err != nil {
			return err
		}
		defer m.Close()
		return m.Set(old)
	}, nil
}

// Join puts prog into the node's running pipeline (the maps in dir) as
// stage s, the other stages as they are, when the pipeline runs any;
// the pipeline driver's next switch keeps or drops it by its config. A
// stage's driver joins when its stage must run before that switch: the
// OPoT driver, before it hands chains' transit from the End to its
// stage (docs/opot.md "Changing sides").
func Join(dir string, s Stage, prog *ebpf.Program) (func() error, error) {
	m, err := OpenMaps(dir)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	have, err := m.Active()
	if err != nil || len(have) == 0 {
		return nil, err
	}
	want := map[Stage]*ebpf.Program{}
	defer func() {
		for st, p := range want {
			if st != s {
				p.Close()
			}
		}
	}()
	for st, id := range have {
		if st == s {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			return nil, fmt.Errorf("open pipeline stage %s: %w", st, err)
		}
		want[st] = p
	}
	want[s] = prog
	return m.Switch(want)
}

// Stats reads the per-stage outcome counters, summed over CPUs, as
// "stage/<stage>/<outcome>"; zero counters are left out.
func (m *Maps) Stats() (map[string]uint64, error) {
	out := map[string]uint64{}
	stages := slices.Sorted(func(yield func(Stage) bool) {
		for s := range stageNames {
			if !yield(s) {
				return
			}
		}
	})
	for _, s := range stages {
		for o, name := range outcomeNames {
			v, err := bpfrt.SumPerCPU(m.StatsMap, uint32(s)*outcomeSlots+uint32(o))
			if err != nil {
				return nil, fmt.Errorf("read pipeline counters: %w", err)
			}
			if v != 0 {
				out["stage/"+s.String()+"/"+name] = v
			}
		}
	}
	return out, nil
}

// LoadDispatcher loads the dispatcher bound to m.
func LoadDispatcher(m *Maps) (*ebpf.Program, error) {
	spec, err := loadPipeProg()
	if err != nil {
		return nil, fmt.Errorf("load pipeline dispatcher spec: %w", err)
	}
	var objs pipeProgPrograms
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: m.Replacements()}); err != nil {
		return nil, bpfrt.WrapLoad("load pipeline dispatcher", err)
	}
	return objs.SrchainPipeXdp, nil
}

// ProgName is the dispatcher's kernel name (what an interface's XDP hook
// runs on a node with a pipeline).
const ProgName = "srchain_pipe_xdp"

// PinStage pins prog as the XDP program of stage s under dir, replacing
// an earlier pin (the program it named keeps running until Set drops
// it). The new pin takes the old one's name in one rename, so the stage
// is never without a pin (an upgrade replaces the stages of running
// nodes).
func PinStage(dir string, s Stage, prog *ebpf.Program) error {
	path := StagePin(dir, s)
	tmp := filepath.Join(dir, "new_stage_"+s.String()) // bpffs names hold no dots
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin %s stage: %w", s, err)
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pin %s stage: %w", s, err)
	}
	if err := prog.Pin(tmp); err != nil {
		return fmt.Errorf("pin %s stage: %w", s, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("pin %s stage: %w", s, err), os.Remove(tmp))
	}
	return nil
}

// UnpinStage removes the pin of stage s (none: nothing to do).
func UnpinStage(dir string, s Stage) error {
	if err := os.Remove(StagePin(dir, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin %s stage: %w", s, err)
	}
	return nil
}

// StagePinned reports whether stage s has a pinned program under dir.
func StagePinned(dir string, s Stage) bool {
	_, err := os.Stat(StagePin(dir, s))
	return err == nil
}

// StageRuns reports whether stage s has a pinned program under dir with
// prog's code (bpfrt.SameCode): false for none, or for another srchain
// build's, which the stage's driver then pins again.
func StageRuns(dir string, s Stage, prog *ebpf.Program) bool {
	p, err := ebpf.LoadPinnedProgram(StagePin(dir, s), nil)
	if err != nil {
		return false
	}
	defer p.Close()
	same, err := bpfrt.SameCode(p, prog)
	return err == nil && same
}
