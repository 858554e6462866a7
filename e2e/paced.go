//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
)

// Paced calls send(0), send(1), ... at one call per every, kept by the
// clock as the workload producer's sends are (see pacer): call n falls
// due n intervals after the start, and after a stall the calls that fell
// due meanwhile are made at once. It returns when ctx ends. A client of
// another system paced with it offers the same load as a Producer. every
// must be positive.
func Paced(ctx context.Context, every time.Duration, send func(n int64)) error {
	if every <= 0 {
		return fmt.Errorf("%w: Paced needs a positive interval, got %v", ErrBadConfig, every)
	}
	pace := newPacer(clockwork.NewRealClock(), every)
	defer pace.stop()
	for n := int64(0); pace.wait(ctx); n++ {
		send(n)
	}
	return nil
}
