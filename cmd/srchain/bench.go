package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/bench"
	"github.com/srchain/srchain/internal/lab"
)

func newBenchCmd(e *env) *cobra.Command {
	benchCmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the data plane against kernel baselines (ratios in one run)",
	}
	benchCmd.AddCommand(benchListCmd(), benchRunCmd(), benchReportCmd(), benchControlCmd(), benchAPICmd(), benchFwStateCmd(), benchGoodputCmd(), benchFlowSetupCmd())
	return benchCmd
}

func benchListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List scenarios and their cases",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, s := range bench.Scenarios() {
				fmt.Fprintf(w, "%s\t(baseline %s)\t%s\n", s.Name, s.Baseline, s.Desc)
				for _, c := range s.Cases {
					fmt.Fprintf(w, "  %s\t\t%s\n", c.Name, c.Desc)
				}
			}
			return w.Flush()
		},
	}
}

func benchRunCmd() *cobra.Command {
	o := bench.DefaultOptions()
	var sizes, cases, out, note string
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario: build generator -> DUT -> sink namespaces, measure, write results",
		Long: `Run builds one generator -> DUT -> sink line of network namespaces per
case (names srcb-<pid>-...), measures every case for --rounds rounds of
--warmup + --duration each, interleaved, and writes result.json,
result.csv, a plot and a markdown table to --out. Ratios are to the
scenario's baseline measured in the same run. Needs root.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := bench.Lookup(args[0])
			if err != nil {
				return err
			}
			if cases != "" {
				if sc, err = sc.Select(strings.Split(cases, ",")); err != nil {
					return err
				}
			}
			if o.Sizes, err = parseSizes(sizes); err != nil {
				return err
			}
			if !cmd.Flags().Changed("layout") {
				// pdr in layout one equals the max rate by construction.
				o.Layout = bench.DefaultLayout(o.Mode)
			}
			if out == "" {
				out = filepath.Join("bench-results", sc.Name+"-"+time.Now().UTC().Format("20060102T150405Z"))
			}
			// Ctrl-C cancels the run; Run removes its namespaces before
			// returning.
			// Ctrl-C cancels cmd's context (main); Run removes its
			// namespaces before returning.
			ctx := cmd.Context()
			bench.CleanupStale("srcb-", pidAlive)
			res, err := bench.Run(ctx, sc, o)
			if err != nil {
				return err
			}
			res.Machine.Note = note
			if err := bench.WriteResult(out, res); err != nil {
				return err
			}
			slog.Info("results written", "dir", out)
			if err := bench.WriteMarkdown(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			// Results are written either way; any failed case or round
			// makes the command fail.
			return res.Err()
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Rounds, "rounds", o.Rounds, "interleaved rounds per case")
	f.DurationVar(&o.Duration, "duration", o.Duration, "measurement time per round")
	f.DurationVar(&o.Warmup, "warmup", o.Warmup, "warm-up before each measurement")
	f.StringVar(&sizes, "sizes", "0", `frame sizes with FCS, comma separated; "sweep" = 174n+126 for n=0..10 (seed 002); 0 = smallest`)
	f.BoolVar(&o.IMIX, "imix", false, "IMIX 192/576/1500 at 7:4:1 (seed 001 Table 2) instead of --sizes")
	f.IntVar(&o.Flows, "flows", o.Flows, "vary source/destination over this many flows")
	f.StringVar(&o.Mode, "mode", o.Mode, "max | pdr | latency")
	f.StringVar(&o.Layout, "layout", o.Layout, "one (generator and DUT share CPU 0) | two (DUT receive on CPU 1 via RPS); default one, two for --mode pdr")
	f.Float64Var(&o.Threshold, "loss", o.Threshold, "pdr mode: acceptable loss fraction")
	f.Float64Var(&o.LatencyRate, "latency-rate", o.LatencyRate, "latency mode: offered pps")
	f.StringVar(&cases, "cases", "", "comma-separated subset of the scenario's cases (baseline always kept)")
	f.StringVar(&out, "out", "", "result directory (default bench-results/SCENARIO-TIME)")
	f.StringVar(&note, "note", "", "free text stored with the machine description")
	f.BoolVar(&o.BPFStats, "bpf-stats", false, "diagnostic: record which DUT BPF programs take the time (kernel run-time statistics; slows them, so take rates from runs without it)")
	return cmd
}

func benchReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Redraw plots and print the markdown tables of a result directory (with the scenario's goals)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := bench.ReadResult(args[0])
			if err != nil {
				return err
			}
			bench.AddGoals(res)
			if err := bench.WritePlots(args[0], res); err != nil {
				return err
			}
			return bench.WriteMarkdown(cmd.OutOrStdout(), res)
		},
	}
}

func parseSizes(s string) ([]int, error) {
	if s == "sweep" {
		return bench.SweepSizes(), nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("parse size %q: %w", f, bench.ErrBadOptions)
		}
		out = append(out, n)
	}
	return out, nil
}

func pidAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func benchControlCmd() *cobra.Command {
	var chains string
	var rounds int
	var asJSON bool
	// Lab names are at most 12 characters: cbPPPP-NNNNN.
	o := bench.ControlOptions{Lab: fmt.Sprintf("cb%d", os.Getpid()%10000)}
	cmd := &cobra.Command{
		Use:   "control",
		Short: "Time the control plane at 100 / 1,000 / 10,000 chains: compile, lab up, status, apply",
		Long: `control deploys a generated spec (h1 - r1 - r2 - r3 - h2, n chains from r1
through an NF on r2 to r3, half with a 5-tuple classifier, half with a
destination prefix) as a lab and times, per round: validate+compile, lab up,
lab status, lab apply FILE with one chain changed, lab apply NAME with
nothing to change, and lab down. It prints the median and the min .. max
over rounds. Needs root; each lab is removed when its round ends.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Chains, err = parseCounts("chain count", chains); err != nil {
				return err
			}
			o.Rounds = rounds
			pts, err := bench.RunControl(cmd.Context(), o)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(pts); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else if werr := bench.WriteControl(cmd.OutOrStdout(), pts); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&chains, "chains", "100,1000,10000", "comma-separated chain counts")
	f.IntVar(&rounds, "rounds", 3, "rounds per chain count")
	f.BoolVar(&asJSON, "json", false, "print every round as JSON")
	f.StringVar(&o.StateDir, "state-dir", "", "lab records directory (default "+lab.DefaultStateDir+")")
	return cmd
}

func benchGoodputCmd() *cobra.Command {
	var asJSON bool
	o := bench.GoodputOptions{Lab: fmt.Sprintf("gp%d-", os.Getpid()%10000)}
	cmd := &cobra.Command{
		Use:   "goodput",
		Short: "iperf3 TCP goodput through a lab chain: SRv6, OPoT, with and without C-SIDs, MSS of seed 003 Table III",
		Long: `goodput deploys, one at a time, the chain of examples/opot-testbed.yaml
(r2, r3, r6) as plain SRv6 and with OPoT, and the web6 chain of
examples/csid-quickstart.yaml (one C-SID container) without and with OPoT,
and runs iperf3 TCP from h1 to h2 with the largest MSS that fits a
1500-byte link after the scheme's encapsulation (seed 003 Table III: 72 +
16m bytes with OPoT, 48 + 16m without), the sender's TSO and GSO off so
every link carries MSS-sized packets. Each round also runs iperf3 at the
hosts' default MSS, which srchain's MSS clamp lowers on the way (issue
34). It prints Gbit/s per scheme (median, min-max over rounds), the ratio
to plain SRv6, the default-MSS goodput and its ratio to the MSS set by
hand and, with OPoT, what the verifier accepted and dropped. Needs root; each lab is removed after its
runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pts, err := bench.RunGoodput(cmd.Context(), o)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(pts); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else if werr := bench.WriteGoodput(cmd.OutOrStdout(), pts); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Rounds, "rounds", 3, "iperf3 runs per scheme")
	f.DurationVar(&o.Duration, "duration", 5*time.Second, "length of each iperf3 run (whole seconds)")
	f.StringVar(&o.Examples, "examples", "examples", "the examples directory")
	f.BoolVar(&asJSON, "json", false, "print every run as JSON")
	f.StringVar(&o.StateDir, "state-dir", "", "lab records directory (default "+lab.DefaultStateDir+")")
	return cmd
}

func benchFlowSetupCmd() *cobra.Command {
	var asJSON bool
	var rates string
	o := bench.FlowSetupOptions{Lab: fmt.Sprintf("fs%d", os.Getpid()%100000)}
	cmd := &cobra.Command{
		Use:   "flowsetup",
		Short: "Per-flow setup time at the eBPF ingress: first packet in to first packet out, p50/p99, per rate of new flows",
		Long: `flowsetup deploys examples/flow-pool.yaml (chain web6's firewall is a pool of
three instances; r1 runs the eBPF ingress) and the flow-setup loop of r1
in this process, as the agent runs it. Per rate and round, h1 sends one UDP
packet per new flow at that many new flows per second for the duration;
each first packet is reported by the ingress, placed on an instance
(least loaded), its flow entry installed and the packet sent on. The
setup time runs from the packet's arrival at the ingress program
(bpf_ktime_get_ns) to its departure from the loop's socket (the same
clock). It prints p50 and p99 per rate (median and spread over rounds),
the rate achieved and the flows never set up (seed 004: 0.89 ms). Needs
root; the lab is removed at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Rates, err = parseCounts("--rates", rates); err != nil {
				return err
			}
			pts, err := bench.RunFlowSetup(cmd.Context(), o)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(pts); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else if werr := bench.WriteFlowSetup(cmd.OutOrStdout(), pts); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&rates, "rates", "100,1000,10000", "new flows per second, comma-separated")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds per rate")
	f.DurationVar(&o.Duration, "duration", 2*time.Second, "how long each round sends new flows")
	f.StringVar(&o.Examples, "examples", "examples", "the examples directory")
	f.BoolVar(&asJSON, "json", false, "print every round as JSON")
	f.StringVar(&o.StateDir, "state-dir", "", "lab records directory (default "+lab.DefaultStateDir+")")
	return cmd
}

func benchAPICmd() *cobra.Command {
	var chains, simulate string
	var asJSON bool
	o := bench.APIOptions{Prefix: fmt.Sprintf("ab%d", os.Getpid()%100000)}
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Time the northbound API with real agents: deploy n chains, then one chain change to the datapath",
		Long: `api runs the controller (srchain serve's API on an embedded etcd) and one
agent per node of the control bench's spec (h1 - r1 - r2 - r3 - h2), all in
this process, each agent applying its own network namespace. Per round it
times PUT /v1/spec with n chains until every agent reports the desired
generation applied, then --changes times PUT /v1/chains/<c> (one chain
gains or loses an NF) until the ingress's kernel route for that chain
carries the new segment list. It prints the median, min .. max and the
99th percentile. Needs root; everything is removed when a round ends.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Chains, err = parseCounts("chain count", chains); err != nil {
				return err
			}
			if simulate != "" {
				return benchAPISim(cmd, simulate, o.Chains, asJSON)
			}
			pts, err := bench.RunAPI(cmd.Context(), o)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(pts); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else if werr := bench.WriteAPI(cmd.OutOrStdout(), pts); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&chains, "chains", "100,1000,10000", "comma-separated chain counts")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds per chain count")
	f.IntVar(&o.Changes, "changes", 20, "chain changes timed per round")
	f.StringVar(&simulate, "simulate", "", "instead: fat trees of these sizes k (e.g. 8,10), one simulated agent per switch (watch, decode, status; no apply, no root)")
	f.BoolVar(&asJSON, "json", false, "print every sample as JSON")
	return cmd
}

func benchFwStateCmd() *cobra.Command {
	var ks, out string
	var chains int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fwstate",
		Short: "Count forwarding entries per router on k-ary fat trees: source routing vs rule-based (seed 004 Fig. 3)",
		Long: `fwstate generates a k-ary fat tree per --k (every switch a router, one
forward NF per edge switch, --chains chains each entering at one rack,
crossing the NFs of two others and leaving at a fourth), compiles it and
counts the forwarding entries per router: with source routing (srchain: the
ingress's SR policies, locator routes, local SIDs) and with rule-based
chaining (one entry per chain at every hop of its path). It prints a table
and, with --out, writes fwstate.svg there. No root needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kv, err := parseCounts("k", ks)
			if err != nil {
				return err
			}
			pts, err := bench.RunFwState(kv, chains)
			if err != nil {
				return err
			}
			if out != "" {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return fmt.Errorf("create %s: %w", out, err)
				}
				if err := os.WriteFile(filepath.Join(out, "fwstate.svg"), []byte(bench.FwStateSVG(pts)), 0o644); err != nil {
					return fmt.Errorf("write plot: %w", err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(pts)
			}
			return bench.WriteFwState(cmd.OutOrStdout(), pts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ks, "k", "4,6,8,10,12,14,16", "comma-separated fat-tree sizes (even, 4..32)")
	f.IntVar(&chains, "chains", 1000, "chains placed across racks")
	f.StringVar(&out, "out", "", "directory for fwstate.svg")
	f.BoolVar(&asJSON, "json", false, "print the points as JSON")
	return cmd
}

// parseCounts parses a comma-separated list of integers (what names them
// in the error).
func parseCounts(what, list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("parse %s %q: %w", what, f, bench.ErrBadOptions)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchAPISim is `bench api --simulate K,...`.
func benchAPISim(cmd *cobra.Command, ks string, chains []int, asJSON bool) error {
	kv, err := parseCounts("k", ks)
	if err != nil {
		return err
	}
	var pts []bench.APISimPoint
	for _, k := range kv {
		for _, n := range chains {
			p, err := bench.RunAPISim(cmd.Context(), k, n, slog.Default())
			if err != nil {
				return err
			}
			pts = append(pts, p)
		}
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(pts)
	}
	return bench.WriteAPISim(cmd.OutOrStdout(), pts)
}
