package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fakeResult() *Result {
	res := &Result{Scenario: "fake", Baseline: "plain", XLabel: "rules", Mode: ModeMax,
		Options: DefaultOptions(), Machine: Machine{Kernel: "6.18", CPUs: 2, CPU: "test"}, Start: time.Unix(0, 0)}
	add := func(c, series string, x float64, vals ...float64) {
		p := Point{Case: c, Series: series, X: x, FrameBytes: []int{82}}
		for i, v := range vals {
			p.Rounds = append(p.Rounds, Round{Round: i, Value: v, PPS: v, DUTTx: uint64(v), Sink: uint64(v)})
		}
		res.Points = append(res.Points, p)
	}
	res.Goals = []GoalResult{{Goal: Goal{Case: "nft-1", Base: "plain", Min: 0.87}}, {Goal: Goal{Case: "nft-64", Base: "plain", Min: 0.9}},
		{Goal: Goal{Case: "nft-1", Base: "plain", Min: 0.873}}}
	add("plain", "", 0, 860e3, 850e3, 870e3)
	add("nft-1", "nft forward", 1, 750e3, 740e3, 760e3)
	add("nft-64", "nft forward", 64, 240e3, 230e3, 250e3)
	add("nft-512", "nft forward", 512, 38e3, 37e3, 39e3)
	add("flaky", "", 0, 500e3, 520e3)
	res.Points[len(res.Points)-1].Err = "round 1: read | counters"
	res.Points[len(res.Points)-1].RoundErrors = []RoundError{{Round: 1, Err: "read | counters"}}
	res.Points = append(res.Points, Point{Case: "broken", Err: "set up: nope | really"})
	res.Points = append(res.Points, Point{Case: "dead", Err: "round 0: x; round 1: x; round 2: x",
		RoundErrors: []RoundError{{0, "x"}, {1, "x"}, {2, "x"}}})
	Finish(res)
	return res
}

func TestWriteReadResult(t *testing.T) {
	dir := t.TempDir()
	res := fakeResult()
	if err := WriteResult(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"result.json", "result.csv", "summary.csv", "fake.svg", "fake-x.svg", "results.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	back, err := ReadResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Points) != len(res.Points) || back.Points[3].Ratio != res.Points[3].Ratio {
		t.Errorf("round trip changed points: %+v", back.Points[3])
	}
	if math.Abs(back.Points[2].Ratio-240.0/860) > 1e-9 {
		t.Errorf("ratio %v", back.Points[2].Ratio)
	}
	for _, f := range []string{"fake.svg", "fake-x.svg"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			_, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", f, err)
			}
		}
	}
}

func TestSizePlot(t *testing.T) {
	res := fakeResult()
	res.Options.Sizes = []int{0, 1518}
	p := res.Points[0]
	p.Size, p.FrameBytes = 1518, []int{1518}
	res.Points = append(res.Points, p)
	Finish(res)
	svg, ok := sizeSVG(res)
	if !ok || !strings.Contains(svg, "frame size") || !strings.Contains(svg, "<polyline") {
		t.Errorf("size plot missing (ok=%v)", ok)
	}
	if _, ok := sizeSVG(fakeResult()); ok {
		t.Errorf("size plot drawn for a single size")
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b, fakeResult()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"| plain | 82 | 0.860 |", "| nft-64 | 82 | 0.240 | 0.230 | 0.250 | 0.28 (0.27-0.29)", "failed: set up: nope / really",
		"| flaky | 82 | 0.510 (2/3 rounds; round 1: read / counters) | 0.500 | 0.520 |",
		"| dead |  | failed (0/3 rounds): round 0: x; round 1: x; round 2: x |",
		"| nft-1 | 82 | 0.872 (0.871-0.874) | 3 | 0.874 |",
		"| nft-1 | plain | 0 | 0.87 | 0.872 | 0.872 (0.871-0.874) | 0.874 | met |",
		"| nft-64 | plain | 0 | 0.9 | 0.279 | 0.279 (0.271-0.287) | 0.287 | not met |",
		"| nft-1 | plain | 0 | 0.873 | 0.872 | 0.872 (0.871-0.874) | 0.874 | at the edge |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// Result.Err names every failed point (set-up failures and failed rounds)
// so the command can exit non-zero; nil when everything was measured.
func TestResultErr(t *testing.T) {
	res := fakeResult()
	err := res.Err()
	if err == nil || !strings.Contains(err.Error(), "3 of 7 points failed") ||
		!strings.Contains(err.Error(), "case broken") || !strings.Contains(err.Error(), "case flaky (size 0): 2/3 rounds: round 1") {
		t.Errorf("Err() = %v", err)
	}
	ok := &Result{Scenario: "x", Options: DefaultOptions(), Points: []Point{{Case: "plain", Rounds: make([]Round, 3)}}}
	if err := ok.Err(); err != nil {
		t.Errorf("Err() of a clean run = %v", err)
	}
}

// TestAddGoals: a result read from a run without goals gets its
// scenario's goals for the cases it measured, with their ratios.
func TestAddGoals(t *testing.T) {
	rounds := func(vs ...float64) []Round {
		var rs []Round
		for i, v := range vs {
			rs = append(rs, Round{Round: i, Value: v})
		}
		return rs
	}
	res := &Result{Scenario: "proxy", Baseline: "nf-plain", Mode: ModeMax, Points: []Point{
		{Case: "nf-plain", Rounds: rounds(100, 90, 110)},
		{Case: "end.ad-tlv", Rounds: rounds(100, 50, 100)},
		{Case: "end.ad-opot", Rounds: rounds(95, 45, 90)},
	}}
	Finish(res)
	AddGoals(res)
	if len(res.Goals) != 1 {
		t.Fatalf("goals %+v, want end.ad-opot over end.ad-tlv only", res.Goals)
	}
	g := res.Goals[0]
	if g.Case != "end.ad-opot" || g.Base != "end.ad-tlv" || g.Min != 0.9 || g.Paired == nil || g.Paired.Median != 0.9 || g.FastRatio != 0.95 || g.Verdict() != "met" {
		t.Errorf("goal %+v (paired %+v), verdict %s", g, g.Paired, g.Verdict())
	}
}

// The BPF cost table appears only when rounds carry program costs: per
// case the median BPF time per packet sent, and per program the median
// time per run and runs per packet.
func TestWriteMarkdownBPF(t *testing.T) {
	res := fakeResult()
	var b strings.Builder
	if err := WriteMarkdown(&b, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "BPF ns / packet") {
		t.Fatal("a BPF table without BPF costs")
	}
	p := &res.Points[1] // nft-1, 3 rounds
	for i, ns := range []uint64{300, 330, 360} {
		p.Rounds[i].DUTTx = 1000
		p.Rounds[i].BPF = []ProgCost{{Name: "srchain_end", Runs: 1000, Ns: ns * 1000}, {Name: "srchain_fw", Runs: 500, Ns: 20 * 500}}
	}
	b.Reset()
	if err := WriteMarkdown(&b, res); err != nil {
		t.Fatal(err)
	}
	want := "| nft-1 | 82 | 340 | srchain_end 330 (1.00), srchain_fw 20 (0.50) |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}
}
