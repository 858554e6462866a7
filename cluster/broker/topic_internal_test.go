package broker

import (
	"testing"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// TestRetentionOf: Pulsar's retention policy in the managed ledger's
// terms: -1 keeps forever (or without a size limit), 0 keeps nothing
// once consumed.
func TestRetentionOf(t *testing.T) {
	for _, tc := range []struct {
		minutes, mb int
		keep        time.Duration
		size        int64
	}{
		{-1, -1, -1, -1},
		{0, 0, 0, 0},
		{60, -1, time.Hour, -1},
		{-1, 100, -1, 100 << 20},
	} {
		eff := global.Effective{Retention: global.RetentionPolicies{RetentionTimeInMinutes: tc.minutes, RetentionSizeInMB: int64(tc.mb)}}
		if keep, size := retentionOf(eff); keep != tc.keep || size != tc.size {
			t.Errorf("retentionOf(%d min, %d MB) = %v, %d; want %v, %d", tc.minutes, tc.mb, keep, size, tc.keep, tc.size)
		}
	}
}
