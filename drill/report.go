package drill

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is report.json: every figure, the thresholds, the verdict, the
// timeline and the configuration.
type Report struct {
	Namespace        string         `json:"namespace"`
	Lose             string         `json:"lose"`
	To               string         `json:"to"`
	Cut              Cut            `json:"cut"`
	Mode             Mode           `json:"mode"`
	Rate             int            `json:"rate"`
	Topics           []string       `json:"topics"`
	SubscriptionType string         `json:"subscriptionType"`
	Client           ClientSettings `json:"client"`
	Thresholds       Thresholds     `json:"thresholds"`
	Timeline         Timeline       `json:"timeline"`
	Figures          Figures        `json:"figures"`
	Verdict          Verdict        `json:"verdict"`
	// Rates are receipts and deliveries per second and region.
	Rates []Rate `json:"rates"`
}

// Rate is one series of the plot.
type Rate struct {
	Kind   string `json:"kind"` // "sent" (receipts) or "delivered"
	Region string `json:"region"`
	// PerSecond[i] counts the second [Start+i s, Start+i+1 s).
	PerSecond []int `json:"perSecond"`
}

// rates bins h per second from start.
func rates(h History, start, end time.Time) []Rate {
	n := int(end.Sub(start)/time.Second) + 1
	series := map[[2]string][]int{}
	add := func(kind, region string, at time.Time) {
		i := int(at.Sub(start) / time.Second)
		if i < 0 || i >= n {
			return
		}
		k := [2]string{kind, region}
		if series[k] == nil {
			series[k] = make([]int, n)
		}
		series[k][i]++
	}
	for _, s := range h.Sends {
		if s.Receipted() {
			add("sent", s.Region, s.ReceiptAt)
		}
	}
	for _, d := range h.Deliveries {
		add("delivered", d.Region, d.At)
	}
	var out []Rate
	for k, v := range series {
		out = append(out, Rate{Kind: k[0], Region: k[1], PerSecond: v})
	}
	slices.SortFunc(out, func(a, b Rate) int { return strings.Compare(a.Kind+a.Region, b.Kind+b.Region) })
	return out
}

// Write writes report.json and report.html into dir, creating it.
func (r Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	if err := page.Execute(&b, r.view()); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.html"), []byte(b.String()), 0o644)
}

// Plot geometry, in SVG units.
const (
	plotW, plotH      = 900.0, 320.0
	plotLeft, plotTop = 50.0, 20.0
	plotRight         = 20.0
	plotBottom        = 40.0
)

// regionColors colour the regions in order of appearance.
var regionColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

type view struct {
	R       Report
	SVG     template.HTML
	Figures [][2]string
}

func (r Report) view() view {
	return view{R: r, SVG: template.HTML(r.svg()), Figures: r.figureRows()}
}

// figureRows are the figures table's rows.
func (r Report) figureRows() [][2]string {
	f := r.Figures
	ms := func(m float64) string {
		return (time.Duration(m * float64(time.Millisecond))).Round(time.Millisecond).String()
	}
	rows := [][2]string{
		{"sends (receipted, errors)", fmt.Sprintf("%d (%d, %d)", f.Sends, f.Receipted, f.SendErrors)},
		{"deliveries", fmt.Sprint(f.Deliveries)},
		{"RPO", fmt.Sprintf("%d messages, %.3fs of traffic; %d arrived after the restore", f.RPO.Messages, f.RPO.Seconds, f.RPO.ArrivedAfterRestore)},
		{"lost for good", fmt.Sprint(f.LostForGood)},
		{"RTO median / max", ms(f.RTO.MedianMillis) + " / " + ms(f.RTO.MaxMillis)},
		{"order: out of order per key / per producer", fmt.Sprintf("%d / %d (judged: %v)", f.Order.PerKey, f.Order.PerProducer, f.Order.Judged)},
		{"fail back median / max", ms(f.FailBack.MedianMillis) + " / " + ms(f.FailBack.MaxMillis)},
		{"fail back lost", fmt.Sprint(f.FailBack.Lost)},
		{"redelivered after a confirmed ack (whole run)", fmt.Sprint(f.Redelivered)},
	}
	for _, d := range f.Duplicates {
		rows = append(rows, [2]string{"duplicates " + d.Topic + " / " + d.Subscription, fmt.Sprintf("%d (%.3fs)", d.Count, d.Seconds)})
	}
	for _, d := range f.FailBack.Duplicates {
		rows = append(rows, [2]string{"fail back duplicates " + d.Topic, fmt.Sprintf("%d (%.3fs)", d.Count, d.Seconds)})
	}
	return rows
}

// svg draws the timeline: phases shaded, send and delivery rates per
// region (deliveries dashed), the failover and fail back marked.
func (r Report) svg() string {
	tl := r.Timeline
	end := later(tl.End, tl.Stop)
	if end.IsZero() || !end.After(tl.Start) {
		end = tl.Start.Add(time.Second)
	}
	span := end.Sub(tl.Start).Seconds()
	w, h := plotW-plotLeft-plotRight, plotH-plotTop-plotBottom
	x := func(t time.Time) float64 { return plotLeft + w*t.Sub(tl.Start).Seconds()/span }
	peak := 1
	for _, s := range r.Rates {
		for _, v := range s.PerSecond {
			peak = max(peak, v)
		}
	}
	y := func(v int) float64 { return plotTop + h - h*float64(v)/float64(peak) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="11">`, plotW, plotH, plotW, plotH)
	shades := []string{"#f4f4f4", "#ffe9e9", "#fff6dc", "#e9f4ff", "#eaf7ea", "#f1ebf8", "#f4f4f4"}
	for i, p := range tl.Phases {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%g" width="%.1f" height="%g" fill="%s"/>`, x(p.Start), plotTop, max(0, x(p.End)-x(p.Start)), h, shades[i%len(shades)])
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" fill="#555">%s</text>`, x(p.Start)+2, plotTop+12, template.HTMLEscapeString(p.Name))
	}
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#333"/>`, plotLeft, plotTop+h, plotLeft+w, plotTop+h)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#333"/>`, plotLeft, plotTop, plotLeft, plotTop+h)
	fmt.Fprintf(&b, `<text x="4" y="%g">%d/s</text><text x="4" y="%g">0</text>`, plotTop+8, peak, plotTop+h)
	for s := 0; s <= int(span); s += max(1, int(span)/10) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%ds</text>`, x(tl.Start.Add(time.Duration(s)*time.Second)), plotTop+h+14, s)
	}
	var regions []string
	for _, s := range r.Rates {
		if !slices.Contains(regions, s.Region) {
			regions = append(regions, s.Region)
		}
	}
	slices.Sort(regions)
	for _, s := range r.Rates {
		color := regionColors[slices.Index(regions, s.Region)%len(regionColors)]
		var pts []string
		for i, v := range s.PerSecond {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(tl.Start.Add(time.Duration(i)*time.Second+time.Second/2)), y(v)))
		}
		dash := ""
		if s.Kind == "delivered" {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, `<polyline class="rate" fill="none" stroke="%s" stroke-width="1.5"%s points="%s"><title>%s %s</title></polyline>`,
			color, dash, strings.Join(pts, " "), s.Kind, template.HTMLEscapeString(s.Region))
	}
	marks := 0
	mark := func(t time.Time, label, color string) {
		if t.IsZero() {
			return
		}
		// Labels step up the plot, so that marks close in time (the cut
		// and the failover) stay readable.
		marks++
		fmt.Fprintf(&b, `<line class="mark" x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="%s" stroke-width="2"/>`, x(t), plotTop, x(t), plotTop+h, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" fill="%s">%s</text>`, x(t)+3, plotTop+h-4-14*float64(marks-1), color, label)
	}
	mark(tl.Cut, "cut", "#c00")
	mark(tl.Switch, "failover", "#06c")
	mark(tl.Restore, "restore", "#090")
	mark(tl.FailBack, "fail back", "#639")
	// Legend.
	lx := plotLeft
	for i, region := range regions {
		color := regionColors[i%len(regionColors)]
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"/><text x="%g" y="%g">%s sent</text>`,
			lx, plotH-8, lx+18, plotH-8, color, lx+22, plotH-4, template.HTMLEscapeString(region))
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2" stroke-dasharray="5,3"/><text x="%g" y="%g">delivered</text>`,
			lx+95, plotH-8, lx+113, plotH-8, color, lx+117, plotH-4)
		lx += 190
	}
	b.WriteString(`</svg>`)
	return b.String()
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>meridian drill: {{.R.Namespace}} losing {{.R.Lose}}</title>
<style>
body{font-family:sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:12px 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:13px}
.pass{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}
</style></head><body>
<h1>meridian drill: {{.R.Namespace}} losing {{.R.Lose}}</h1>
<p>Verdict: {{if .R.Verdict.Pass}}<span class="pass">PASS</span>{{else}}<span class="fail">FAIL</span>{{end}}.
Cut {{.R.Cut}}, {{.R.Mode}}, failover to {{.R.To}}; {{.R.Rate}} msg/s over {{len .R.Topics}} topics; subscription type {{.R.SubscriptionType}};
clients: keep-alive {{.R.Client.KeepAlive}}, reconnect backoff capped at {{.R.Client.MaxBackoff}}. Started {{.R.Timeline.Start.UTC.Format "2006-01-02 15:04:05 UTC"}}.</p>
<figure id="timeline">{{.SVG}}<figcaption>Receipts (solid) and deliveries (dashed) per second and region; phases shaded.</figcaption></figure>
<h2>Figures</h2>
<table id="figures"><tr><th>figure</th><th>value</th></tr>
{{range .Figures}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
<h2>Thresholds</h2>
<table id="verdict"><tr><th>check</th><th>value</th><th>limit</th><th>result</th></tr>
{{range .R.Verdict.Checks}}<tr><td>{{.Name}}</td><td>{{.Value}}</td><td>{{.Limit}}</td><td>{{if .Pass}}<span class="pass">pass</span>{{else}}<span class="fail">FAIL</span>{{end}}</td></tr>
{{end}}</table>
<h2>Phases</h2>
<table><tr><th>phase</th><th>from</th><th>to</th></tr>
{{range .R.Timeline.Phases}}<tr><td>{{.Name}}</td><td>{{.Start.UTC.Format "15:04:05.000"}}</td><td>{{.End.UTC.Format "15:04:05.000"}}</td></tr>
{{end}}</table>
</body></html>
`))

// writeHistory writes the history every figure was computed from, as
// history.json beside the report: an auditor, or the e2e bed's checker,
// can recompute them.
func writeHistory(dir string, h History) error {
	j, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "history.json"), j, 0o644)
}

// ReadHistory reads the history.json that a run wrote into dir.
func ReadHistory(dir string) (History, error) {
	var h History
	b, err := os.ReadFile(filepath.Join(dir, "history.json"))
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

// Summary is the report's verdict and figures as plain text, for the end
// of a run.
func Summary(r Report) string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Verdict.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "verdict: %s (%s losing %s, failover to %s, cut %s, %s, %d msg/s)\n", verdict, r.Namespace, r.Lose, r.To, r.Cut, r.Mode, r.Rate)
	for _, row := range r.figureRows() {
		fmt.Fprintf(&b, "  %-45s %s\n", row[0], row[1])
	}
	for _, e := range r.Figures.Order.Examples {
		fmt.Fprintf(&b, "  out of order: %s\n", e)
	}
	for _, c := range r.Verdict.Checks {
		result := "pass"
		if !c.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(&b, "  %-4s %s: %s (limit %s)\n", result, c.Name, c.Value, c.Limit)
	}
	return strings.TrimRight(b.String(), "\n")
}
