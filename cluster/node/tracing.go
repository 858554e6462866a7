package node

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/meridian-mq/meridian/telemetry"
)

// tracing is the process's one Tracing, handed to every region's broker and
// replicator: Config.Tracing, or else the one the OTEL_* environment
// describes (nil when it describes none), which Close shuts down after
// every part has stopped, so that the last spans are exported.
func (n *Node) tracing(ctx context.Context) (*telemetry.Tracing, error) {
	if n.cfg.Tracing != nil {
		return n.cfg.Tracing, nil
	}
	t, err := telemetry.TracingFromEnv(ctx, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("node: tracing from the OTEL_* environment: %w", err)
	}
	if t != nil {
		n.closers = append(n.closers, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := t.Shutdown(ctx); err != nil {
				n.cfg.Logger.Warn("flushing the last spans", "err", err)
			}
		})
	}
	return t, nil
}
