package bench

import (
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/srchain/srchain/internal/compile"
	"github.com/srchain/srchain/internal/fwstate"
	"github.com/srchain/srchain/internal/spec"
)

// The forwarding-state report (`srchain bench fwstate`, issue 12, seed
// 004 Fig. 3): k-ary fat trees (internal/fwstate.FatTree) with n chains
// placed across racks, compiled, and the forwarding entries per router
// counted with source routing (srchain) and rule-based chaining. A count,
// not a measurement: the same spec gives the same numbers on any machine.

// FwStatePoint is one fat tree's summary.
type FwStatePoint struct {
	K      int `json:"k"`
	Chains int `json:"chains"`
	fwstate.Summary
}

// RunFwState generates, compiles and counts one fat tree per k.
func RunFwState(ks []int, chains int) ([]FwStatePoint, error) {
	var out []FwStatePoint
	for _, k := range ks {
		doc, err := fwstate.FatTree(k, chains, 1)
		if err != nil {
			return out, err
		}
		s, err := spec.Parse(doc, fmt.Sprintf("fat-tree-%d.yaml", k))
		if err != nil {
			return out, err
		}
		if err := s.Validate(); err != nil {
			return out, fmt.Errorf("fat tree k=%d: %w", k, err)
		}
		net, err := compile.Compile(s)
		if err != nil {
			return out, fmt.Errorf("fat tree k=%d: %w", k, err)
		}
		es, err := fwstate.Count(s, net)
		if err != nil {
			return out, err
		}
		out = append(out, FwStatePoint{K: k, Chains: chains, Summary: fwstate.Summarize(es)})
	}
	return out, nil
}

// WriteFwState prints the points as a markdown table.
func WriteFwState(w io.Writer, pts []FwStatePoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintln(tw, "| k\t| routers\t| chains\t| source routing max\t| mean\t| rule-based max\t| mean\t| total SR / RB\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, p := range pts {
		fmt.Fprintf(tw, "| %d\t| %d\t| %d\t| %d\t| %.1f\t| %d\t| %.1f\t| %d / %d\t|\n",
			p.K, p.Routers, p.Chains, p.SRMax, p.SRMean, p.RBMax, p.RBMean, p.SRTotal, p.RBTotal)
	}
	return tw.Flush()
}

// FwStateSVG plots the maximum and mean entries per router against k.
func FwStateSVG(pts []FwStatePoint) string {
	var b strings.Builder
	chains := 0
	if len(pts) > 0 {
		chains = pts[0].Chains
	}
	svgHead(&b, fmt.Sprintf("forwarding entries per router, %d chains, k-ary fat tree", chains))
	top, kmax := 1.0, 1.0
	for _, p := range pts {
		top = max(top, float64(p.SRMax), float64(p.RBMax))
		kmax = max(kmax, float64(p.K))
	}
	top = niceMax(top)
	yAxis(&b, top, "entries per router", 1)
	h, w := plotH-padT-padB, plotW-padL-padR
	X := func(k float64) float64 { return padL + w*k/kmax }
	Y := func(v float64) float64 { return padT + h*(1-v/top) }
	for _, p := range pts {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", X(float64(p.K)), plotH-padB+16, p.K)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">k</text>`+"\n", padL+w/2, plotH-padB+36)
	series := []struct {
		name string
		v    func(FwStatePoint) float64
	}{
		{"source routing, max", func(p FwStatePoint) float64 { return float64(p.SRMax) }},
		{"rule-based, max", func(p FwStatePoint) float64 { return float64(p.RBMax) }},
		{"source routing, mean", func(p FwStatePoint) float64 { return p.SRMean }},
		{"rule-based, mean", func(p FwStatePoint) float64 { return p.RBMean }},
	}
	for i, s := range series {
		col := palette[i%len(palette)]
		var path []string
		for _, p := range pts {
			x, y := X(float64(p.K)), Y(s.v(p))
			path = append(path, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x, y, col)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(path, " "), col)
		lx, ly := padL+float64(i)*200, plotH-padB+56
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`+"\n", lx, lx+24, ly-4, ly-4, col)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", lx+30, ly, col, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
