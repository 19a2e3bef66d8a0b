package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/srchain/srchain/internal/netns"
)

// ErrUnknownScenario is returned for a scenario name not in the registry.
var ErrUnknownScenario = errors.New("unknown scenario")

// ErrUnknownCase is returned for a case name not in the scenario.
var ErrUnknownCase = errors.New("unknown case")

// Case is one DUT configuration and the frames sent through it. Adding a
// case is a struct literal: a name, the frames, and the DUT commands.
type Case struct {
	Name  string
	Desc  string
	Frame FrameSpec
	// X places the case on the x axis of the scenario's plot (e.g. the
	// number of rules); 0 plots the cases as bars.
	X float64
	// Series groups cases into one line of the x plot (e.g. "nft forward").
	Series string
	// XDP marks a case whose fast path runs at XDP: with a scenario
	// Ceiling it is also reported as a fraction of the ceiling case.
	XDP bool
	// Flows > 1 makes the generator vary the inner IPv6 source address
	// per packet over this many flows (FlowOffset), beyond what
	// templates can hold (MaxTemplates); the run's --flows is then not
	// used for this case. IPv6 inner packets only.
	Flows int
	// CounterOffset, when > 0 with Flows > 1, is where the generator
	// writes its per-packet counter instead of the inner source address
	// (FlowOffset): e.g. inside an OPoT TLV's RND, so that every packet
	// carries a fresh sequence number (cases_opot.go).
	CounterOffset int
	// Setup configures the DUT of a fresh line (routes to the sink exist
	// already, see NewLine).
	Setup func(ctx context.Context, d *DUT) error
}

// Scenario is a named set of cases and the baseline their ratios use.
type Scenario struct {
	Name     string
	Desc     string
	Baseline string // name of the case every ratio divides by
	// Ceiling, when set, names the case that bounds the XDP cases (a
	// bare XDP redirect): each XDP case is also reported as a fraction
	// of it (Point.OfCeiling).
	Ceiling string
	XLabel  string // plot x axis when cases have X
	Cases   []Case
	// Goals are the issues' goals for cases of the scenario, reported
	// with every run that measured both sides (results.md "Goals").
	Goals []Goal
}

// Goal is a target for a case: its rate at least Min times Base's, in
// the same run (issue 9: end.ad >= 0.9x nf-plain, ...).
type Goal struct {
	Case string  `json:"case"`
	Base string  `json:"base"`
	Min  float64 `json:"min"`
}

// DUT gives case setups the DUT namespace and shortcuts for the tools
// they use. Commands run inside the DUT namespace only.
type DUT struct {
	NS       *netns.NS
	cleanups []func() error
}

// Defer registers fn to run when the case's line is torn down (loaded BPF
// objects, links), in reverse order of registration.
func (d *DUT) Defer(fn func() error) { d.cleanups = append(d.cleanups, fn) }

// Index returns the ifindex of a DUT interface ("in0" or "out0").
func (d *DUT) Index(name string) (int, error) {
	_, idx, err := linkInfo(d.NS, name)
	return idx, err
}

func (d *DUT) close() error {
	var errs []error
	for i := len(d.cleanups) - 1; i >= 0; i-- {
		errs = append(errs, d.cleanups[i]())
	}
	d.cleanups = nil
	return errors.Join(errs...)
}

// IP runs `ip ARGS...` in the DUT.
func (d *DUT) IP(ctx context.Context, args ...string) error {
	_, err := d.NS.Run(ctx, "ip", args...)
	return err
}

// IPs runs several ip commands, each a space-separated string.
func (d *DUT) IPs(ctx context.Context, cmds ...string) error {
	for _, c := range cmds {
		if err := d.IP(ctx, strings.Fields(c)...); err != nil {
			return err
		}
	}
	return nil
}

// Nft loads an nftables script in the DUT.
func (d *DUT) Nft(ctx context.Context, script string) error {
	return d.stdin(ctx, script, "nft", "-f", "-")
}

// IP6TablesRestore loads an ip6tables-restore script (all at once: one
// command per rule would take seconds at 512 rules).
func (d *DUT) IP6TablesRestore(ctx context.Context, script string) error {
	return d.stdin(ctx, script, "ip6tables-restore")
}

func (d *DUT) stdin(ctx context.Context, in, name string, args ...string) error {
	cmd := d.NS.Command(ctx, name, args...)
	cmd.Stdin = strings.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("run %s in %s: %s: %w", name, d.NS.Name, strings.TrimSpace(string(out)), err)
	}
	return nil
}

var (
	regMu     sync.Mutex
	scenarios = map[string]*Scenario{}
)

// Register adds a scenario; later issues call it from their own files'
// init functions. A duplicate name replaces the earlier scenario.
func Register(s *Scenario) {
	regMu.Lock()
	defer regMu.Unlock()
	scenarios[s.Name] = s
}

// Lookup returns a registered scenario.
func Lookup(name string) (*Scenario, error) {
	regMu.Lock()
	defer regMu.Unlock()
	s, ok := scenarios[name]
	if !ok {
		return nil, fmt.Errorf("find scenario %q: %w", name, ErrUnknownScenario)
	}
	return s, nil
}

// Scenarios returns the registered scenarios sorted by name.
func Scenarios() []*Scenario {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]*Scenario, 0, len(scenarios))
	for _, s := range scenarios {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Scenario) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Select returns a copy of s restricted to the named cases (the baseline
// is always kept so ratios exist).
func (s *Scenario) Select(names []string) (*Scenario, error) {
	if len(names) == 0 {
		return s, nil
	}
	c := *s
	c.Cases = nil
	for _, k := range s.Cases {
		if k.Name == s.Baseline || slices.Contains(names, k.Name) {
			c.Cases = append(c.Cases, k)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(c.Cases, func(k Case) bool { return k.Name == n }) {
			valid := make([]string, 0, len(s.Cases))
			for _, k := range s.Cases {
				valid = append(valid, k.Name)
			}
			return nil, fmt.Errorf("select case %q of scenario %s: %w (valid: %s)", n, s.Name, ErrUnknownCase, strings.Join(valid, ", "))
		}
	}
	return &c, nil
}
