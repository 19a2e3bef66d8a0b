package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/lab"
	"github.com/srchain/srchain/internal/netns"
	"github.com/srchain/srchain/internal/opot"
	"github.com/srchain/srchain/internal/spec"
)

// Goodput (issue 11; seed 003 section V-B, Figs. 9-11 and Table III):
// iperf3 TCP from h1 to h2 through a whole lab chain, per scheme, with
// the largest MSS that fits a 1500-byte link once the scheme's
// encapsulation is added (opot.TCPMSS). The sender's segmentation
// offloads are off (TSO, GSO), so packets are MSS-sized on every link as
// on the seed's wire, and every packet pays the per-packet work; the
// receiver keeps GRO.
//
// Schemes: the chain (r2, r3, r6) of examples/opot-testbed.yaml as plain
// SRv6 and with OPoT; the web6 chain of examples/csid-quickstart.yaml (fw
// on r2, egress r3, one C-SID container) without and with OPoT.

// GoodputScheme is one lab spec and what it carries.
type GoodputScheme struct {
	Name     string
	Example  string      // examples/ file
	Edits    [][2]string // text replacements (each must occur)
	Segments int         // segments of the chain's SRH (for the MSS)
	OPoT     bool
	Dst      string // h2's address
}

// GoodputSchemes are the seed's SRv6, OPoT, SRv6^cSID and OPoT^cSID.
var GoodputSchemes = []GoodputScheme{
	{Name: "srv6", Example: "opot-testbed.yaml", Edits: [][2]string{{"    opot: true", "    opot: false"}}, Segments: 3, Dst: "fc00:8::2"},
	{Name: "opot", Example: "opot-testbed.yaml", Segments: 3, OPoT: true, Dst: "fc00:8::2"},
	{Name: "srv6-csid", Example: "csid-quickstart.yaml", Segments: 1, Dst: "fc00:a4::2"},
	{Name: "opot-csid", Example: "csid-quickstart.yaml", Edits: [][2]string{{"    compression: next-c-sid\n", "    compression: next-c-sid\n    opot: true\n"}}, Segments: 1, OPoT: true, Dst: "fc00:a4::2"},
}

// GoodputOptions configure RunGoodput.
type GoodputOptions struct {
	Examples string // the examples directory
	Rounds   int
	Duration time.Duration // per iperf3 run
	StateDir string
	Lab      string // lab name prefix
	Logger   *slog.Logger
}

// GoodputPoint is one scheme's result.
type GoodputPoint struct {
	Scheme  string    `json:"scheme"`
	MSS     int       `json:"mss"`
	Encap   int       `json:"encap_bytes"`
	Gbps    []float64 `json:"gbps"`
	Retrans []int     `json:"retransmits"`
	Summary Summary   `json:"summary"`
	// The same chain at the hosts' default MSS (no -M), which srchain's
	// MSS clamp (internal/mss) lowers on the way (issue 34), interleaved
	// with the clamped-by-hand runs.
	DefaultGbps    []float64 `json:"default_mss_gbps"`
	DefaultSummary Summary   `json:"default_mss_summary"`
	Verified       uint64    `json:"verified,omitempty"` // OPoT: packets the verifier accepted
	Drops          uint64    `json:"verifier_drops,omitempty"`
}

// RunGoodput measures every scheme for o.Rounds rounds, one lab per
// scheme (up, rounds, down).
func RunGoodput(ctx context.Context, o GoodputOptions) ([]GoodputPoint, error) {
	var out []GoodputPoint
	for i, sc := range GoodputSchemes {
		p, err := goodputScheme(ctx, o, sc, fmt.Sprintf("%s%d", o.Lab, i))
		if err != nil {
			return out, fmt.Errorf("scheme %s: %w", sc.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func goodputScheme(ctx context.Context, o GoodputOptions, sc GoodputScheme, name string) (GoodputPoint, error) {
	// The labs' headends are the kernel's encap: an OPoT chain's route
	// carries the reservation (the TLV and its PadN).
	tlvs := 0
	if sc.OPoT {
		tlvs = opot.ReservedLen
	}
	p := GoodputPoint{Scheme: sc.Name, Encap: opot.EncapOverhead(sc.Segments, tlvs), MSS: opot.TCPMSS(1500, sc.Segments, tlvs)}
	path := filepath.Join(o.Examples, sc.Example)
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("read example: %w", err)
	}
	text := string(b)
	for _, e := range sc.Edits {
		if !strings.Contains(text, e[0]) {
			return p, fmt.Errorf("%s changed: no %q", sc.Example, e[0])
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	s, err := spec.Check([]byte(text), path)
	if err != nil {
		return p, err
	}
	net, err := compile.Compile(s)
	if err != nil {
		return p, err
	}
	net.Name = name
	opts := lab.Options{StateDir: o.StateDir, Logger: o.Logger}
	defer func() { _ = lab.Down(context.WithoutCancel(ctx), name, opts) }()
	if _, err := lab.Up(ctx, net, lab.UpOptions{Options: opts}); err != nil {
		return p, fmt.Errorf("lab up: %w", err)
	}
	h1, err := lab.Open(name, "h1", opts)
	if err != nil {
		return p, err
	}
	defer h1.Close()
	h2, err := lab.Open(name, "h2", opts)
	if err != nil {
		return p, err
	}
	defer h2.Close()
	if _, err := h1.Run(ctx, "ethtool", "-K", "eth0", "tso", "off", "gso", "off"); err != nil {
		return p, err
	}
	for r := 0; r < o.Rounds; r++ {
		r, err := Iperf(ctx, h1, h2, sc.Dst, "5299", int(o.Duration.Seconds()), "-M", fmt.Sprint(p.MSS))
		if err != nil {
			return p, err
		}
		p.Gbps = append(p.Gbps, r.Gbps)
		p.Retrans = append(p.Retrans, r.Retransmits)
		d, err := Iperf(ctx, h1, h2, sc.Dst, "5299", int(o.Duration.Seconds()))
		if err != nil {
			return p, err
		}
		p.DefaultGbps = append(p.DefaultGbps, d.Gbps)
	}
	p.Summary, _ = Summarize(p.Gbps)
	p.DefaultSummary, _ = Summarize(p.DefaultGbps)
	if sc.OPoT {
		p.Verified, p.Drops, err = verifierCounts(ctx, name, opts)
	}
	return p, err
}

// IperfResult is what one iperf3 TCP test moved.
type IperfResult struct {
	Bytes       float64 // received
	Gbps        float64 // received
	Retransmits int
}

// Iperf runs one iperf3 TCP test from src to dst (an address of sink)
// on port for secs seconds, with the extra client args (e.g. "-M",
// "1300"): the server in sink for this one test, the client's JSON
// report parsed.
func Iperf(ctx context.Context, src, sink *netns.NS, dst, port string, secs int, args ...string) (IperfResult, error) {
	var r IperfResult
	srv := sink.Command(ctx, "iperf3", "-s", "-1", "-B", dst, "-p", port)
	if err := srv.Start(); err != nil {
		return r, fmt.Errorf("start iperf3 server: %w", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	// Until the server listens (a probe connection would use up its one
	// test).
	for i := 0; ; i++ {
		out, _ := sink.Run(ctx, "ss", "-Hltn", "sport", "=", ":"+port)
		if strings.Contains(out, ":"+port) {
			break
		}
		if i == 100 {
			return r, errors.New("iperf3 server does not listen")
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := src.Command(ctx, "iperf3", append([]string{"-c", dst, "-p", port, "-t", fmt.Sprint(secs), "-J"}, args...)...).Output()
	if err != nil {
		return r, fmt.Errorf("iperf3 to %s: %w: %s", dst, err, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				Bytes         float64 `json:"bytes"`
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return r, fmt.Errorf("iperf3 output: %w", err)
	}
	return IperfResult{res.End.SumReceived.Bytes, res.End.SumReceived.BitsPerSecond / 1e9, res.End.SumSent.Retransmits}, nil
}

// verifierCounts sums the OPoT verifier's accepted packets and drops of
// every node of the lab.
func verifierCounts(ctx context.Context, name string, opts lab.Options) (ok, drops uint64, err error) {
	for _, node := range []string{"r3", "r6"} {
		pcs, err := lab.Counters(ctx, name, node, opts)
		if err != nil {
			continue // a scheme's lab has one of the two
		}
		for _, pc := range pcs {
			for _, c := range pc.Counters {
				switch {
				case !strings.HasPrefix(c.Name, "chain/"):
				case strings.HasSuffix(c.Name, "/verified"):
					ok += c.Value
				case strings.Contains(c.Name, "/drop/"):
					drops += c.Value
				}
			}
		}
	}
	return ok, drops, nil
}

// WriteGoodput prints the results as a markdown table, with each scheme's
// goodput relative to the first (plain SRv6) and to its uncompressed or
// OPoT-less twin.
func WriteGoodput(w io.Writer, pts []GoodputPoint) error {
	var b strings.Builder
	b.WriteString("| scheme | encap B | TCP MSS | Gbit/s median (min-max) | x srv6 | retransmits (median) | default MSS Gbit/s median (min-max) | default / by hand | OPoT verified / drops |\n|---|---|---|---|---|---|---|---|---|\n")
	base := 0.0
	for _, p := range pts {
		if p.Scheme == "srv6" {
			base = p.Summary.Median
		}
	}
	for _, p := range pts {
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f", p.Summary.Median/base)
		}
		v := "-"
		if p.Verified > 0 || p.Drops > 0 {
			v = fmt.Sprintf("%d / %d", p.Verified, p.Drops)
		}
		def := "-"
		if p.Summary.Median > 0 {
			def = fmt.Sprintf("%.2f", p.DefaultSummary.Median/p.Summary.Median)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f (%.2f-%.2f) | %s | %d | %.2f (%.2f-%.2f) | %s | %s |\n", p.Scheme, p.Encap, p.MSS,
			p.Summary.Median, p.Summary.Min, p.Summary.Max, ratio, medianInt(p.Retrans),
			p.DefaultSummary.Median, p.DefaultSummary.Min, p.DefaultSummary.Max, def, v)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func medianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	s, _ := Summarize(f)
	return int(s.Median)
}
