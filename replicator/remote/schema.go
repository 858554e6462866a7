package remote

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// SourceSchema is one version of the source topic's schema: the version as
// the source stamps it in schema_version, and the schema.
type SourceSchema struct {
	Version []byte
	Schema  *pb.Schema
}

// schemaMap maps a source schema_version to the remote topic's version of
// the same schema. nil means the schemas are not replicated: schema_version
// goes out as stored.
type schemaMap map[string][]byte

// registerSchemas makes each source schema a schema of the remote topic
// (GET_OR_CREATE_SCHEMA, as Pulsar's replicator producer registers the
// schema of each message it sends, under the remote's compatibility
// rules), oldest first, and returns the mapping of their versions. A
// version number means a schema only in its own region's registry, so a
// replicated message's schema_version must be rewritten to the remote's.
func (s *session) registerSchemas(ctx context.Context, topic string, schemas []SourceSchema) (schemaMap, error) {
	m := make(schemaMap, len(schemas))
	for _, sc := range schemas {
		v, err := s.getOrCreateSchema(ctx, topic, sc.Schema)
		if err != nil {
			return nil, err
		}
		m[string(sc.Version)] = v
	}
	return m, nil
}

// getOrCreateSchema registers sc on topic and returns its version there.
func (s *session) getOrCreateSchema(ctx context.Context, topic string, sc *pb.Schema) ([]byte, error) {
	id := s.requestID()
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(),
		GetOrCreateSchema: pb.CommandGetOrCreateSchema_builder{
			RequestId: proto.Uint64(id), Topic: proto.String(topic), Schema: sc,
		}.Build()}.Build()
	var version []byte
	err := s.exchange(ctx, cmd, func(reply *pb.BaseCommand) (bool, error) {
		if reply.GetType() != pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE {
			return false, nil
		}
		r := reply.GetGetOrCreateSchemaResponse()
		if r.GetRequestId() != id {
			return false, nil
		}
		if r.HasErrorCode() {
			return true, &wire.ServerError{Code: r.GetErrorCode(), Message: r.GetErrorMessage()}
		}
		version = r.GetSchemaVersion()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: register schema %s on %s at %s: %w", ErrSchema, sc.GetType(), topic, s.ep, err)
	}
	return version, nil
}

// remoteVersion is the remote's schema_version for source version v.
func (m schemaMap) remoteVersion(v []byte) ([]byte, error) {
	rv, ok := m[string(v)]
	if !ok {
		return nil, fmt.Errorf("%w: source schema version %x was not registered when the producer opened", ErrSchema, v)
	}
	return rv, nil
}
