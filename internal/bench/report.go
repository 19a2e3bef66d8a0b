package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SweepSizes are seed 002's frame sizes, l = 174n + 126 for n = 0..10.
func SweepSizes() []int {
	out := make([]int, 0, 11)
	for n := range 11 {
		out = append(out, 174*n+126)
	}
	return out
}

// WriteResult writes result.json, result.csv (one row per round),
// summary.csv, the plots and results.md into dir.
func WriteResult(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create result dir: %w", err)
	}
	b, err := json.MarshalIndent(jsonSafe(res), "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if err := writeCSV(filepath.Join(dir, "result.csv"), roundRows(res)); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(dir, "summary.csv"), summaryRows(res)); err != nil {
		return err
	}
	if err := WritePlots(dir, res); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.md"))
	if err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	defer f.Close()
	return WriteMarkdown(f, res)
}

// ReadResult loads result.json from dir and recomputes the summaries.
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	Finish(&res)
	return &res, nil
}

// jsonSafe replaces NaN ratios (no baseline) by 0: JSON has no NaN.
func jsonSafe(res *Result) *Result {
	c := *res
	c.Points = append([]Point(nil), res.Points...)
	for i := range c.Points {
		p := &c.Points[i]
		for _, f := range []*float64{&p.Ratio, &p.RatioMin, &p.RatioMax, &p.FastRatio} {
			if math.IsNaN(*f) || math.IsInf(*f, 0) {
				*f = 0
			}
		}
	}
	c.Goals = append([]GoalResult(nil), res.Goals...)
	for i := range c.Goals {
		g := &c.Goals[i]
		for _, f := range []*float64{&g.Ratio, &g.FastRatio} {
			if math.IsNaN(*f) || math.IsInf(*f, 0) {
				*f = 0
			}
		}
	}
	return &c
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return fmt.Errorf("write csv: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

func ff(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func roundRows(res *Result) [][]string {
	rows := [][]string{{"case", "size", "round", "value", "seconds", "dut_tx_pps", "offered_pps", "sink_pps",
		"pps_per_cpu", "cpu_share", "ksoftirqd_seconds", "offered", "dut_rx", "dut_rx_drop", "dut_tx", "dut_tx_drop", "sink", "loss", "lat_mean_us", "lat_p50_us", "lat_p99_us"}}
	for _, p := range res.Points {
		for _, r := range p.Rounds {
			rows = append(rows, []string{p.Case, strconv.Itoa(p.Size), strconv.Itoa(r.Round), ff(r.Value), ff(r.Seconds),
				ff(r.PPS), ff(r.OfferedPPS), ff(r.SinkPPS), ff(r.PPSPerCPU), ff(r.CPUShare), ff(r.KsoftirqdSeconds), fu(r.Offered), fu(r.DUTRx), fu(r.DUTRxDrop), fu(r.DUTTx),
				fu(r.DUTTxDrop), fu(r.Sink), ff(r.Loss), ff(r.LatAvg), ff(r.LatP50), ff(r.LatP99)})
		}
	}
	return rows
}

func fu(x uint64) string { return strconv.FormatUint(x, 10) }

func summaryRows(res *Result) [][]string {
	rows := [][]string{{"case", "series", "x", "size", "frame_bytes", "n", "median", "min", "max", "ratio", "ratio_min", "ratio_max", "sink_over_dut", "error"}}
	for _, p := range res.Points {
		rows = append(rows, []string{p.Case, p.Series, ff(p.X), strconv.Itoa(p.Size), frameBytes(p), strconv.Itoa(p.Summary.N),
			ff(p.Summary.Median), ff(p.Summary.Min), ff(p.Summary.Max), ff(p.Ratio), ff(p.RatioMin), ff(p.RatioMax), ff(p.SinkOverDUT), p.Err})
	}
	return rows
}

func frameBytes(p Point) string {
	if len(p.FrameBytes) == 0 {
		return ""
	}
	lo, hi := p.FrameBytes[0], p.FrameBytes[0]
	for _, b := range p.FrameBytes {
		lo, hi = min(lo, b), max(hi, b)
	}
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// unit says how a result's values read.
func unit(res *Result) (name string, scale float64, digits int) {
	switch res.Mode {
	case ModeLatency:
		return "p50 latency (us)", 1, 1
	case ModePDR:
		return "PDR (Mpps)", 1e-6, 3
	}
	if res.Options.Layout == LayoutOne {
		return "forwarded (Mpps per core)", 1e-6, 3
	}
	return "forwarded (Mpps)", 1e-6, 3
}

// partial notes, next to a median, that some rounds of the point failed:
// " (n/rounds; errors)", empty when every round was measured.
func partial(res *Result, p Point) string {
	if p.Summary.N >= res.Options.Rounds && p.Err == "" {
		return ""
	}
	note := fmt.Sprintf(" (%d/%d rounds", p.Summary.N, res.Options.Rounds)
	if p.Err != "" {
		note += "; " + strings.ReplaceAll(p.Err, "|", "/")
	}
	return note + ")"
}

// writeBPFCosts adds the table of the DUT programs' work (Options.BPFStats):
// per case, the median over rounds of the BPF time per packet sent, and
// per program its median time per run and runs per packet.
func writeBPFCosts(b *strings.Builder, res *Result) {
	if !slices.ContainsFunc(res.Points, func(p Point) bool {
		return slices.ContainsFunc(p.Rounds, func(r Round) bool { return len(r.BPF) > 0 })
	}) {
		return
	}
	b.WriteString("\nThe DUT's BPF programs (kernel run-time statistics, a diagnostic, not a performance figure; medians over rounds):\n\n| case | frame B | BPF ns / packet | programs: ns per run (runs per packet) |\n|---|---|---|---|\n")
	for _, p := range res.Points {
		var per []float64
		runs, perRun := map[string][]float64{}, map[string][]float64{}
		var names []string
		for _, r := range p.Rounds {
			if len(r.BPF) == 0 || r.DUTTx == 0 {
				continue
			}
			per = append(per, r.BPFNsPerPacket())
			for _, c := range r.BPF {
				if _, ok := runs[c.Name]; !ok {
					names = append(names, c.Name)
				}
				runs[c.Name] = append(runs[c.Name], float64(c.Runs)/float64(r.DUTTx))
				perRun[c.Name] = append(perRun[c.Name], c.NsPerRun())
			}
		}
		if len(per) == 0 {
			continue
		}
		var progs []string
		for _, n := range names {
			nr, _ := Summarize(perRun[n])
			rp, _ := Summarize(runs[n])
			progs = append(progs, fmt.Sprintf("%s %.0f (%.2f)", n, nr.Median, rp.Median))
		}
		s, _ := Summarize(per)
		fmt.Fprintf(b, "| %s | %s | %.0f | %s |\n", p.Case, frameBytes(p), s.Median, strings.Join(progs, ", "))
	}
}

// WriteMarkdown writes the result as a markdown table.
func WriteMarkdown(w io.Writer, res *Result) error {
	name, scale, dig := unit(res)
	var b strings.Builder
	fmt.Fprintf(&b, "### %s (%s mode, baseline %s)\n\n", res.Scenario, res.Mode, res.Baseline)
	fmt.Fprintf(&b, "Linux %s, %d CPUs, %s; %d rounds x (%s warm-up + %s), layout %s, %s.",
		res.Machine.Kernel, res.Machine.CPUs, res.Machine.CPU, res.Options.Rounds, res.Options.Warmup,
		res.Options.Duration, res.Options.Layout, res.Start.UTC().Format("2006-01-02 15:04 UTC"))
	if res.Machine.Note != "" {
		b.WriteString(" " + res.Machine.Note)
	}
	b.WriteString("\n\n")
	lat := res.Mode == ModeLatency
	fmt.Fprintf(&b, "| case | frame B | %s median | min | max | ratio (min-max) | sink/DUT | loss | wall Mpps | CPU share |", name)
	if lat {
		b.WriteString(" mean us | p99 us |")
	}
	b.WriteString("\n|---|---|---|---|---|---|---|---|---|---|")
	if lat {
		b.WriteString("---|---|")
	}
	b.WriteString("\n")
	for _, p := range res.Points {
		if p.Summary.N == 0 {
			rounds := ""
			if len(p.RoundErrors) > 0 {
				rounds = fmt.Sprintf(" (0/%d rounds)", res.Options.Rounds)
			}
			fmt.Fprintf(&b, "| %s | %s | failed%s: %s | | | | | | | |\n", p.Case, frameBytes(p), rounds, strings.ReplaceAll(p.Err, "|", "/"))
			continue
		}
		var losses []float64
		var avg, p99, wall, share []float64
		for _, r := range p.Rounds {
			wall = append(wall, r.PPS)
			share = append(share, r.CPUShare)
			losses = append(losses, r.Loss)
			avg = append(avg, r.LatAvg)
			p99 = append(p99, r.LatP99)
		}
		l, _ := Summarize(losses)
		wl, _ := Summarize(wall)
		sh, _ := Summarize(share)
		fmt.Fprintf(&b, "| %s | %s | %.*f%s | %.*f | %.*f | %.2f (%.2f-%.2f) | %.3f | %.2f%% | %.3f | %.2f |", p.Case, frameBytes(p),
			dig, p.Summary.Median*scale, partial(res, p), dig, p.Summary.Min*scale, dig, p.Summary.Max*scale,
			p.Ratio, p.RatioMin, p.RatioMax, p.SinkOverDUT, 100*l.Median, wl.Median/1e6, sh.Median)
		if lat {
			a, _ := Summarize(avg)
			q, _ := Summarize(p99)
			fmt.Fprintf(&b, " %.1f | %.1f |", a.Median, q.Median)
		}
		b.WriteString("\n")
	}
	paired := false
	for _, p := range res.Points {
		paired = paired || p.Paired != nil
	}
	if paired {
		// For a shared, noisy host (docs/benchmarks.md "Method").
		fmt.Fprintf(&b, "\nAgainst %s round by round: the median of the per-round ratios (quartiles), and the ratio of the fastest fifth of rounds:\n\n| case | frame B | paired ratio (Q1-Q3) | rounds | fastest fifth |\n|---|---|---|---|---|\n", res.Baseline)
		for _, p := range res.Points {
			if p.Paired == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f (%.3f-%.3f) | %d | %.3f |\n", p.Case, frameBytes(p), p.Paired.Median, p.Paired.Q1, p.Paired.Q3, p.Paired.N, p.FastRatio)
		}
	}
	writeBPFCosts(&b, res)
	if len(res.Goals) > 0 {
		b.WriteString("\nGoals (the issues'; met when the paired median and the fastest-fifth ratio both reach the goal):\n\n| case | over | size | goal | ratio of medians | paired (Q1-Q3) | fastest fifth | verdict |\n|---|---|---|---|---|---|---|---|\n")
		for _, g := range res.Goals {
			pr := "-"
			if g.Paired != nil {
				pr = fmt.Sprintf("%.3f (%.3f-%.3f)", g.Paired.Median, g.Paired.Q1, g.Paired.Q3)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %g | %.3f | %s | %.3f | %s |\n", g.Case, g.Base, g.Size, g.Min, g.Ratio, pr, g.FastRatio, g.Verdict())
		}
	}
	if res.Ceiling != "" {
		// ns over the ceiling: what a case costs per packet beyond the
		// ceiling's round (1e9 / rate, per core in layout one), i.e. the
		// work the case's DUT does that a bare XDP forward does not.
		// With the plain case in the run (generator, one kernel forward,
		// sink), a round less plain's estimates the case's DUT work: what
		// is left is the DUT's, the NF's forward standing in for the
		// plain DUT's (docs/benchmarks.md "Proxy").
		ceil, plain := map[int]float64{}, map[int]float64{}
		for _, p := range res.Points {
			if p.Summary.N > 0 && p.Case == res.Ceiling {
				ceil[p.Size] = p.Summary.Median
			}
			if p.Summary.N > 0 && p.Case == CasePlain.Name {
				plain[p.Size] = p.Summary.Median
			}
		}
		fmt.Fprintf(&b, "\nAgainst the XDP ceiling (%s):\n\n| case | frame B | of ceiling (XDP cases) | ns / packet over the ceiling | ns / packet over plain |\n|---|---|---|---|---|\n", res.Ceiling)
		for _, p := range res.Points {
			c, ok := ceil[p.Size]
			if !ok || p.Summary.N == 0 || p.Summary.Median <= 0 {
				continue
			}
			of, over := "-", "-"
			if p.XDP && p.OfCeiling > 0 {
				of = fmt.Sprintf("%.2f", p.OfCeiling)
			}
			if pl, ok := plain[p.Size]; ok {
				over = fmt.Sprintf("%.0f", 1e9/p.Summary.Median-1e9/pl)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s |\n", p.Case, frameBytes(p), of, 1e9/p.Summary.Median-1e9/c, over)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
