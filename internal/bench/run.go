package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// Modes.
const (
	ModeMax     = "max"     // highest forwarding rate, generator at full speed
	ModePDR     = "pdr"     // RFC 2544 throughput with a loss threshold
	ModeLatency = "latency" // one-way latency at a fixed low rate
)

// Layouts: where the generator and the DUT run (MACHINE-NOTES: ratios of
// both agree within ~0.03; absolute rates differ by ~1.5x).
const (
	// LayoutOne: generator, DUT and sink softirqs share CPU 0 (the DUT's
	// receive runs in the generator's softirq), so each packet costs the
	// sum and the rate is steady; the default.
	LayoutOne = "one"
	// LayoutTwo: generator on CPU 0, the DUT's receive steered to CPU 1
	// by RPS on its ingress veth.
	LayoutTwo = "two"
)

// ErrBadOptions is returned for options that cannot run.
var ErrBadOptions = errors.New("bad options")

// Options of a run.
type Options struct {
	Mode     string        `json:"mode"`
	Rounds   int           `json:"rounds"`
	Warmup   time.Duration `json:"warmup_ns"`
	Duration time.Duration `json:"duration_ns"`
	// Sizes are Ethernet frame sizes with FCS; 0 is each case's smallest.
	Sizes []int `json:"sizes"`
	IMIX  bool  `json:"imix"`
	Flows int   `json:"flows"`
	// Layout is LayoutOne or LayoutTwo.
	Layout string `json:"layout"`
	// Threshold is the PDR loss fraction (0.005 = 0.5%, seed 001).
	Threshold float64 `json:"threshold"`
	// LatencyRate is the offered rate in latency mode (pps).
	LatencyRate float64 `json:"latency_rate"`
	// Prefix names the namespaces ("srcb-<pid>"); they end in -<case>-g/d/s.
	Prefix string `json:"-"`
	// BPFStats turns on the kernel's BPF run-time statistics for the
	// run and records each round's work of the DUT's programs
	// (Round.BPF; bpfstats.go). It slows every program run a little.
	BPFStats bool `json:"bpf_stats,omitempty"`
}

// DefaultOptions are the MACHINE-NOTES method: 1 s warm-up, 4 s
// measurement, 3 interleaved rounds.
func DefaultOptions() Options {
	return Options{
		Mode: ModeMax, Rounds: 3, Warmup: time.Second, Duration: 4 * time.Second,
		Sizes: []int{0}, Flows: 1, Layout: LayoutOne, Threshold: 0.005,
		LatencyRate: 10000, Prefix: fmt.Sprintf("srcb-%d", os.Getpid()),
	}
}

func (o *Options) check() error {
	switch {
	case o.Mode != ModeMax && o.Mode != ModePDR && o.Mode != ModeLatency:
		return fmt.Errorf("check options: mode %q: %w", o.Mode, ErrBadOptions)
	case o.Layout != LayoutOne && o.Layout != LayoutTwo:
		return fmt.Errorf("check options: layout %q: %w", o.Layout, ErrBadOptions)
	case o.Rounds < 1 || o.Duration <= 0 || o.Warmup < 0:
		return fmt.Errorf("check options: rounds/duration: %w", ErrBadOptions)
	case o.Mode == ModePDR && (o.Threshold < 0 || o.Threshold >= 1):
		return fmt.Errorf("check options: threshold %v: %w", o.Threshold, ErrBadOptions)
	case o.Mode == ModeLatency && o.LatencyRate <= 0:
		return fmt.Errorf("check options: latency rate: %w", ErrBadOptions)
	case o.Prefix == "":
		return fmt.Errorf("check options: empty namespace prefix: %w", ErrBadOptions)
	case o.Flows < 1:
		return fmt.Errorf("check options: flows %d: want at least 1: %w", o.Flows, ErrBadOptions)
	}
	// Every template the generator cycles through is one size x one flow;
	// refuse what BuildTemplates would refuse before anything is built.
	perFlow := 1
	if o.IMIX {
		perFlow = len(imixSeq)
	}
	if perFlow*o.Flows > MaxTemplates {
		what := fmt.Sprintf("%d flows", o.Flows)
		if o.IMIX {
			what = fmt.Sprintf("imix (%d frames) x %d flows", perFlow, o.Flows)
		}
		return fmt.Errorf("check options: %s = %d templates > %d (at most %d flows): %w",
			what, perFlow*o.Flows, MaxTemplates, MaxTemplates/perFlow, ErrBadOptions)
	}
	for _, sz := range o.Sizes {
		if sz < 0 || sz > MaxFrame+fcsLen {
			return fmt.Errorf("check options: size %d: want 0..%d: %w", sz, MaxFrame+fcsLen, ErrBadOptions)
		}
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []int{0}
	}
	if o.IMIX {
		o.Sizes = []int{0} // one IMIX point per case
	}
	return nil
}

// DefaultLayout is the layout a mode uses when none is asked for: pdr
// needs the DUT on its own CPU (in layout one the DUT runs inline with
// the generator, so the PDR equals the max rate by construction); the
// other modes use layout one.
func DefaultLayout(mode string) string {
	if mode == ModePDR {
		return LayoutTwo
	}
	return LayoutOne
}

// Round is one measurement of one case at one size.
type Round struct {
	Round   int     `json:"round"`
	Seconds float64 `json:"seconds"`
	// Value is what the mode measures: forwarded pps (max; per CPU
	// second in the one-CPU layout, PPSPerCPU), the PDR (pdr: the offered
	// rate the best passing trial achieved) or the p50 latency in
	// microseconds (latency). In pdr mode every other field of the round
	// describes that trial, and MaxOfferedPPS the max-rate trial that
	// bounded the search.
	Value      float64 `json:"value"`
	PPS        float64 `json:"pps"` // DUT egress tx rate
	OfferedPPS float64 `json:"offered_pps"`
	SinkPPS    float64 `json:"sink_pps"`
	// PPSPerCPU is DUT tx per CPU-second of the generator thread plus
	// ksoftirqd/0: in the one-CPU layout the thread also carries the
	// DUT's and sink's softirq work (see Generator.CPUTime) and
	// ksoftirqd/0 whatever NET_RX work the kernel deferred from it, so
	// this is the rate one whole core would reach, insensitive to other
	// load on the machine. CPUSeconds is the generator thread's time
	// alone; CPUShare is the fraction of the wall time it got.
	PPSPerCPU  float64 `json:"pps_per_cpu"`
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUShare   float64 `json:"cpu_share"`
	// KsoftirqdSeconds is ksoftirqd/0's CPU time in the window: work
	// not charged to the generator thread (~0.5% of it in practice),
	// counted in PPSPerCPU's denominator.
	KsoftirqdSeconds float64 `json:"ksoftirqd_seconds"`
	Offered          uint64  `json:"offered"`
	DUTRx            uint64  `json:"dut_rx"`
	DUTRxDrop        uint64  `json:"dut_rx_drop"`
	DUTTx            uint64  `json:"dut_tx"`
	DUTTxDrop        uint64  `json:"dut_tx_drop"`
	Sink             uint64  `json:"sink"`
	// Loss is 1 - sink/offered.
	Loss  float64      `json:"loss"`
	Steps []SearchStep `json:"pdr_steps,omitempty"`
	// MaxOfferedPPS is the offered rate of the pdr mode's max-rate trial.
	MaxOfferedPPS float64 `json:"pdr_max_offered_pps,omitempty"`
	LatN          int     `json:"lat_n,omitempty"`
	LatAvg        float64 `json:"lat_mean_us,omitempty"`
	LatP50        float64 `json:"lat_p50_us,omitempty"`
	LatP99        float64 `json:"lat_p99_us,omitempty"`
	// BPF is the work of the DUT's programs in the round, with
	// Options.BPFStats.
	BPF []ProgCost `json:"bpf,omitempty"`
}

// BPFNsPerPacket is the DUT's BPF time in the round per packet it sent
// (0: not measured).
func (r Round) BPFNsPerPacket() float64 {
	var ns uint64
	for _, c := range r.BPF {
		ns += c.Ns
	}
	if r.DUTTx == 0 {
		return 0
	}
	return float64(ns) / float64(r.DUTTx)
}

// Point is one case at one size with its rounds and their summary.
type Point struct {
	Case       string  `json:"case"`
	Desc       string  `json:"desc"`
	Series     string  `json:"series,omitempty"`
	X          float64 `json:"x,omitempty"`
	Size       int     `json:"size"` // requested size, 0 = smallest
	FrameBytes []int   `json:"frame_bytes"`
	Rounds     []Round `json:"rounds"`
	Summary    Summary `json:"summary"`
	// Ratio is Summary.Median over the baseline's median at the same size;
	// RatioMin/Max use this case's min/max against the baseline median.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
	// Paired are the per-round ratios to the baseline's rounds of the
	// same index, FastRatio the ratio of the fastest fifth of rounds
	// (stats.go; max and pdr modes, with at least 3 rounds paired).
	Paired    *Paired `json:"paired,omitempty"`
	FastRatio float64 `json:"fast_ratio,omitempty"`
	// XDP: the case runs at XDP; OfCeiling is then its median over the
	// scenario's ceiling case's median at the same size (0: no ceiling).
	XDP       bool    `json:"xdp,omitempty"`
	OfCeiling float64 `json:"of_ceiling,omitempty"`
	// SinkOverDUT is the median ratio of sink count to DUT tx count, the
	// cross-check (about 1 when both agree).
	SinkOverDUT float64 `json:"sink_over_dut"`
	// Err is the set-up error (no rounds at all) or the rounds' errors,
	// "round N: ..." joined by "; ". A round that fails does not stop
	// the case: later rounds are still measured (see RoundErrors).
	Err         string       `json:"error,omitempty"`
	RoundErrors []RoundError `json:"round_errors,omitempty"`
}

// RoundError is one failed round of a point.
type RoundError struct {
	Round int    `json:"round"`
	Err   string `json:"error"`
}

// Machine describes where a run happened.
type Machine struct {
	Kernel string `json:"kernel"`
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu"`
	Note   string `json:"note,omitempty"`
}

// Result is a whole run of a scenario.
type Result struct {
	Scenario string    `json:"scenario"`
	Desc     string    `json:"desc"`
	Baseline string    `json:"baseline"`
	Ceiling  string    `json:"ceiling,omitempty"`
	XLabel   string    `json:"xlabel,omitempty"`
	Mode     string    `json:"mode"`
	Options  Options   `json:"options"`
	Machine  Machine   `json:"machine"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Points   []Point   `json:"points"`
	// Goals are the scenario's goals whose case and base both ran, one
	// per size, with what this run measured (Finish).
	Goals []GoalResult `json:"goals,omitempty"`
}

// GoalResult is a goal at one size and the run's ratios of the goal's
// case to its base: of the medians, paired by round, of the fastest
// fifth of rounds (stats.go).
type GoalResult struct {
	Goal
	Size      int     `json:"size"`
	Ratio     float64 `json:"ratio"`
	Paired    *Paired `json:"paired,omitempty"`
	FastRatio float64 `json:"fast_ratio,omitempty"`
}

// Verdict says whether the run meets the goal: "met" when the paired
// median and the fastest-fifth ratio both reach it, "not met" when
// neither does, else "at the edge" (the two estimates disagree); "not
// measured" with fewer than minPaired round pairs.
func (g GoalResult) Verdict() string {
	if g.Paired == nil {
		return "not measured"
	}
	a, b := g.Paired.Median >= g.Min, g.FastRatio >= g.Min
	switch {
	case a && b:
		return "met"
	case !a && !b:
		return "not met"
	}
	return "at the edge"
}

// Err returns an error naming every point that failed (set-up failure or
// any failed round), nil when all were measured in every round.
func (res *Result) Err() error {
	var errs []error
	for _, p := range res.Points {
		if p.Err == "" {
			continue
		}
		errs = append(errs, fmt.Errorf("case %s (size %d): %d/%d rounds: %s", p.Case, p.Size, len(p.Rounds), res.Options.Rounds, p.Err))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("run %s: %d of %d points failed: %w", res.Scenario, len(errs), len(res.Points), errors.Join(errs...))
}

// rig is one case's line with its generator and sink.
type rig struct {
	c        Case
	bpfStats bool  // Options.BPFStats
	err      error // set-up failure
	dut      *DUT
	line     *Line
	gen      *Generator
	sink     *Sink
}

func (r *rig) close() error {
	var errs []error
	if r.gen != nil {
		errs = append(errs, r.gen.Close())
		r.gen = nil
	}
	if r.sink != nil {
		errs = append(errs, r.sink.Close())
		r.sink = nil
	}
	if r.dut != nil {
		errs = append(errs, r.dut.close())
		r.dut = nil
	}
	if r.line != nil {
		errs = append(errs, r.line.Close())
		r.line = nil
	}
	return errors.Join(errs...)
}

// Run measures every case of sc, rounds interleaved (A B C A B C ...) so
// drift hits all cases alike, and returns the result with ratios to the
// scenario's baseline. Everything it creates is removed before it
// returns, also when ctx is cancelled (Ctrl-C) or a step fails.
func Run(ctx context.Context, sc *Scenario, o Options) (res *Result, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Layout == LayoutTwo && runtime.NumCPU() < 2 {
		return nil, fmt.Errorf("run %s: layout two needs 2 cpus: %w", sc.Name, ErrBadOptions)
	}
	res = &Result{Scenario: sc.Name, Desc: sc.Desc, Baseline: sc.Baseline, Ceiling: sc.Ceiling, XLabel: sc.XLabel,
		Mode: o.Mode, Options: o, Machine: ThisMachine(), Start: time.Now()}
	if o.Mode != ModeLatency {
		res.Goals = goalsFor(sc.Goals, func(n string) bool {
			return slices.ContainsFunc(sc.Cases, func(c Case) bool { return c.Name == n })
		}, o.Sizes)
	}

	if o.BPFStats {
		st, err := enableBPFStats()
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", sc.Name, err)
		}
		defer st.Close()
	}
	rigs := make([]*rig, 0, len(sc.Cases))
	defer func() {
		for _, r := range rigs {
			if cerr := r.close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up %s: %w", r.c.Name, cerr))
			}
		}
	}()
	for i, c := range sc.Cases {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run %s: %w", sc.Name, err)
		}
		r := &rig{c: c, bpfStats: o.BPFStats}
		rigs = append(rigs, r)
		if err := r.setup(ctx, fmt.Sprintf("%s-%d", o.Prefix, i), o); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("run %s: %w", sc.Name, ctx.Err())
			}
			// A case that cannot be set up (e.g. a behavior this kernel
			// lacks) is reported, not fatal: the others still measure.
			r.err = fmt.Errorf("set up case %s: %w", c.Name, err)
			slog.Warn("case skipped", "case", c.Name, "err", err)
			if cerr := r.close(); cerr != nil {
				slog.Warn("clean up case", "case", c.Name, "err", cerr)
			}
			continue
		}
		slog.Debug("case ready", "case", c.Name)
	}

	// One point per case and size, in case order within each size.
	type key struct{ ci, si int }
	pts := map[key]*Point{}
	for si, size := range o.Sizes {
		for ci, r := range rigs {
			p := &Point{Case: r.c.Name, Desc: r.c.Desc, Series: r.c.Series, X: r.c.X, Size: size, XDP: r.c.XDP}
			if r.err != nil {
				p.Err = r.err.Error()
			}
			pts[key{ci, si}] = p
		}
	}
	for round := range o.Rounds {
		for si, size := range o.Sizes {
			for ci, r := range rigs {
				p := pts[key{ci, si}]
				if r.err != nil {
					continue // never set up
				}
				rd, fb, err := r.measure(ctx, o, size)
				if ctx.Err() != nil {
					return nil, fmt.Errorf("run %s: %w", sc.Name, ctx.Err())
				}
				if err != nil {
					// A broken round must not sink the others, nor the
					// case's later rounds: record it and go on.
					slog.Warn("round failed", "case", r.c.Name, "size", size, "round", round, "err", err)
					p.RoundErrors = append(p.RoundErrors, RoundError{Round: round, Err: err.Error()})
					msg := fmt.Sprintf("round %d: %v", round, err)
					if p.Err != "" {
						msg = p.Err + "; " + msg
					}
					p.Err = msg
					continue
				}
				rd.Round = round
				p.FrameBytes = fb
				p.Rounds = append(p.Rounds, rd)
				slog.Info("measured", "case", r.c.Name, "size", size, "round", round,
					"value", strconv.FormatFloat(rd.Value, 'f', 0, 64), "dut_tx_pps", int(rd.PPS),
					"offered_pps", int(rd.OfferedPPS), "loss", strconv.FormatFloat(rd.Loss, 'f', 4, 64))
			}
		}
	}
	for si := range o.Sizes {
		for ci := range rigs {
			res.Points = append(res.Points, *pts[key{ci, si}])
		}
	}
	Finish(res)
	res.End = time.Now()
	return res, nil
}

// Finish computes every point's summary and ratio to the baseline at the
// same size (also used by report on loaded results).
func Finish(res *Result) {
	base, ceil := map[int]float64{}, map[int]float64{}
	baseRounds := map[int][]Round{}
	for i := range res.Points {
		p := &res.Points[i]
		var cross []float64
		for _, r := range p.Rounds {
			if r.DUTTx > 0 {
				cross = append(cross, float64(r.Sink)/float64(r.DUTTx))
			}
		}
		p.Summary, _ = Summarize(values(p.Rounds))
		if c, err := Summarize(cross); err == nil {
			p.SinkOverDUT = c.Median
		}
		if p.Case == res.Baseline && p.Summary.N > 0 {
			base[p.Size] = p.Summary.Median
			baseRounds[p.Size] = p.Rounds
		}
		if p.Case == res.Ceiling && p.Summary.N > 0 {
			ceil[p.Size] = p.Summary.Median
		}
	}
	for i := range res.Points {
		p := &res.Points[i]
		b, ok := base[p.Size]
		if !ok || p.Summary.N == 0 {
			p.Ratio, p.RatioMin, p.RatioMax = math.NaN(), math.NaN(), math.NaN()
			continue
		}
		p.Ratio = Ratio(p.Summary.Median, b)
		p.RatioMin = Ratio(p.Summary.Min, b)
		p.RatioMax = Ratio(p.Summary.Max, b)
		p.Paired, p.FastRatio = nil, 0
		if res.Mode != ModeLatency && p.Case != res.Baseline {
			if pr, fast := pairedTo(p.Rounds, baseRounds[p.Size]); pr != nil && pr.N >= minPaired {
				p.Paired, p.FastRatio = pr, fast
			}
		}
		if c, ok := ceil[p.Size]; ok && p.XDP {
			p.OfCeiling = Ratio(p.Summary.Median, c)
		}
	}
	for i := range res.Goals {
		g := &res.Goals[i]
		c, b := res.point(g.Case, g.Size), res.point(g.Base, g.Size)
		g.Ratio, g.Paired, g.FastRatio = math.NaN(), nil, 0
		if c == nil || b == nil || c.Summary.N == 0 || b.Summary.N == 0 {
			continue
		}
		g.Ratio = Ratio(c.Summary.Median, b.Summary.Median)
		if pr, fast := pairedTo(c.Rounds, b.Rounds); pr != nil && pr.N >= minPaired {
			g.Paired, g.FastRatio = pr, fast
		}
	}
}

// goalsFor are the goals whose case and base both ran, at every size.
func goalsFor(goals []Goal, ran func(string) bool, sizes []int) []GoalResult {
	var out []GoalResult
	for _, g := range goals {
		if ran(g.Case) && ran(g.Base) {
			for _, size := range sizes {
				out = append(out, GoalResult{Goal: g, Size: size})
			}
		}
	}
	return out
}

// AddGoals gives a result read from an older run (without goals) the
// goals its scenario has now, for what it measured.
func AddGoals(res *Result) {
	sc, err := Lookup(res.Scenario)
	if err != nil || len(res.Goals) > 0 || res.Mode == ModeLatency {
		return
	}
	sizes := map[int]bool{}
	for _, p := range res.Points {
		sizes[p.Size] = true
	}
	res.Goals = goalsFor(sc.Goals, func(n string) bool {
		return slices.ContainsFunc(res.Points, func(p Point) bool { return p.Case == n })
	}, slices.Sorted(maps.Keys(sizes)))
	Finish(res)
}

// point is the case's point at size, nil when the run has none.
func (res *Result) point(name string, size int) *Point {
	for i := range res.Points {
		if res.Points[i].Case == name && res.Points[i].Size == size {
			return &res.Points[i]
		}
	}
	return nil
}

// minPaired is the fewest round pairs a paired ratio is reported from.
const minPaired = 3

// pairedTo is c's paired and fastest-fifth ratios to base (nil, 0: no
// round pairs).
func pairedTo(c, base []Round) (*Paired, float64) {
	pr, err := PairedRatios(c, base)
	if err != nil {
		return nil, 0
	}
	return &pr, FastRatio(values(c), values(base))
}

// values are the rounds' values.
func values(rs []Round) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.Value
	}
	return out
}

func (r *rig) setup(ctx context.Context, name string, o Options) error {
	var err error
	if r.line, err = NewLine(ctx, name); err != nil {
		return err
	}
	if o.Layout == LayoutTwo {
		// RPS moves the DUT's receive processing off the generator's CPU.
		path := "/sys/class/net/" + ifDUTIn + "/queues/rx-0/rps_cpus"
		if _, err := r.line.DUT.Run(ctx, "sh", "-c", "echo 2 > "+path); err != nil {
			return err
		}
	}
	r.dut = &DUT{NS: r.line.DUT}
	if r.c.Setup != nil {
		if err := r.c.Setup(ctx, r.dut); err != nil {
			return err
		}
	}
	if r.sink, err = NewSink(r.line); err != nil {
		return err
	}
	if r.gen, err = NewGenerator(r.line); err != nil {
		return err
	}
	return nil
}

// counters is a snapshot of everything a round compares.
type counters struct {
	at      time.Time
	cpu     time.Duration // generator thread CPU time
	ksirq   time.Duration // ksoftirqd/0 CPU time
	sent    uint64
	in, out linkStats
	sink    SinkCount
	progs   map[ebpf.ProgramID]progStat // with Options.BPFStats
}

func (r *rig) snapshot() (counters, error) {
	var c counters
	var err error
	if c.sent, err = r.gen.Sent(); err != nil {
		return c, err
	}
	if c.cpu, err = r.gen.CPUTime(); err != nil {
		return c, err
	}
	c.ksirq = ksoftirqdTime(0)
	if c.in, err = readLinkStats(r.line.DUT, ifDUTIn); err != nil {
		return c, err
	}
	if c.out, err = readLinkStats(r.line.DUT, ifDUTOut); err != nil {
		return c, err
	}
	if c.sink, err = r.sink.Count(); err != nil {
		return c, err
	}
	if r.bpfStats {
		if c.progs, err = dutProgStats(r.line.DUT); err != nil {
			return c, err
		}
	}
	c.at = time.Now()
	return c, nil
}

func delta(a, b counters) Round {
	secs := b.at.Sub(a.at).Seconds()
	rd := Round{
		Seconds:   secs,
		Offered:   b.sent - a.sent,
		DUTRx:     b.in.RxPackets - a.in.RxPackets,
		DUTRxDrop: b.in.RxDropped - a.in.RxDropped,
		DUTTx:     b.out.TxPackets - a.out.TxPackets,
		DUTTxDrop: b.out.TxDropped - a.out.TxDropped,
		Sink:      b.sink.Packets - a.sink.Packets,
	}
	if a.progs != nil && b.progs != nil {
		rd.BPF = progCosts(a.progs, b.progs)
	}
	rd.CPUSeconds = (b.cpu - a.cpu).Seconds()
	rd.KsoftirqdSeconds = max(0, (b.ksirq - a.ksirq).Seconds())
	// NET_RX work the kernel deferred to ksoftirqd/0 belongs to the
	// packets too: count it, so the per-core rate does not rise when
	// work escapes the generator thread.
	if cpu := rd.CPUSeconds + rd.KsoftirqdSeconds; rd.CPUSeconds > 0 {
		rd.PPSPerCPU = float64(rd.DUTTx) / cpu
	}
	if secs > 0 {
		rd.CPUShare = rd.CPUSeconds / secs
		rd.PPS = float64(rd.DUTTx) / secs
		rd.OfferedPPS = float64(rd.Offered) / secs
		rd.SinkPPS = float64(rd.Sink) / secs
	}
	if rd.Offered > 0 {
		rd.Loss = max(0, 1-float64(rd.Sink)/float64(rd.Offered))
	}
	return rd
}

// caseProfile is the traffic of case c at size: the run's profile, but
// one flow of templates for a case that varies flows per packet.
func caseProfile(c Case, o Options, size int) Profile {
	prof := Profile{Size: size, IMIX: o.IMIX, Flows: o.Flows}
	if c.Flows > 1 {
		prof.Flows = 1 // the generator varies the flow per packet
	}
	return prof
}

// counterOffset is where the generator writes its per-packet counter for
// case c (0: it writes none).
func counterOffset(c Case) (int, error) {
	switch {
	case c.Flows <= 1:
		return 0, nil
	case c.CounterOffset > 0:
		return c.CounterOffset, nil
	}
	return FlowOffset(c.Frame)
}

// measure runs one round of the case at one size in the options' mode.
func (r *rig) measure(ctx context.Context, o Options, size int) (Round, []int, error) {
	prof := caseProfile(r.c, o, size)
	frames, err := BuildTemplates(r.c.Frame, prof, Endpoints{Src: r.line.GenMAC, Dst: r.line.InMAC})
	if err != nil {
		return Round{}, nil, err
	}
	fb := make([]int, len(frames))
	for i, f := range frames {
		fb[i] = len(f) + fcsLen
	}
	if err := r.gen.SetTemplates(frames); err != nil {
		return Round{}, nil, err
	}
	off := 0
	if off, err = counterOffset(r.c); err != nil {
		return Round{}, nil, err
	}
	if err := r.gen.SetFlows(r.c.Flows, off); err != nil {
		return Round{}, nil, err
	}
	if err := r.gen.SetStamp(o.Mode == ModeLatency); err != nil {
		return Round{}, nil, err
	}
	switch o.Mode {
	case ModeLatency:
		rd, err := r.trial(ctx, o, o.LatencyRate, o.Warmup, o.Duration, true)
		return rd, fb, err
	case ModePDR:
		top, err := r.trial(ctx, o, 0, o.Warmup, o.Duration, false)
		if err != nil {
			return Round{}, nil, err
		}
		// The generator's own top rate bounds the search; 1% resolution
		// keeps it to about 7 trials.
		maxRate := top.OfferedPPS
		var trials []Round
		_, steps, err := SearchPDR(ctx, SearchParams{Max: maxRate, Threshold: o.Threshold,
			Resolution: maxRate / 100, MaxTrials: 12},
			func(ctx context.Context, rate float64) (TrialResult, error) {
				rd, err := r.trial(ctx, o, rate, min(o.Warmup, 500*time.Millisecond), o.Duration, false)
				if err != nil {
					return TrialResult{}, err
				}
				trials = append(trials, rd)
				return TrialResult{Offered: rd.OfferedPPS, Loss: rd.Loss}, nil
			})
		if err != nil {
			return Round{}, nil, err
		}
		rd, err := pdrRound(top, trials, steps, o.Threshold)
		return rd, fb, err
	default:
		rd, err := r.trial(ctx, o, 0, o.Warmup, o.Duration, false)
		return rd, fb, err
	}
}

// pdrRound is a pdr round: the best passing trial's counters (its loss,
// wall rate and CPU share, not the max-rate trial's), its achieved offered
// rate as the value, the search steps, and the max-rate trial's offered
// rate. trials[i] is the trial of steps[i].
func pdrRound(top Round, trials []Round, steps []SearchStep, threshold float64) (Round, error) {
	best := BestStep(steps)
	if best < 0 && len(steps) > 0 && !slices.ContainsFunc(steps, func(s SearchStep) bool { return !s.Short }) {
		first := steps[0]
		return Round{}, fmt.Errorf("search pdr: %d trials, first: %.0f pps offered for a %.0f pps target (loss %.4f): %w",
			len(steps), first.Rate, first.Target, first.Loss, ErrShort)
	}
	if best < 0 || best >= len(trials) {
		low := ""
		if n := len(steps); n > 0 {
			low = fmt.Sprintf(" (last trial: %.0f pps offered, loss %.4f)", steps[n-1].Rate, steps[n-1].Loss)
		}
		return Round{}, fmt.Errorf("search pdr: no trial within loss %v%s: %w", threshold, low, ErrNoPass)
	}
	rd := trials[best]
	rd.Value = steps[best].Rate
	rd.Steps = steps
	rd.MaxOfferedPPS = top.OfferedPPS
	return rd, nil
}

// trial sends at rate (0 = full speed) for warmup+dur and measures the
// last dur.
func (r *rig) trial(ctx context.Context, o Options, rate float64, warmup, dur time.Duration, lat bool) (Round, error) {
	stop := make(chan struct{})
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- r.gen.Blast(ctx, stop, rate, 0, started) }()
	finish := func() error {
		close(stop)
		return <-errc
	}
	// The first snapshot needs the generator thread (its CPU time): wait
	// until Blast runs, also with no warm-up.
	select {
	case <-started:
	case err := <-errc:
		if err == nil {
			err = ctx.Err()
		}
		return Round{}, fmt.Errorf("start generator: %w", err)
	case <-ctx.Done():
		return Round{}, errors.Join(finish(), ctx.Err())
	}
	if !sleepCtx(ctx, warmup) {
		return Round{}, errors.Join(finish(), ctx.Err())
	}
	if lat {
		if err := r.sink.ResetLatency(); err != nil {
			return Round{}, errors.Join(err, finish())
		}
	}
	a, err := r.snapshot()
	if err != nil {
		return Round{}, errors.Join(err, finish())
	}
	if !sleepCtx(ctx, dur) {
		return Round{}, errors.Join(finish(), ctx.Err())
	}
	b, err := r.snapshot()
	if gerr := finish(); gerr != nil {
		return Round{}, gerr
	}
	if err != nil {
		return Round{}, err
	}
	rd := delta(a, b)
	rd.Value = rd.PPS
	if o.Layout == LayoutOne && rd.PPSPerCPU > 0 {
		rd.Value = rd.PPSPerCPU
	}
	if lat {
		samples, err := r.sink.Latencies()
		if err != nil {
			return Round{}, err
		}
		if len(samples) == 0 {
			return Round{}, fmt.Errorf("measure latency: %w", ErrNoSamples)
		}
		s, _ := Summarize(samples)
		p50, _ := Percentile(samples, 50)
		p99, _ := Percentile(samples, 99)
		rd.LatN, rd.LatAvg, rd.LatP50, rd.LatP99 = len(samples), s.Mean/1e3, p50/1e3, p99/1e3
		rd.Value = rd.LatP50
	}
	// Let in-flight frames drain before the next case starts.
	sleepCtx(ctx, 20*time.Millisecond)
	return rd, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ThisMachine describes the running machine.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, ln := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(ln, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
