package bench

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Plots are hand-written SVG: no plotting dependency, readable in any
// browser and in the repository's web view.

const (
	plotW, plotH = 900.0, 480.0
	padL, padR   = 80.0, 30.0
	padT, padB   = 50.0, 100.0
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// WritePlots writes SCENARIO.svg (median per case with min-max whiskers,
// per size); when cases carry X values, SCENARIO-x.svg (median vs X per
// series, log2 x axis); with several sizes, SCENARIO-size.svg (median vs
// frame size per case).
func WritePlots(dir string, res *Result) error {
	if err := writeFile(filepath.Join(dir, res.Scenario+".svg"), barSVG(res)); err != nil {
		return err
	}
	if svg, ok := lineSVG(res); ok {
		if err := writeFile(filepath.Join(dir, res.Scenario+"-x.svg"), svg); err != nil {
			return err
		}
	}
	if svg, ok := sizeSVG(res); ok {
		return writeFile(filepath.Join(dir, res.Scenario+"-size.svg"), svg)
	}
	return nil
}

func writeFile(path, s string) error {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

func svgHead(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%.0f" y="25" font-size="15" text-anchor="middle">%s</text>`+"\n", plotW/2, html.EscapeString(title))
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func yAxis(b *strings.Builder, top float64, label string, scale float64) {
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		y := padT + (plotH-padT-padB)*(1-float64(i)/5)
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", padL, plotW-padR, y, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end">%.3g</text>`+"\n", padL-6, y+4, v*scale)
	}
	fmt.Fprintf(b, `<text transform="translate(18,%.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		padT+(plotH-padT-padB)/2, html.EscapeString(label))
}

func barSVG(res *Result) string {
	name, scale, _ := unit(res)
	var b strings.Builder
	svgHead(&b, fmt.Sprintf("%s: %s, median and min-max of %d rounds", res.Scenario, name, res.Options.Rounds))
	top := 0.0
	for _, p := range res.Points {
		top = max(top, p.Summary.Max)
	}
	top = niceMax(top)
	yAxis(&b, top, name, scale)
	n := max(len(res.Points), 1)
	slot := (plotW - padL - padR) / float64(n)
	h := plotH - padT - padB
	y := func(v float64) float64 { return padT + h*(1-v/top) }
	sizes := []int{}
	for _, p := range res.Points {
		if !slices.Contains(sizes, p.Size) {
			sizes = append(sizes, p.Size)
		}
	}
	for i, p := range res.Points {
		x := padL + slot*float64(i)
		col := palette[slices.Index(sizes, p.Size)%len(palette)]
		if p.Summary.N > 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %.4g</title></rect>`+"\n",
				x+slot*0.15, y(p.Summary.Median), slot*0.7, h*p.Summary.Median/top, col, html.EscapeString(p.Case), p.Summary.Median*scale)
			cx := x + slot/2
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx, cx, y(p.Summary.Min), y(p.Summary.Max))
			if !math.IsNaN(p.Ratio) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%.2f</text>`+"\n", cx, y(p.Summary.Max)-4, p.Ratio)
			}
		}
		label := p.Case
		if len(sizes) > 1 {
			label = fmt.Sprintf("%s %s", p.Case, frameBytes(p))
		}
		// Horizontal labels in two staggered rows: rotated text renders
		// differently across SVG renderers.
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="10">%s</text>`+"\n",
			x+slot/2, plotH-padB+16+float64(i%2)*14, html.EscapeString(label))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// xyPoint is one median with its spread at an x value.
type xyPoint struct{ x, y, lo, hi float64 }

// lineSVG plots cases that carry X (e.g. rule counts) by series, log2 x.
func lineSVG(res *Result) (string, bool) {
	series := map[string][]xyPoint{}
	var names []string
	for _, p := range res.Points {
		if p.X <= 0 || p.Series == "" || p.Summary.N == 0 {
			continue
		}
		s := p.Series
		if len(res.Options.Sizes) > 1 {
			s = fmt.Sprintf("%s %s B", p.Series, frameBytes(p))
		}
		if _, ok := series[s]; !ok {
			names = append(names, s)
		}
		series[s] = append(series[s], xyPoint{p.X, p.Summary.Median, p.Summary.Min, p.Summary.Max})
	}
	if len(names) == 0 {
		return "", false
	}
	xlabel := res.XLabel
	if xlabel == "" {
		xlabel = "x"
	}
	base := math.NaN()
	for _, p := range res.Points {
		if p.Case == res.Baseline && p.Summary.N > 0 {
			base = p.Summary.Median
			break
		}
	}
	return linePlot(res, xlabel, true, names, series, base), true
}

// sizeSVG plots each case's rate against the frame size (seed 002's
// sweep), linear x.
func sizeSVG(res *Result) (string, bool) {
	series := map[string][]xyPoint{}
	var names []string
	sizes := map[int]bool{}
	for _, p := range res.Points {
		if p.Summary.N == 0 || len(p.FrameBytes) == 0 {
			continue
		}
		sizes[p.Size] = true
		if _, ok := series[p.Case]; !ok {
			names = append(names, p.Case)
		}
		series[p.Case] = append(series[p.Case], xyPoint{float64(p.FrameBytes[0]), p.Summary.Median, p.Summary.Min, p.Summary.Max})
	}
	if len(sizes) < 2 {
		return "", false
	}
	return linePlot(res, "frame size (bytes with FCS)", false, names, series, math.NaN()), true
}

func linePlot(res *Result, xlabel string, logx bool, names []string, series map[string][]xyPoint, base float64) string {
	name, scale, _ := unit(res)
	var b strings.Builder
	svgHead(&b, fmt.Sprintf("%s: %s vs %s", res.Scenario, name, xlabel))
	top, xmax := 0.0, 1.0
	for _, s := range series {
		for _, q := range s {
			top, xmax = max(top, q.hi), max(xmax, q.x)
		}
	}
	top = niceMax(top)
	yAxis(&b, top, name, scale)
	h, w := plotH-padT-padB, plotW-padL-padR
	Y := func(v float64) float64 { return padT + h*(1-v/top) }
	var X func(float64) float64
	if logx {
		lx := math.Log2(max(xmax, 2))
		X = func(v float64) float64 { return padL + w*math.Log2(max(v, 1))/lx }
		for e := 0.0; e <= lx; e++ {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f</text>`+"\n", X(math.Exp2(e)), plotH-padB+16, math.Exp2(e))
		}
		xlabel += " (log2)"
	} else {
		xm := niceMax(xmax)
		X = func(v float64) float64 { return padL + w*v/xm }
		for i := 0; i <= 5; i++ {
			v := xm * float64(i) / 5
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f</text>`+"\n", X(v), plotH-padB+16, v)
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", padL+w/2, plotH-padB+36, html.EscapeString(xlabel))
	for i, n := range names {
		col := palette[i%len(palette)]
		s := series[n]
		slices.SortFunc(s, func(a, b xyPoint) int { return cmp.Compare(a.x, b.x) })
		var path []string
		for _, q := range s {
			path = append(path, fmt.Sprintf("%.1f,%.1f", X(q.x), Y(q.y)))
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", X(q.x), X(q.x), Y(q.lo), Y(q.hi), col)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", X(q.x), Y(q.y), col)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(path, " "), col)
		// Legend in rows under the x axis, clear of the data.
		lx, ly := padL+float64(i%4)*200, plotH-padB+56+float64(i/4)*14
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`+"\n", lx, lx+24, ly-4, ly-4, col)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", lx+30, ly, col, html.EscapeString(n))
	}
	if !math.IsNaN(base) {
		// The baseline as a dashed line for reference.
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="gray" stroke-dasharray="6,4"/>`+"\n", padL, plotW-padR, Y(base), Y(base))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="gray">%s</text>`+"\n", padL+6, Y(base)-4, html.EscapeString(res.Baseline))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
