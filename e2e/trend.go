package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// The soak's judgement of a resource series (TestSoak): a least-squares
// line through the samples taken after the warm-up, and the growth per
// hour that line projects, relative to the fitted value where the fit
// starts. A flat resource projects about 0; a leak projects a growth
// that does not depend on how noisy the samples are, only on how long
// they run.

// Sample is one reading of a resource: At is the time since the run
// began.
type Sample struct {
	At    time.Duration
	Value float64
}

// Trend is what a series' fitted line says.
type Trend struct {
	// Samples is how many samples the line was fitted to.
	Samples int
	// PerHour is the fitted slope, in the series' unit per hour.
	PerHour float64
	// Start is the fitted value at the first instant of the fit.
	Start float64
	// Growth is PerHour / Start: the projected growth in one hour, as a
	// fraction of Start (0.05 is 5% per hour).
	Growth float64
	// StdErr is the standard error of PerHour (slopeStdErr), and
	// GrowthStdErr that of Growth: a run cannot tell a Growth within two
	// of them of a bound from the bound.
	StdErr, GrowthStdErr float64
}

// errNoTrend is returned for a series that has no trend to fit.
var errNoTrend = errors.New("e2e: no trend")

// FitLine is the least-squares line y = intercept + slope·x through the
// points (xs[i], ys[i]). It needs at least two points and two distinct
// xs.
func FitLine(xs, ys []float64) (slope, intercept float64, err error) {
	if len(xs) != len(ys) {
		return 0, 0, fmt.Errorf("%w: %d xs and %d ys", errNoTrend, len(xs), len(ys))
	}
	n := float64(len(xs))
	if len(xs) < 2 {
		return 0, 0, fmt.Errorf("%w: %d points, need 2", errNoTrend, len(xs))
	}
	var meanX, meanY float64
	for i := range xs {
		meanX += xs[i]
		meanY += ys[i]
	}
	meanX, meanY = meanX/n, meanY/n
	// Centred sums keep the precision that Σx² − n·x̄² loses when the xs
	// are large (seconds into a run) and close together.
	var sxx, sxy float64
	for i := range xs {
		dx := xs[i] - meanX
		sxx += dx * dx
		sxy += dx * (ys[i] - meanY)
	}
	if sxx == 0 {
		return 0, 0, fmt.Errorf("%w: every point has x = %v", errNoTrend, meanX)
	}
	slope = sxy / sxx
	return slope, meanY - slope*meanX, nil
}

// slopeStdErr is the standard error of the slope of the line fitted
// through (xs[i], ys[i]), from the scatter of the points about it. Samples
// of a resource are not independent: a sawtooth (GC cycles, compactions)
// makes each residual much like the one before, and counted as
// independent they would make the slope look surer than it is. So the
// error is widened for the residuals' lag-1 autocorrelation r, as for an
// AR(1) series: the n points count as n(1-r)/(1+r) (at least 3).
func slopeStdErr(xs, ys []float64, slope, intercept float64) float64 {
	n := len(xs)
	if n < 3 {
		return math.Inf(1)
	}
	res := make([]float64, n)
	var meanX float64
	for i := range xs {
		res[i] = ys[i] - (intercept + slope*xs[i])
		meanX += xs[i]
	}
	meanX /= float64(n)
	var sxx, ss, lag1 float64
	for i := range xs {
		dx := xs[i] - meanX
		sxx += dx * dx
		ss += res[i] * res[i]
		if i > 0 {
			lag1 += res[i] * res[i-1]
		}
	}
	if ss == 0 {
		return 0
	}
	se := math.Sqrt(ss / float64(n-2) / sxx)
	if r := lag1 / ss; r > 0 {
		eff := max(float64(n)*(1-r)/(1+r), 3)
		se *= math.Sqrt(float64(n-2) / (eff - 2))
	}
	return se
}

// TrendSince fits a line to the samples taken at or after from, and
// projects its growth per hour relative to the line's value at from. A
// fitted start of zero or less has no relative growth and is an error.
func TrendSince(samples []Sample, from time.Duration) (Trend, error) {
	var xs, ys []float64
	for _, s := range samples {
		if s.At >= from {
			xs = append(xs, s.At.Hours())
			ys = append(ys, s.Value)
		}
	}
	slope, intercept, err := FitLine(xs, ys)
	if err != nil {
		return Trend{}, err
	}
	tr := Trend{Samples: len(xs), PerHour: slope, Start: intercept + slope*from.Hours(), StdErr: slopeStdErr(xs, ys, slope, intercept)}
	if tr.Start <= 0 {
		return tr, fmt.Errorf("%w: the fitted value at %v is %v, so growth relative to it means nothing", errNoTrend, from, tr.Start)
	}
	tr.Growth = tr.PerHour / tr.Start
	tr.GrowthStdErr = tr.StdErr / tr.Start
	return tr, nil
}

// Memory is a process's resident memory, in bytes, from the VmRSS and
// RssAnon lines of /proc/<pid>/status.
type Memory struct {
	// RSS is all of it.
	RSS int64
	// Anon is its anonymous part: the heap, the stacks and the runtime's
	// own, where a leak shows. The rest of RSS is file pages (the binary's
	// code and data, as they are first run, and mapped files such as
	// etcd's database), which the kernel fills and evicts by itself.
	Anon int64
}

// ProcMemory reads process pid's resident memory.
func ProcMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	found := map[string]bool{}
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for prefix, dst := range fields {
			rest, ok := strings.CutPrefix(sc.Text(), prefix)
			if !ok {
				continue
			}
			kb, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
			n, err := strconv.ParseInt(kb, 10, 64)
			if err != nil || unit != "kB" {
				return Memory{}, fmt.Errorf("pid %d: %s line %q is not '<n> kB'", pid, prefix, sc.Text())
			}
			*dst, found[prefix] = n<<10, true
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	for prefix := range fields {
		if !found[prefix] {
			return Memory{}, fmt.Errorf("pid %d: no %s line in /proc/%d/status (a zombie?)", pid, prefix, pid)
		}
	}
	return m, nil
}

// ProcOpenFiles is how many file descriptors process pid has open: the
// entries of /proc/<pid>/fd.
func ProcOpenFiles(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}
