package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/srchain/srchain/internal/compile"
	_ "github.com/srchain/srchain/internal/kinds/all" // the spec's NFs are of kind forward
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// The control-plane benchmark (`srchain bench control`) times what an
// operator waits for with n chains: validate+compile of the spec, `lab
// up`, `lab status`, `lab apply FILE` with one chain changed, `lab apply
// NAME` with nothing to do, and `lab down`. Unlike the data-plane cases
// it reports absolute times (there is no baseline to divide by), with
// the spread over rounds.

// Control steps, in the order they run.
const (
	StepCompile   = "validate+compile"
	StepUp        = "lab up"
	StepStatus    = "lab status"
	StepChange    = "apply 1 changed chain"
	StepReapply   = "apply unchanged"
	StepDown      = "lab down"
	stepRecompile = "compile changed spec"
)

// ControlSteps lists the steps reported per chain count.
var ControlSteps = []string{StepCompile, StepUp, StepStatus, StepChange, StepReapply, StepDown}

// ControlOptions tune RunControl.
type ControlOptions struct {
	Chains []int // chain counts, e.g. 100, 1000, 10000
	Rounds int
	// Lab names the labs (lab name: <Lab>-<chains>); StateDir holds
	// their records (empty: lab's default).
	Lab      string
	StateDir string
	Logger   *slog.Logger
}

// ControlPoint is one step at one chain count: every round's time.
type ControlPoint struct {
	Chains  int             `json:"chains"`
	Step    string          `json:"step"`
	Rounds  []time.Duration `json:"rounds_ns"`
	Summary Summary         `json:"summary_seconds"`
	// Changes counts what the step changed in its last round (apply
	// steps), the proof that a re-apply did what it should.
	Changes int `json:"changes,omitempty"`
}

// ControlSpec is the spec the benchmark deploys: h1 - r1 - r2 - r3 - h2,
// NFs fw and fw2 on r2, and n chains from r1 to r3 through fw, half with
// a 5-tuple classifier (UDP to port 10000+i: a rule and a table of its
// own on r1), half with a destination prefix of their own (fd00:i::/64:
// a route in r1's main table); every chain has its own End.DT6 SID on r3.
// With changed set, chain n/2 also crosses fw2.
func ControlSpec(name string, n int, changed bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `name: %s
nodes:
  - {name: h1, role: host}
  - {name: r1, role: router, locator: "fc00:1::/64"}
  - {name: r2, role: router, locator: "fc00:2::/64"}
  - {name: r3, role: router, locator: "fc00:3::/64"}
  - {name: h2, role: host}
links:
  - endpoints: [{node: h1, interface: eth0, addresses: ["fc00:a1::1/64"]}, {node: r1, interface: eth0, addresses: ["fc00:a1::2/64"]}]
  - endpoints: [{node: r1, interface: eth1, addresses: ["fc00:a2::1/64"]}, {node: r2, interface: eth0, addresses: ["fc00:a2::2/64"]}]
  - endpoints: [{node: r2, interface: eth1, addresses: ["fc00:a3::1/64"]}, {node: r3, interface: eth0, addresses: ["fc00:a3::2/64"]}]
  - endpoints: [{node: r3, interface: eth1, addresses: ["fc00:a4::1/64"]}, {node: h2, interface: eth0, addresses: ["fc00:a4::2/64"]}]
nfs:
  - {name: fw, node: r2}
  - {name: fw2, node: r2}
chains:
`, name)
	for i := range n {
		nfs := "fw"
		if changed && i == n/2 {
			nfs = "fw, fw2"
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, "  - {name: c%d, ingress: r1, egress: r3, match: {dst: [\"fc00:a4::/64\"], proto: udp, dport: %d}, nfs: [%s]}\n", i, 10000+i, nfs)
		} else {
			fmt.Fprintf(&b, "  - {name: c%d, ingress: r1, egress: r3, match: {dst: [\"fd00:%x::/64\"]}, nfs: [%s]}\n", i, i, nfs)
		}
	}
	return []byte(b.String())
}

// compileSpec parses, validates and compiles a spec document.
func compileSpec(doc []byte, file string) (*state.Network, error) {
	s, err := spec.Parse(doc, file)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return compile.Compile(s)
}

// RunControl runs every round of every chain count and returns one point
// per (chain count, step). A lab it made is always removed, also when a
// step fails or ctx ends.
func RunControl(ctx context.Context, o ControlOptions) ([]ControlPoint, error) {
	if o.Rounds < 1 || len(o.Chains) == 0 || o.Lab == "" {
		return nil, fmt.Errorf("control bench: need rounds >= 1, chain counts and a lab name: %w", ErrBadOptions)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	var out []ControlPoint
	for _, n := range o.Chains {
		if n < 1 || n > spec.MaxChains {
			return nil, fmt.Errorf("control bench: %d chains: want 1..%d: %w", n, spec.MaxChains, ErrBadOptions)
		}
		times := map[string][]time.Duration{}
		changes := map[string]int{}
		for r := range o.Rounds {
			if err := ctx.Err(); err != nil {
				return out, fmt.Errorf("control bench: %w", err)
			}
			got, ch, err := controlRound(ctx, o, n)
			if err != nil {
				return out, fmt.Errorf("control bench %d chains, round %d: %w", n, r+1, err)
			}
			for k, d := range got {
				times[k] = append(times[k], d)
			}
			changes = ch
			log.Info("control round", "chains", n, "round", r+1, "up", got[StepUp].Round(time.Millisecond),
				"status", got[StepStatus].Round(time.Millisecond), "change", got[StepChange].Round(time.Millisecond))
		}
		for _, step := range append(append([]string(nil), ControlSteps...), stepRecompile) {
			secs := make([]float64, len(times[step]))
			for i, d := range times[step] {
				secs[i] = d.Seconds()
			}
			sum, _ := Summarize(secs)
			out = append(out, ControlPoint{Chains: n, Step: step, Rounds: times[step], Summary: sum, Changes: changes[step]})
		}
	}
	return out, nil
}

// controlRound times one round at n chains.
func controlRound(ctx context.Context, o ControlOptions, n int) (map[string]time.Duration, map[string]int, error) {
	name := fmt.Sprintf("%s-%d", o.Lab, n)
	opts := lab.Options{StateDir: o.StateDir, Logger: o.Logger}
	got := map[string]time.Duration{}
	changes := map[string]int{}
	timed := func(step string, f func() error) error {
		t0 := time.Now()
		err := f()
		got[step] = time.Since(t0)
		if err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		return nil
	}
	var net, net2 *state.Network
	if err := timed(StepCompile, func() (err error) {
		net, err = compileSpec(ControlSpec(name, n, false), name+".yaml")
		return err
	}); err != nil {
		return nil, nil, err
	}
	var downErr error
	defer func() {
		if _, ok := got[StepDown]; !ok {
			_ = lab.Down(context.WithoutCancel(ctx), name, opts)
		}
	}()
	err := timed(StepUp, func() error {
		_, err := lab.Up(ctx, net, lab.UpOptions{Options: opts})
		return err
	})
	if err == nil {
		err = timed(StepStatus, func() error {
			sts, err := lab.Status(ctx, name, opts)
			for _, s := range sts {
				if err == nil && !s.OK() {
					err = fmt.Errorf("node %s: %s", s.Node, strings.Join(s.Problems, "; "))
				}
			}
			return err
		})
	}
	if err == nil {
		err = timed(stepRecompile, func() (err error) {
			net2, err = compileSpec(ControlSpec(name, n, true), name+".yaml")
			return err
		})
	}
	if err == nil {
		err = timed(StepChange, func() error {
			c, err := lab.Update(ctx, net2, lab.UpOptions{Options: opts})
			changes[StepChange] = total(c)
			return err
		})
	}
	if err == nil && changes[StepChange] == 0 {
		err = errors.New("apply of a changed chain changed nothing")
	}
	if err == nil {
		err = timed(StepReapply, func() error {
			c, err := lab.Reapply(ctx, name, opts)
			changes[StepReapply] = total(c)
			return err
		})
	}
	if err == nil && changes[StepReapply] != 0 {
		err = fmt.Errorf("re-apply of an unchanged lab made %d changes", changes[StepReapply])
	}
	downErr = timed(StepDown, func() error { return lab.Down(context.WithoutCancel(ctx), name, opts) })
	return got, changes, errors.Join(err, downErr)
}

func total(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// WriteControl prints the points as a markdown table: per chain count and
// step, the median and the min..max over rounds.
func WriteControl(w io.Writer, pts []ControlPoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| chains\t| step\t| median\t| min .. max\t| rounds\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|")
	for _, p := range pts {
		fmt.Fprintf(tw, "| %d\t| %s\t| %s\t| %s .. %s\t| %d\t|\n", p.Chains, p.Step,
			secs(p.Summary.Median), secs(p.Summary.Min), secs(p.Summary.Max), p.Summary.N)
	}
	return tw.Flush()
}

// secs formats seconds with a unit that keeps 3 significant digits.
func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", s*1e3)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}
