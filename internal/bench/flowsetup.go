package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/flowsetup"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// Flow setup (issue 12; seed 004 section V, flow setup in 0.89 ms): the
// time from a new flow's first packet arriving at the eBPF ingress (the
// program's bpf_ktime_get_ns, in the report) to that packet leaving
// toward the first NF (the flow-setup loop's clock after its send, the
// same CLOCK_MONOTONIC), at a given rate of new flows. The lab is
// examples/flow-pool.yaml (chain web6: a pool of three firewalls); h1
// sends one UDP packet per new flow (a new destination port each) at the
// rate, paced per millisecond, for the duration; the loop runs in this
// process as the agent runs it.

// FlowSetupOptions configure RunFlowSetup.
type FlowSetupOptions struct {
	Examples string // the examples directory
	Rates    []int  // new flows per second
	Duration time.Duration
	Rounds   int
	StateDir string
	Lab      string // lab name
	Logger   *slog.Logger
}

// FlowSetupPoint is one round at one rate.
type FlowSetupPoint struct {
	Rate  int `json:"rate"`
	Round int `json:"round"`
	// Sent flows, Setups the loop made for them (first packets), Lost:
	// sent but never set up (report ring full, or dropped before).
	Sent   int     `json:"sent"`
	Setups int     `json:"setups"`
	Lost   int     `json:"lost"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Achieved is the rate h1 really sent at (flows/s).
	Achieved float64 `json:"achieved"`
}

// RunFlowSetup brings the lab up once and measures each rate o.Rounds
// times.
func RunFlowSetup(ctx context.Context, o FlowSetupOptions) ([]FlowSetupPoint, error) {
	path := filepath.Join(o.Examples, "flow-pool.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read example: %w", err)
	}
	s, err := spec.Check(b, path)
	if err != nil {
		return nil, err
	}
	nw, err := compile.Compile(s)
	if err != nil {
		return nil, err
	}
	nw.Name = o.Lab
	opts := lab.Options{StateDir: o.StateDir, Logger: o.Logger}
	defer func() { _ = lab.Down(context.WithoutCancel(ctx), o.Lab, opts) }()
	if _, err := lab.Up(ctx, nw, lab.UpOptions{Options: opts}); err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	var r1 state.Node
	for _, n := range nw.Nodes {
		if n.Name == "r1" {
			r1 = n
		}
	}
	cfg, ok := flowsetup.PoolConfig(r1)
	if !ok {
		return nil, fmt.Errorf("%s: r1 has no NF pool", path)
	}
	ns1, err := lab.Open(o.Lab, "r1", opts)
	if err != nil {
		return nil, err
	}
	defer ns1.Close()
	h1, err := lab.Open(o.Lab, "h1", opts)
	if err != nil {
		return nil, err
	}
	defer h1.Close()
	var mu sync.Mutex
	var lat []float64 // ms, new flows of the current round
	loop, err := flowsetup.Open(flowsetup.Options{NS: ns1, Config: cfg, TunSrc: r1.TunSrc, Log: o.Logger,
		Observe: func(st flowsetup.Setup) {
			if st.New && st.Sent {
				mu.Lock()
				lat = append(lat, float64(st.Latency)/float64(time.Millisecond))
				mu.Unlock()
			}
		}})
	if err != nil {
		return nil, err
	}
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loop.Run(lctx) }()
	defer func() {
		stop()
		<-done
	}()
	dst := net.ParseIP("fc00:a6::2")
	var out []FlowSetupPoint
	for _, rate := range o.Rates {
		for round := 0; round < o.Rounds; round++ {
			mu.Lock()
			lat = nil
			mu.Unlock()
			p := FlowSetupPoint{Rate: rate, Round: round}
			var took time.Duration
			err := h1.Do(func() error {
				// A new socket per round: a new source port, so no flow
				// of an earlier round is reused.
				c, err := net.ListenUDP("udp6", nil)
				if err != nil {
					return err
				}
				defer c.Close()
				total := int(float64(rate) * o.Duration.Seconds())
				start := time.Now()
				for p.Sent < total {
					due := min(total, int(time.Since(start).Seconds()*float64(rate))+1)
					for ; p.Sent < due; p.Sent++ {
						port := 1024 + p.Sent%64000
						if _, err := c.WriteToUDP([]byte("flow"), &net.UDPAddr{IP: dst, Port: port}); err != nil {
							return err
						}
					}
					time.Sleep(time.Millisecond)
				}
				took = time.Since(start)
				return nil
			})
			if err != nil {
				return out, fmt.Errorf("send flows: %w", err)
			}
			p.Achieved = float64(p.Sent) / took.Seconds()
			// Let the loop drain what is still in the ring.
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := len(lat)
				mu.Unlock()
				if n >= p.Sent {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			xs := append([]float64(nil), lat...)
			mu.Unlock()
			p.Setups, p.Lost = len(xs), max(0, p.Sent-len(xs))
			p.P50ms, _ = Percentile(xs, 50)
			p.P99ms, _ = Percentile(xs, 99)
			p.MaxMs, _ = Percentile(xs, 100)
			out = append(out, p)
			if err := loop.Sweep(); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// WriteFlowSetup prints one line per rate: the rounds' p50 and p99 (the
// median over rounds and their spread) and what was lost.
func WriteFlowSetup(w io.Writer, pts []FlowSetupPoint) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "new flows/s\trounds\tachieved/s\tsetups\tlost\tp50 ms (median, min-max)\tp99 ms (median, min-max)\tmax ms")
	byRate := map[int][]FlowSetupPoint{}
	var rates []int
	for _, p := range pts {
		if _, ok := byRate[p.Rate]; !ok {
			rates = append(rates, p.Rate)
		}
		byRate[p.Rate] = append(byRate[p.Rate], p)
	}
	for _, r := range rates {
		var p50, p99, ach []float64
		setups, lost, most := 0, 0, 0.0
		for _, p := range byRate[r] {
			p50, p99, ach = append(p50, p.P50ms), append(p99, p.P99ms), append(ach, p.Achieved)
			setups, lost, most = setups+p.Setups, lost+p.Lost, max(most, p.MaxMs)
		}
		a, _ := Summarize(p50)
		b, _ := Summarize(p99)
		c, _ := Summarize(ach)
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%d\t%d\t%.3f (%.3f-%.3f)\t%.3f (%.3f-%.3f)\t%.3f\n", r, len(byRate[r]), c.Median, setups, lost,
			a.Median, a.Min, a.Max, b.Median, b.Min, b.Max, most)
	}
	return tw.Flush()
}
