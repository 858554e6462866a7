package bookie

import (
	"context"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// decommissionLoop follows the operator's state for this bookie
// (bkproto.BookieStateKey, set by `meridian admin bookies decommission`):
// while it says decommissioning, the bookie refuses writers' adds, as a
// full disk does, so that writers move their ensembles elsewhere and no new
// ledger is placed here (its registration says readOnly), while
// auto-recovery copies what it holds to other bookies. Recovery adds are
// still taken: a ledger recovery writes the entries it found back to the
// ensemble it closes, this bookie included. Clearing the state makes the
// bookie writable again (unless its disk is full).
func (b *Bookie) decommissionLoop(ctx context.Context) {
	key := bkproto.BookieStateKey(b.cfg.Region, b.cfg.ID)
	set := func(kv *meta.KV) {
		draining := false
		if kv != nil {
			st, err := bkproto.ParseBookieState(kv.Value)
			draining = err == nil && st.State == bkproto.StateDecommissioning
		}
		if b.decommissioning.Swap(draining) != draining {
			b.log.Info("decommission state changed", "decommissioning", draining)
			b.notifyRegistration()
		}
	}
	meta.ListWatch(ctx, b.cfg.Meta, key, b.cfg.LeaseTTL/4, b.log,
		func(kvs []meta.KV) {
			var found *meta.KV
			for i := range kvs {
				if kvs[i].Key == key {
					found = &kvs[i]
				}
			}
			set(found)
		},
		func(evs []meta.Event) {
			for _, ev := range evs {
				if ev.KV.Key != key {
					continue
				}
				if ev.Type == meta.EventDelete {
					set(nil)
				} else {
					set(&ev.KV)
				}
			}
		})
}
