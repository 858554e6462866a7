package bookie

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// leaseFile records the lease of the current run, so that the next run of
// the same bookie can revoke it (DESIGN §3: etcd renews old leases to a full
// TTL when it restarts, so a crashed bookie's key would otherwise linger).
const leaseFile = "LEASE"

// registerLoop keeps the bookie registered at BookieKey(region, id) under a
// lease for as long as the bookie runs: it registers, re-registers when the
// lease is lost, rewrites the value when the bookie turns read-only, and
// revokes the lease on the way out so that writers stop choosing this bookie
// at once.
//
// The lease is granted with ctx, so its keep-alive ends when the bookie
// stops, and Lease.Done may close before the loop has seen ctx.Done (at
// once, on a loaded machine, when the loop was not yet waiting). Whichever
// of the two the loop sees first, a stop is a stop: the loop revokes the
// lease whenever it ends with ctx done. The lease then still lives on the
// server, unrenewed, for its TTL; without the revoke the key would stay that
// long and writers would keep choosing a stopped bookie.
func (b *Bookie) registerLoop(ctx context.Context) {
	key := bkproto.BookieKey(b.cfg.Region, b.cfg.ID)
	backoff := b.cfg.LeaseTTL / 4
	for ctx.Err() == nil {
		lease, modRev, err := b.register(ctx, key)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("bookie registration failed; retrying", "key", key, "err", err, "retry_in", backoff)
				b.sleep(ctx, backoff)
			}
			continue
		}
		b.log.Info("bookie registered", "key", key, "lease", fmt.Sprintf("%x", lease.ID()), "read_only", b.readOnly.Load())
		b.registered.Store(true)
		b.holdRegistration(ctx, key, lease, modRev)
		b.registered.Store(false)
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := lease.Revoke(rctx); err != nil {
				b.log.Warn("cannot revoke registration lease", "err", err)
			}
			cancel()
			return
		}
	}
}

// holdRegistration returns when ctx is done or when the registration under
// lease must be made again: the lease was lost, or the value could not be
// rewritten (the lease is then revoked here).
func (b *Bookie) holdRegistration(ctx context.Context, key string, lease meta.Lease, modRev int64) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.Done():
			if ctx.Err() == nil {
				b.log.Warn("registration lease lost; registering again", "key", key)
			}
			return
		case <-b.readOnlyC:
			var err error
			modRev, err = b.cfg.Meta.Update(ctx, key, b.registration(), modRev)
			if err != nil {
				if ctx.Err() == nil {
					b.log.Warn("cannot update registration; registering again", "err", err)
					rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					lease.Revoke(rctx)
					cancel()
				}
				return
			}
			b.log.Info("registration updated", "read_only", b.readOnly.Load())
		}
	}
}

func (b *Bookie) sleep(ctx context.Context, d time.Duration) {
	t := b.clock.NewTicker(d)
	defer t.Stop()
	select {
	case <-t.Chan():
	case <-ctx.Done():
	}
}

// register grants a lease and creates the registration under it. A key left
// by this bookie's previous run (its lease id is in the LEASE file) is
// removed by revoking that lease; a key held by any other lease means another
// live process uses this bookie id, and registration fails until it is gone.
func (b *Bookie) register(ctx context.Context, key string) (meta.Lease, int64, error) {
	lease, err := b.cfg.Meta.Grant(ctx, b.cfg.LeaseTTL)
	if err != nil {
		return nil, 0, fmt.Errorf("grant lease: %w", err)
	}
	fail := func(err error) (meta.Lease, int64, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		lease.Revoke(rctx)
		return nil, 0, err
	}
	if err := b.saveLease(lease.ID()); err != nil {
		return fail(err)
	}
	rev, err := b.cfg.Meta.Create(ctx, key, b.registration(), lease.ID())
	if errors.Is(err, meta.ErrExists) {
		kv, gerr := b.cfg.Meta.Get(ctx, key)
		switch {
		case errors.Is(gerr, meta.ErrNotFound):
		case gerr != nil:
			return fail(fmt.Errorf("read existing registration: %w", gerr))
		case kv.Lease != meta.NoLease && b.wasOurLease(kv.Lease):
			b.log.Info("revoking the previous run's registration lease", "lease", fmt.Sprintf("%x", kv.Lease))
			if err := b.cfg.Meta.Revoke(ctx, kv.Lease); err != nil {
				return fail(fmt.Errorf("revoke previous lease: %w", err))
			}
		default:
			return fail(fmt.Errorf("bookie id %q is registered by another process (lease %x); give each bookie its own --id, or wait %s for a dead one's lease to expire",
				b.cfg.ID, kv.Lease, b.cfg.LeaseTTL))
		}
		rev, err = b.cfg.Meta.Create(ctx, key, b.registration(), lease.ID())
	}
	if err != nil {
		return fail(fmt.Errorf("create %s: %w", key, err))
	}
	return lease, rev, nil
}

// The lease file holds the ids of this run's leases and the previous run's,
// one per line, newest last; a bookie may grant several leases in one run.
func (b *Bookie) leasePath() string { return filepath.Join(b.cfg.DataDir, leaseFile) }

func (b *Bookie) readLeases() []meta.LeaseID {
	data, err := os.ReadFile(b.leasePath())
	if err != nil {
		return nil
	}
	var ids []meta.LeaseID
	for line := range strings.Lines(string(data)) {
		if v, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64); err == nil {
			ids = append(ids, meta.LeaseID(v))
		}
	}
	return ids
}

func (b *Bookie) wasOurLease(id meta.LeaseID) bool {
	for _, l := range b.readLeases() {
		if l == id {
			return true
		}
	}
	return false
}

func (b *Bookie) saveLease(id meta.LeaseID) error {
	ids := append(b.readLeases(), id)
	if len(ids) > 8 {
		ids = ids[len(ids)-8:]
	}
	var sb strings.Builder
	for _, l := range ids {
		fmt.Fprintf(&sb, "%x\n", int64(l))
	}
	tmp := b.leasePath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(sb.String()), 0o644); err != nil {
		return fmt.Errorf("record lease id: %w", err)
	}
	if err := os.Rename(tmp, b.leasePath()); err != nil {
		return fmt.Errorf("record lease id: %w", err)
	}
	return nil
}
