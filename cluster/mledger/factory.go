package mledger

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// Factory opens managed ledgers on one ledger client and metadata store. It
// tracks what it opened so that Close closes everything and a topic is open
// at most once per factory.
type Factory struct {
	cfg    Config
	client *ledger.Client
	store  meta.Store
	log    *slog.Logger
	clock  clockwork.Clock // Config.Clock

	mu   sync.Mutex
	open map[string]*ManagedLedger
}

// NewFactory checks cfg and returns a factory. Every argument is required.
func NewFactory(cfg Config, client *ledger.Client, store meta.Store, logger *slog.Logger) (*Factory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil || store == nil || logger == nil {
		return nil, fmt.Errorf("%w: client, store and logger are required", ErrInvalidConfig)
	}
	return &Factory{cfg: cfg, client: client, store: store, log: logger, clock: cfg.Clock, open: map[string]*ManagedLedger{}}, nil
}

// Open opens topic's managed ledger for writing, creating it if it does not
// exist. See ManagedLedger for what opening does after a crash.
func (f *Factory) Open(ctx context.Context, topic string, opts ...OpenOption) (*ManagedLedger, error) {
	f.mu.Lock()
	if _, ok := f.open[topic]; ok {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrAlreadyOpen, topic)
	}
	f.open[topic] = nil // reserve; Open of the same topic meanwhile fails
	f.mu.Unlock()
	ml, err := open(ctx, f, topic, opts)
	f.mu.Lock()
	if err != nil {
		delete(f.open, topic)
	} else {
		f.open[topic] = ml
	}
	f.mu.Unlock()
	return ml, err
}

func (f *Factory) forget(topic string, ml *ManagedLedger) {
	f.mu.Lock()
	if f.open[topic] == ml {
		delete(f.open, topic)
	}
	f.mu.Unlock()
}

// Close closes every managed ledger the factory has open.
func (f *Factory) Close(ctx context.Context) error {
	f.mu.Lock()
	var mls []*ManagedLedger
	for _, ml := range f.open {
		if ml != nil {
			mls = append(mls, ml)
		}
	}
	f.mu.Unlock()
	var first error
	for _, ml := range mls {
		if err := ml.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (f *Factory) metaCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.cfg.MetaTimeout)
}
