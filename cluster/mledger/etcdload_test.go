package mledger

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/testkit"
)

var (
	flagEtcdLoad        = flag.Bool("mledger.etcdload", false, "measure the etcd write load of 1,000 active durable cursors against an embedded etcd")
	flagEtcdLoadCursors = flag.Int("mledger.etcdload.cursors", 1000, "cursors for -mledger.etcdload")
	flagEtcdLoadFor     = flag.Duration("mledger.etcdload.for", 5*time.Second, "duration of each -mledger.etcdload scenario")
)

// TestEtcdCursorLoad measures what persisting cursor state in etcd costs:
// 1,000 cursors acking as fast as they can, with their state written at
// most once per CursorPersistInterval. It reports writes/s and bytes/s as
// seen by the store client, and the worst lag between an ack and its
// write (whether etcd keeps up). Bookies are in memory: only etcd is
// measured.
//
//	go test ./cluster/mledger -run TestEtcdCursorLoad -mledger.etcdload -v
func TestEtcdCursorLoad(t *testing.T) {
	if !*flagEtcdLoad {
		t.Skip("behind -mledger.etcdload")
	}
	// etcd's default timing, as in production: its load is what is measured.
	ecfg := meta.DefaultEmbedConfig()
	ecfg.Logger = testLogger(t)
	emb := metatest.Start(t, ecfg)
	cs := &countingStore{Store: metatest.Dial(t, emb.Endpoints())}
	e := newEnvOn(t, cs, 3)
	for _, sc := range []struct {
		interval time.Duration
		holes    bool
	}{
		{100 * time.Millisecond, false},
		{100 * time.Millisecond, true},
		{time.Second, false},
		{time.Second, true},
	} {
		t.Run(fmt.Sprintf("interval=%v/holes=%v", sc.interval, sc.holes), func(t *testing.T) {
			cfg := testConfig()
			cfg.CursorPersistInterval = sc.interval
			cfg.MetaTimeout = time.Minute
			f := e.factory(fmt.Sprintf("load-%v-%v", sc.interval, sc.holes), cfg)
			ml := e.open(f, fmt.Sprintf("load-%v-%v", sc.interval, sc.holes))
			var ps []Position
			futs := make([]*AppendFuture, 0, 20000)
			for i := range 20000 {
				fut, err := ml.AppendAsync(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				futs = append(futs, fut)
			}
			for _, fut := range futs {
				p, err := fut.Result()
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			cursors := make([]*Cursor, *flagEtcdLoadCursors)
			for i := range cursors {
				c, err := ml.OpenCursor(t.Context(), fmt.Sprintf("sub-%04d", i), Earliest)
				if err != nil {
					t.Fatal(err)
				}
				cursors[i] = c
			}
			w0, b0 := cs.writes.Load(), cs.bytes.Load()
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), *flagEtcdLoadFor)
			defer cancel()
			// Two workers ack round-robin over the cursors: every cursor
			// changes many times per interval.
			var wg sync.WaitGroup
			acks := make([]int, 2)
			for w := range 2 {
				wg.Go(func() {
					k := make([]int, len(cursors))
					for ctx.Err() == nil {
						for i := w; i < len(cursors); i += 2 {
							j := k[i]
							if j >= len(ps) {
								continue
							}
							if sc.holes && j%10 == 9 {
								j++ // leave a hole every ten entries
							}
							if err := cursors[i].Ack(ps[j]); err != nil {
								t.Error(err)
								return
							}
							k[i] = j + 1
							acks[w]++
						}
					}
				})
			}
			wg.Wait()
			// Wait for the last changes to be written: the lag of the
			// slowest cursor.
			testkit.WaitFor(t, "every cursor written", func() bool {
				for _, c := range cursors {
					c.mu.Lock()
					dirty := c.dirty
					c.mu.Unlock()
					if dirty {
						return false
					}
				}
				return true
			})
			elapsed := time.Since(start)
			writes, bytes := cs.writes.Load()-w0, cs.bytes.Load()-b0
			ranges := 0
			for _, c := range cursors {
				ranges += c.AckedRanges()
			}
			t.Logf("%d cursors, persist interval %v, holes %v: %d acks, %d writes in %v = %.0f writes/s, %.0f KiB/s, %.0f B/write, drain after the acks stopped %v, mean ranges/cursor %.1f",
				len(cursors), sc.interval, sc.holes, acks[0]+acks[1], writes, elapsed.Round(time.Millisecond),
				float64(writes)/elapsed.Seconds(), float64(bytes)/1024/elapsed.Seconds(), float64(bytes)/float64(max(writes, 1)),
				(elapsed - *flagEtcdLoadFor).Round(time.Millisecond), float64(ranges)/float64(len(cursors)))
			if err := ml.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
