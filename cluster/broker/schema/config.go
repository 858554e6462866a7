package schema

import (
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Registry.
type Config struct {
	// MaxSchemaBytes bounds a schema's data. A version is one etcd value,
	// and etcd refuses requests over 1.5 MiB by default; data is stored
	// base64-encoded (4/3 of its size) next to its properties, so 1 MiB is
	// the most that fits. Pulsar's own limit is its bookie entry size; real
	// Avro definitions are kilobytes. Default 256 KiB; between 1 KiB and
	// 1 MiB.
	MaxSchemaBytes int
	// MaxCreateAttempts bounds how often GetOrCreate re-reads the topic's
	// versions and tries again after another writer created the version it
	// meant to create. Each attempt is one List and one Create. Past it the
	// call fails with ErrConflict. Default 8; between 1 and 100.
	MaxCreateAttempts int
	// RequestTimeout bounds each call to the metadata store, so that a
	// PRODUCER or admin request fails instead of hanging while etcd is
	// unreachable. Default 10s; at least 100ms.
	RequestTimeout time.Duration
	// Now stamps new versions (their timestamp, in Unix milliseconds, as
	// Pulsar's admin API reports it). Default time.Now; the broker hands
	// its clock's.
	Now func() time.Time
	// Logger receives a record for each version added. Nil discards them;
	// the broker hands its own.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		MaxSchemaBytes:    256 << 10,
		MaxCreateAttempts: 8,
		RequestTimeout:    10 * time.Second,
		Now:               time.Now,
	}
}

// Validate reports a field out of bounds.
func (c Config) Validate() error {
	switch {
	case c.MaxSchemaBytes < 1<<10 || c.MaxSchemaBytes > 1<<20:
		return fmt.Errorf("schema: Config.MaxSchemaBytes must be in [1 KiB, 1 MiB], got %d", c.MaxSchemaBytes)
	case c.MaxCreateAttempts < 1 || c.MaxCreateAttempts > 100:
		return fmt.Errorf("schema: Config.MaxCreateAttempts must be in [1, 100], got %d", c.MaxCreateAttempts)
	case c.RequestTimeout < 100*time.Millisecond:
		return fmt.Errorf("schema: Config.RequestTimeout must be at least 100ms, got %v", c.RequestTimeout)
	case c.Now == nil:
		return fmt.Errorf("schema: Config.Now must be set (time.Now)")
	}
	return nil
}
