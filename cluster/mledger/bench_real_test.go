//go:build realbookies

package mledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

func init() { realBenchWorld = startRealBenchWorld }

// startRealBenchWorld is an embedded etcd and three real bookies serving
// TCP on 127.0.0.1, journaling with fdatasync.
func startRealBenchWorld(b *testing.B) *benchWorld {
	ecfg := meta.DefaultEmbedConfig()
	ecfg.Logger = testLogger(b)
	emb := metatest.Start(b, ecfg)
	store := metatest.Dial(b, emb.Endpoints())
	for i := range 3 {
		cfg := bookie.DefaultConfig()
		cfg.Region, cfg.ID, cfg.DataDir = region, fmt.Sprintf("bk%d", i), b.TempDir()
		cfg.ListenAddr = "127.0.0.1:0"
		cfg.Meta = store
		cfg.GCInterval = 0
		cfg.Logger = testLogger(b)
		bk, err := bookie.Start(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bk.Close() })
	}
	res, err := ledger.NewBKProto(store, region, bkproto.DefaultConnConfig(nil))
	if err != nil {
		b.Fatal(err)
	}
	c, err := ledger.New(benchLedgerConfig(), store, res, testLogger(b), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Close()
		res.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(c.Directory().Snapshot()) < 3 {
		select {
		case <-c.Directory().Changed():
		case <-ctx.Done():
			b.Fatal("bookies did not register")
		}
	}
	return &benchWorld{store: store, client: c}
}
