package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// schemaError gives a registry error its wire code: a schema the topic
// cannot take is IncompatibleSchema (final for the client's create);
// anything else is the metadata store's trouble.
func schemaError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, schema.ErrIncompatible), errors.Is(err, schema.ErrInvalidSchema),
		errors.Is(err, schema.ErrInvalidStrategy):
		return fmt.Errorf("%w: %v", wire.ErrIncompatibleSchema, err)
	case errors.Is(err, schema.ErrNotFound):
		return fmt.Errorf("%w: %v", wire.ErrTopicNotFound, err)
	case errors.As(err, new(*wire.ServerError)):
		return err
	default:
		return fmt.Errorf("%w: schema registry: %v", wire.ErrMetadata, err)
	}
}

// The schema policy of a topic is its effective compatibility strategy,
// with Pulsar's defaults for auto-update (on) and validation enforcement
// (off): schema.DefaultPolicy.

// producerSchema registers (or finds) the schema a producer announces and
// returns its version bytes for PRODUCER_SUCCESS; nil for no schema.
func (s *Service) producerSchema(ctx context.Context, t *Topic, eff global.Effective, announced *pb.Schema) ([]byte, error) {
	p := schema.DefaultPolicy(eff.SchemaCompatibilityStrategy)
	p.ValidationEnforced = eff.SchemaValidationEnforced
	v, err := s.schemas.ForProducer(ctx, t.Name(), schema.FromProto(announced), p)
	if err != nil {
		return nil, schemaError(err)
	}
	return schema.EncodeVersion(v), nil
}

// consumerSchema checks the schema a consumer announces. An idle topic (no
// producers, no consumers, no entries) takes it as its schema, as Pulsar
// does.
func (s *Service) consumerSchema(ctx context.Context, t *Topic, eff global.Effective, announced *pb.Schema) error {
	p := schema.DefaultPolicy(eff.SchemaCompatibilityStrategy)
	return schemaError(s.schemas.ForConsumer(ctx, t.Name(), schema.FromProto(announced), p, t.idle()))
}

func (c *conn) handleGetSchema(req *pb.CommandGetSchema) {
	resp := pb.CommandGetSchemaResponse_builder{RequestId: ptr(req.GetRequestId())}
	var info schema.Info
	var v schema.Version
	t, err := parseTopic(req.GetTopic())
	if err == nil {
		err = c.authorize(auth.ActionLookup, t) // a producer's or a consumer's
	}
	if err == nil {
		info, v, err = c.srv.topics.Schema(c.ctx, t, req.GetSchemaVersion())
	}
	if err != nil {
		code, msg := wire.ToWire(err)
		resp.ErrorCode, resp.ErrorMessage = &code, &msg
	} else {
		name, _ := schema.Name(req.GetTopic())
		resp.Schema = schema.ToProto(name, info)
		resp.SchemaVersion = schema.EncodeVersion(v)
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: resp.Build()}.Build())
}

func (c *conn) handleGetOrCreateSchema(req *pb.CommandGetOrCreateSchema) {
	resp := pb.CommandGetOrCreateSchemaResponse_builder{RequestId: ptr(req.GetRequestId())}
	var v schema.Version
	t, err := parseTopic(req.GetTopic())
	if err == nil {
		// Registering a schema decides what producers may send: the
		// producer's permission, as on Pulsar.
		err = c.authorize(auth.ActionProduce, t)
	}
	if err == nil {
		v, err = c.srv.topics.GetOrCreateSchema(c.ctx, t, req.GetSchema())
	}
	if err != nil {
		code, msg := wire.ToWire(err)
		resp.ErrorCode, resp.ErrorMessage = &code, &msg
	} else {
		resp.SchemaVersion = schema.EncodeVersion(v)
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE.Enum(),
		GetOrCreateSchemaResponse: resp.Build()}.Build())
}

// Schema implements Topics: the schema of t at the version encoded in
// version, or the latest when version is empty.
func (s *Service) Schema(ctx context.Context, t topology.TopicName, version []byte) (schema.Info, schema.Version, error) {
	v, err := schema.DecodeVersion(version)
	if err != nil {
		return schema.Info{}, 0, fmt.Errorf("%w: %v", wire.ErrIncompatibleSchema, err)
	}
	if v == schema.NoVersion {
		info, v, err := s.schemas.Latest(ctx, t.String())
		return info, v, schemaError(err)
	}
	// Only the versions since the last deletion are served: a deleted
	// schema is gone for readers too, as on Pulsar.
	live, err := s.schemas.All(ctx, t.String())
	if err != nil {
		return schema.Info{}, 0, schemaError(err)
	}
	for _, e := range live {
		if e.Version == v {
			return e.Info, v, nil
		}
	}
	return schema.Info{}, 0, fmt.Errorf("%w: schema version %d of %s not found", wire.ErrTopicNotFound, v, t)
}

// GetOrCreateSchema implements Topics: the version of the given schema,
// registered if it is new and compatible under the topic's strategy.
func (s *Service) GetOrCreateSchema(ctx context.Context, t topology.TopicName, announced *pb.Schema) (schema.Version, error) {
	eff, err := s.resolve(t)
	if err != nil {
		return 0, err
	}
	v, err := s.schemas.GetOrCreate(ctx, t.String(), schema.FromProto(announced), eff.SchemaCompatibilityStrategy)
	return v, schemaError(err)
}
