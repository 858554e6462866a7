package meta

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreMetrics are the latency and errors of metadata operations, by
// operation and store (region or global), registered once per registry and
// shared by the stores Instrument wraps with them.
type StoreMetrics struct {
	latency *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

// The operations StoreMetrics times; Watch and Campaign are not timed,
// because they last as long as their caller wants.
var instrumentedOps = []string{"get", "list", "create", "update", "update_guarded", "update_if_none", "delete", "grant", "revoke", "move_to_lease"}

// NewStoreMetrics declares meridian_etcd_operation_seconds and
// meridian_etcd_operation_errors_total on reg (nil: nowhere).
func NewStoreMetrics(reg prometheus.Registerer) (*StoreMetrics, error) {
	m := &StoreMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "meridian_etcd_operation_seconds",
			Help:    "Time of one metadata store operation, by operation and store (region or global); a CAS conflict or a missing key counts as an answer.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16),
		}, []string{"op", "store"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_etcd_operation_errors_total",
			Help: "Metadata store operations that failed (not a CAS conflict, a missing or existing key: those are answers), by operation and store.",
		}, []string{"op", "store"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.latency, m.errors} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Instrument returns s with its operations timed into m under the store
// label name. Methods it does not time pass straight through to s.
func Instrument(s Store, m *StoreMetrics, name string) Store {
	is := &instrumented{Store: s}
	for i, op := range instrumentedOps {
		is.latency[i] = m.latency.WithLabelValues(op, name)
		is.errors[i] = m.errors.WithLabelValues(op, name)
	}
	return is
}

// instrumented is a Store whose operations are timed. The label values are
// resolved once, so that an operation costs one clock read and one
// observation.
type instrumented struct {
	Store
	latency [opCount]prometheus.Observer
	errors  [opCount]prometheus.Counter
}

// The indexes of instrumentedOps, in its order.
const (
	opGet = iota
	opList
	opCreate
	opUpdate
	opUpdateGuarded
	opUpdateIfNone
	opDelete
	opGrant
	opRevoke
	opMoveToLease
	opCount // the number of operations
)

func (s *instrumented) done(op int, start time.Time, err error) {
	s.latency[op].Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrExists) && !errors.Is(err, ErrConflict) &&
		!errors.Is(err, context.Canceled) {
		s.errors[op].Inc()
	}
}

func (s *instrumented) Get(ctx context.Context, key string) (KV, error) {
	start := time.Now()
	kv, err := s.Store.Get(ctx, key)
	s.done(opGet, start, err)
	return kv, err
}

func (s *instrumented) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	start := time.Now()
	kvs, rev, err := s.Store.List(ctx, prefix)
	s.done(opList, start, err)
	return kvs, rev, err
}

func (s *instrumented) Create(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	start := time.Now()
	rev, err := s.Store.Create(ctx, key, value, lease)
	s.done(opCreate, start, err)
	return rev, err
}

func (s *instrumented) Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error) {
	start := time.Now()
	rev, err := s.Store.Update(ctx, key, value, modRev)
	s.done(opUpdate, start, err)
	return rev, err
}

func (s *instrumented) UpdateGuarded(ctx context.Context, key string, value []byte, modRev int64, guardKey string, guardRev int64) (int64, error) {
	start := time.Now()
	rev, err := s.Store.UpdateGuarded(ctx, key, value, modRev, guardKey, guardRev)
	s.done(opUpdateGuarded, start, err)
	return rev, err
}

func (s *instrumented) UpdateIfNone(ctx context.Context, key string, value []byte, modRev int64, prefix string) (int64, error) {
	start := time.Now()
	rev, err := s.Store.UpdateIfNone(ctx, key, value, modRev, prefix)
	s.done(opUpdateIfNone, start, err)
	return rev, err
}

func (s *instrumented) MoveToLease(ctx context.Context, key string, value []byte, modRev int64, lease LeaseID) (int64, error) {
	start := time.Now()
	rev, err := s.Store.MoveToLease(ctx, key, value, modRev, lease)
	s.done(opMoveToLease, start, err)
	return rev, err
}

func (s *instrumented) Delete(ctx context.Context, key string, modRev int64) error {
	start := time.Now()
	err := s.Store.Delete(ctx, key, modRev)
	s.done(opDelete, start, err)
	return err
}

func (s *instrumented) Grant(ctx context.Context, ttl time.Duration) (Lease, error) {
	start := time.Now()
	l, err := s.Store.Grant(ctx, ttl)
	s.done(opGrant, start, err)
	return l, err
}

func (s *instrumented) Revoke(ctx context.Context, id LeaseID) error {
	start := time.Now()
	err := s.Store.Revoke(ctx, id)
	s.done(opRevoke, start, err)
	return err
}
