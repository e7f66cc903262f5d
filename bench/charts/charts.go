package charts

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ticketd/ticketd/bench/report"
)

// Size of every PNG.
const (
	width  = 16 * vg.Centimeter
	height = 10 * vg.Centimeter
)

// Write draws every plot the summary has figures for into dir (which must
// exist) and returns the paths written, sorted: <workload>-latency.png and
// <workload>-throughput.png per workload with measured rows, each 16 × 10 cm.
// Errors: a plot that cannot be drawn or saved (wrapped with its name); the
// files written before it are returned too.
func Write(dir string, s report.Summary) ([]string, error) {
	var files []string
	for _, wl := range []string{report.WorkloadCommit, report.WorkloadLock} {
		series := seriesOf(s.Rows, wl)
		if len(series) == 0 {
			continue
		}
		lat, err := latencyPlot(wl, series)
		if err != nil {
			return files, err
		}
		thr, err := throughputPlot(wl, series)
		if err != nil {
			return files, err
		}
		for name, p := range map[string]*plot.Plot{"latency": lat, "throughput": thr} {
			path := filepath.Join(dir, fmt.Sprintf("%s-%s.png", wl, name))
			if err := p.Save(width, height, path); err != nil {
				return files, fmt.Errorf("charts: save %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	slices.Sort(files)
	return files, nil
}

// series is one system's measured rows of one workload, by concurrency.
type series struct {
	system string
	rows   []report.Row
}

// seriesOf groups the measured rows of workload by system, each series in
// increasing concurrency and the series in report order.
func seriesOf(rows []report.Row, workload string) []series {
	bySystem := map[string][]report.Row{}
	for _, r := range rows {
		if r.Workload == workload && r.Rounds > 0 {
			bySystem[r.System] = append(bySystem[r.System], r)
		}
	}
	out := make([]series, 0, len(bySystem))
	for system, rs := range bySystem {
		slices.SortFunc(rs, func(a, b report.Row) int { return a.Concurrency - b.Concurrency })
		out = append(out, series{system: system, rows: rs})
	}
	slices.SortFunc(out, func(a, b series) int { return report.CompareSystems(a.system, b.system) })
	return out
}

// colorOf gives each system the same color in every plot.
func colorOf(system string) color.Color {
	switch system {
	case report.SystemHashicorp:
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	case report.SystemEtcd:
		return color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	case report.SystemEtcdMutex:
		return color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // green
	}
	return color.Gray{Y: 0x60}
}

// newPlot returns a plot titled title with a log x axis of client counts,
// ticked at every level some series measured, and a grid; the caller adds
// the y axis's scale and the series.
func newPlot(title, ylabel string, ss []series) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "concurrent clients"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	var levels []int
	for _, s := range ss {
		for _, r := range s.rows {
			levels = append(levels, r.Concurrency)
		}
	}
	slices.Sort(levels)
	levels = slices.Compact(levels)
	ticks := make(plot.ConstantTicks, len(levels))
	for i, c := range levels {
		ticks[i] = plot.Tick{Value: float64(c), Label: strconv.Itoa(c)}
	}
	p.X.Tick.Marker = ticks
	// Pad the x range a little in log space so end points are not on the frame.
	p.X.Min = float64(levels[0]) / 1.3
	p.X.Max = float64(levels[len(levels)-1]) * 1.3
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Millimeter * 2
	p.Legend.YOffs = -vg.Millimeter * 2
	p.Add(plotter.NewGrid())
	return p
}

// latencyPlot draws p50 (solid) and p99 (dashed) latency in milliseconds
// on a log y axis. Errors: no latency figure at all, or gonum's.
func latencyPlot(workload string, ss []series) (*plot.Plot, error) {
	p := newPlot(report.WorkloadTitle(workload)+": latency", "ms, log scale (solid p50, dashed p99)", ss)
	p.Y.Scale = plot.LogScale{}
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, pct := range []struct {
			name   string
			get    func(report.Row) float64
			dashes []vg.Length
			glyph  draw.GlyphDrawer
		}{
			{"p50", func(r report.Row) float64 { return r.P50US }, nil, draw.CircleGlyph{}},
			{"p99", func(r report.Row) float64 { return r.P99US }, []vg.Length{vg.Points(5), vg.Points(3)}, draw.TriangleGlyph{}},
		} {
			var xys plotter.XYs
			for _, r := range s.rows {
				ms := pct.get(r) / 1000
				if ms <= 0 {
					continue
				}
				lo, hi = math.Min(lo, ms), math.Max(hi, ms)
				xys = append(xys, plotter.XY{X: float64(r.Concurrency), Y: ms})
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := linePoints(xys, s.system, pct.dashes, pct.glyph)
			if err != nil {
				return nil, fmt.Errorf("charts: %s %s: %w", s.system, pct.name, err)
			}
			p.Add(line, points)
			if pct.dashes == nil {
				p.Legend.Add(report.Label(workload, s.system), line, points)
			}
		}
	}
	if hi == 0 {
		return nil, fmt.Errorf("charts: %s: no latency figures", workload)
	}
	p.Y.Min, p.Y.Max = lo/1.5, hi*3 // headroom above for the legend
	p.Y.Tick.Marker = oneTwoFive(p.Y.Min, p.Y.Max)
	return p, nil
}

// throughputPlot draws operations per second on a linear y axis from 0.
// Errors: gonum's.
func throughputPlot(workload string, ss []series) (*plot.Plot, error) {
	unit := "commits/s"
	if workload == report.WorkloadLock {
		unit = "Acquire+Release cycles/s"
	}
	p := newPlot(report.WorkloadTitle(workload)+": throughput", unit, ss)
	hi := 0.0
	for _, s := range ss {
		var xys plotter.XYs
		for _, r := range s.rows {
			hi = math.Max(hi, r.PerSec)
			xys = append(xys, plotter.XY{X: float64(r.Concurrency), Y: r.PerSec})
		}
		line, points, err := linePoints(xys, s.system, nil, draw.CircleGlyph{})
		if err != nil {
			return nil, fmt.Errorf("charts: %s throughput: %w", s.system, err)
		}
		p.Add(line, points)
		p.Legend.Add(report.Label(workload, s.system), line, points)
	}
	p.Y.Min = 0
	p.Y.Max = hi * 1.25 // headroom for the legend
	p.Y.Tick.Marker = plainTicks{}
	return p, nil
}

// linePoints draws xys as one series of system: a 1.5 pt line in the
// system's color (dashed when dashes is set) with glyph at each point.
func linePoints(xys plotter.XYs, system string, dashes []vg.Length, glyph draw.GlyphDrawer) (*plotter.Line, *plotter.Scatter, error) {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, nil, err
	}
	line.Color, points.Color = colorOf(system), colorOf(system)
	line.Dashes = dashes
	line.Width = vg.Points(1.5)
	points.Shape = glyph
	points.Radius = vg.Points(2.5)
	return line, points, nil
}

// plainTicks are plot.DefaultTicks labelled as plain numbers ("2500", not
// "2500.00").
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = strconv.FormatFloat(t.Value, 'f', -1, 64)
		}
	}
	return ticks
}

// oneTwoFive returns log-axis ticks at 1, 2, 5 × 10^k between lo and hi,
// labelled in plain decimals (0.2, 0.5, 1, 2, 5, 10, ...).
func oneTwoFive(lo, hi float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return ticks
}
