package node

import (
	"context"
	"log/slog"

	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/replicator"
	"github.com/meridian-mq/meridian/replicator/remote"
)

// registrySchemas is the replicator's view of a region's schema registry
// (replicator.SchemaSource): it reads, never writes.
type registrySchemas struct {
	reg *schema.Registry
}

var _ replicator.SchemaSource = registrySchemas{}

// newRegistrySchemas reads the schemas of region in store.
func newRegistrySchemas(store meta.Store, region string, log *slog.Logger) (registrySchemas, error) {
	cfg := schema.DefaultConfig()
	cfg.Logger = log
	reg, err := schema.New(store, region, cfg)
	return registrySchemas{reg: reg}, err
}

// Schemas implements replicator.SchemaSource: the topic's current schemas
// (those since its last schema deletion), oldest first.
func (r registrySchemas) Schemas(ctx context.Context, topic string) ([]remote.SourceSchema, error) {
	entries, err := r.reg.All(ctx, topic)
	if err != nil {
		return nil, err
	}
	name, err := schema.Name(topic)
	if err != nil {
		return nil, err
	}
	out := make([]remote.SourceSchema, 0, len(entries))
	for _, e := range entries {
		out = append(out, remote.SourceSchema{Version: schema.EncodeVersion(e.Version), Schema: schema.ToProto(name, e.Info)})
	}
	return out, nil
}
