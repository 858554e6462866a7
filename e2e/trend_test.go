package e2e

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/testkit"
)

func TestFitLine(t *testing.T) {
	for _, tc := range []struct {
		name             string
		xs, ys           []float64
		slope, intercept float64
	}{
		{"exact", []float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}, 2, 1},
		{"flat", []float64{10, 20, 30}, []float64{4, 4, 4}, 0, 4},
		{"falling", []float64{1, 2}, []float64{5, 3}, -2, 7},
		// Symmetric noise around y = x: the residuals cancel.
		{"noisy", []float64{0, 1, 2, 3}, []float64{1, 0, 3, 2}, 0.6, 0.6},
		// Large, close xs (hours since an epoch), where an uncentred sum
		// of squares loses the slope.
		{"large x", []float64{1e9, 1e9 + 1, 1e9 + 2}, []float64{0, 1, 2}, 1, -1e9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slope, intercept, err := FitLine(tc.xs, tc.ys)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(slope-tc.slope) > 1e-9 || math.Abs(intercept-tc.intercept) > 1e-6*math.Max(1, math.Abs(tc.intercept)) {
				t.Errorf("got y = %v + %v·x, want %v + %v·x", intercept, slope, tc.intercept, tc.slope)
			}
		})
	}
}

func TestFitLineRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs, ys []float64
	}{
		{"no points", nil, nil},
		{"one point", []float64{1}, []float64{1}},
		{"one x", []float64{2, 2, 2}, []float64{1, 2, 3}},
		{"lengths differ", []float64{1, 2}, []float64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := FitLine(tc.xs, tc.ys); !errors.Is(err, errNoTrend) {
				t.Errorf("err = %v, want errNoTrend", err)
			}
		})
	}
}

func TestTrendSince(t *testing.T) {
	// A warm-up that doubles the value, then 10 units per hour on 100 at
	// the 5-minute mark: 10% per hour. The warm-up must not count.
	var leak, flat []Sample
	for at := time.Duration(0); at <= 30*time.Minute; at += 15 * time.Second {
		v := 100 + 10*(at-5*time.Minute).Hours()
		if at < 5*time.Minute {
			v = 50 + 10*at.Minutes()
		}
		leak = append(leak, Sample{At: at, Value: v})
		// Alternating ±5 around 200: no growth at all.
		flat = append(flat, Sample{At: at, Value: 200 + 5*float64(1-2*(len(flat)%2))})
	}
	tr, err := TrendSince(leak, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Samples != 101 || math.Abs(tr.PerHour-10) > 1e-6 || math.Abs(tr.Start-100) > 1e-6 || math.Abs(tr.Growth-0.1) > 1e-9 {
		t.Errorf("leak: %+v, want 101 samples, 10/h from 100: growth 0.1", tr)
	}
	tr, err = TrendSince(flat, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(tr.Growth) > 0.01 {
		t.Errorf("flat: %+v, want a growth near 0", tr)
	}
	// Nothing after the mark, or a start at zero: no trend.
	if _, err := TrendSince(leak, time.Hour); !errors.Is(err, errNoTrend) {
		t.Errorf("no samples after the mark: err = %v, want errNoTrend", err)
	}
	zero := []Sample{{At: time.Minute, Value: 0}, {At: 2 * time.Minute, Value: 0}}
	if _, err := TrendSince(zero, time.Minute); !errors.Is(err, errNoTrend) {
		t.Errorf("a series at zero: err = %v, want errNoTrend", err)
	}
}

func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	mem, err := ProcMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if mem.Anon <= 0 || mem.RSS < mem.Anon {
		t.Errorf("this test process's memory is %+v: want an anonymous part, within RSS", mem)
	}
	// Two children started alike but for two extra files hold two files
	// more. (A child also inherits whatever descriptors this process got
	// without close-on-exec, the same for both; and this process's own
	// count moves with whatever the runtime and other tests open.)
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	plain, withTwo := childOpenFiles(t, nil), childOpenFiles(t, []*os.File{f, f})
	if withTwo != plain+2 {
		t.Errorf("a child given two files more holds %d open files, the other %d: want two more", withTwo, plain)
	}
	if _, err := ProcMemory(-1); err == nil {
		t.Error("ProcMemory of pid -1 gave no error")
	}
	if _, err := ProcOpenFiles(-1); err == nil {
		t.Error("ProcOpenFiles of pid -1 gave no error")
	}
}

// childOpenFiles starts sleep with extra files besides the standard three
// and counts its open files once it runs sleep; it stops the child.
func childOpenFiles(t *testing.T, extra []*os.File) int {
	t.Helper()
	child := exec.Command("sleep", "60")
	child.ExtraFiles = extra
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Process.Kill()
		child.Wait()
	}()
	// Until exec replaces the fork, the child's table is the fork's; and
	// after the exec, the dynamic loader opens and closes files (the
	// loader's cache, the C library) before sleep's main runs. So the
	// count waits until the child sleeps: running sleep, in an
	// interruptible wait (state S), which the loader never is, since it
	// reads its files from the page cache (R) or the disk (D).
	testkit.WaitFor(t, "the child asleep in sleep", func() bool {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child.Process.Pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child.Process.Pid))
		_, fields, _ := strings.Cut(string(stat), ") ") // the command may hold spaces: after its ')'
		return strings.HasPrefix(string(cmdline), "sleep\x00") && strings.HasPrefix(fields, "S ")
	})
	n, err := ProcOpenFiles(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSlopeStdErr(t *testing.T) {
	// A line with independent noise of σ = 1: the error is σ/√Sxx, the
	// textbook one, within what 200 points allow.
	rng := rand.New(rand.NewPCG(1, 2))
	var xs, noisy, exact, wave []float64
	for i := range 200 {
		x := float64(i)
		xs = append(xs, x)
		noisy = append(noisy, 3+0.5*x+rng.NormFloat64())
		exact = append(exact, 3+0.5*x)
		// A slow sawtooth: 20 points up, then back down, around the line.
		wave = append(wave, 3+0.5*x+float64(i%20))
	}
	var sxx float64
	for _, x := range xs {
		sxx += (x - 99.5) * (x - 99.5)
	}
	slope, intercept, err := FitLine(xs, noisy)
	if err != nil {
		t.Fatal(err)
	}
	if se, want := slopeStdErr(xs, noisy, slope, intercept), 1/math.Sqrt(sxx); se < 0.8*want || se > 1.25*want {
		t.Errorf("independent noise: stderr %.3g, want about %.3g", se, want)
	}
	if se := slopeStdErr(xs, exact, 0.5, 3); se != 0 {
		t.Errorf("points on the line: stderr %v, want 0", se)
	}
	// The sawtooth's residuals follow one another: counted as independent
	// they would give a far smaller error than the widened one.
	slope, intercept, err = FitLine(xs, wave)
	if err != nil {
		t.Fatal(err)
	}
	var ss float64
	for i, x := range xs {
		r := wave[i] - (intercept + slope*x)
		ss += r * r
	}
	naive := math.Sqrt(ss / 198 / sxx)
	if se := slopeStdErr(xs, wave, slope, intercept); se < 2*naive {
		t.Errorf("sawtooth: stderr %.3g, not widened past 2× the independent one (%.3g)", se, naive)
	}
}
