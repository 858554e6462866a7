package autorecovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/time/rate"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// Service is one process's auto-recovery: a candidate for the region's
// auditor (Config.Auditor) and Config.Workers replication workers.
//
// Goroutines, all started by Start and stopped and waited for by Close:
// the campaign loop, which while this process leads runs the auditor's
// owner loop (audit) and its periodic check (checkLoop); one goroutine per
// worker, each the owner of its claim lease and its retry times; and the
// watch that wakes the workers when marks change. They share only the
// store, the ledger client, the limiter (safe for concurrent use) and the
// wake channels.
type Service struct {
	cfg     Config
	store   meta.Store
	lc      *ledger.Client
	log     *slog.Logger
	m       *metrics
	limiter *rate.Limiter

	rndMu sync.Mutex
	rnd   *rand.Rand

	// wakes has one channel (capacity 1) per worker: the watch pokes
	// each when marks change. One channel per worker, because a worker
	// that passed a shared poke on to the others would take it back
	// itself.
	wakes []chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts auto-recovery for cfg.Region on the region's store and
// ledger client, which the caller keeps open until Close returns. rnd
// drives replacement choice and sampling; it is used under the service's
// lock.
func Start(cfg Config, store meta.Store, lc *ledger.Client, rnd *rand.Rand) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || lc == nil || rnd == nil {
		return nil, fmt.Errorf("%w: a store, a ledger client and a random source are required", ErrInvalidConfig)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A burst of one second's worth: an entry larger than that waits in
	// parts (throttle), so a low rate holds for large entries too.
	burst := int(min(cfg.RateBytesPerSecond, 1<<30))
	s := &Service{
		cfg: cfg, store: store, lc: lc, log: log.With("component", "autorecovery"), m: m, rnd: rnd,
		limiter: rate.NewLimiter(rate.Limit(cfg.RateBytesPerSecond), burst),
	}
	for range cfg.Workers {
		s.wakes = append(s.wakes, make(chan struct{}, 1))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.Auditor {
		s.wg.Go(s.campaignLoop)
	}
	if cfg.Workers > 0 {
		s.wg.Go(func() { s.watch(bkproto.UnderReplicatedPrefix(cfg.Region), s.wakes...) })
		for i, wake := range s.wakes {
			s.wg.Go(func() { s.workerLoop(i, wake) })
		}
	}
	s.log.Info("auto-recovery started", "worker", cfg.WorkerID, "auditor_candidate", cfg.Auditor, "workers", cfg.Workers,
		"lost_bookie_recovery_delay", cfg.LostBookieRecoveryDelay, "rate_bytes_per_second", cfg.RateBytesPerSecond)
	return s, nil
}

// Close stops the auditor and the workers and waits for them. A repair in
// progress stops where it is: its claim lapses and another worker (or
// this one, after a restart) does it again; copies it made that no
// ensemble names are garbage the bookies collect.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// paused reports whether an operator has paused recovery.
func (s *Service) paused(ctx context.Context) (bool, error) {
	p, err := Paused(ctx, s.store, s.cfg.Region)
	if err == nil {
		s.m.paused.Set(b2f(p))
	}
	return p, err
}

// Paused reports whether auto-recovery of region is paused
// (bkproto.RecoveryDisabledKey exists).
func Paused(ctx context.Context, store meta.Store, region string) (bool, error) {
	_, err := store.Get(ctx, bkproto.RecoveryDisabledKey(region))
	if errors.Is(err, meta.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// watch pokes every channel of chs (without blocking) at every change
// under prefix until the service stops; after a failed or ended watch it
// waits a retry interval and pokes once, since a change may have been
// missed.
func (s *Service) watch(prefix string, chs ...chan struct{}) {
	for s.ctx.Err() == nil {
		for resp := range s.store.Watch(s.ctx, prefix, 0) {
			if resp.Err != nil {
				break
			}
			poke(chs...)
		}
		if !sleep(s.ctx, s.cfg.Clock, s.cfg.RetryInterval) {
			return
		}
		poke(chs...)
	}
}

// poke sends to every channel of chs that has room, never waiting.
func poke(chs ...chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// sleep waits d on clock or until ctx ends; it reports whether ctx is
// still live.
func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Service) intn(n int) int {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.rnd.IntN(n)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
