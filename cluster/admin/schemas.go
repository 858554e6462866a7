package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// The bodies of /admin/v2/schemas, as pulsaradmin's utils spell them.
type (
	getSchemaResponse struct {
		Version    int64             `json:"version"`
		Type       string            `json:"type"`
		Timestamp  int64             `json:"timestamp"`
		Data       string            `json:"data"`
		Properties map[string]string `json:"properties"`
	}
	getAllSchemasResponse struct {
		Schemas []getSchemaResponse `json:"getSchemaResponses"`
	}
	postSchemaPayload struct {
		Type       string            `json:"type"`
		Schema     string            `json:"schema"`
		Properties map[string]string `json:"properties"`
	}
	schemaVersion struct {
		Version int64 `json:"version"`
	}
	isCompatibility struct {
		Compatibility bool                               `json:"compatibility"`
		Strategy      global.SchemaCompatibilityStrategy `json:"schemaCompatibilityStrategy"`
	}
)

func (h *handler) routeSchemas() {
	const p = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
	h.handleSchema("GET "+p+"/schema", opLookup, h.getSchema)
	h.handleSchema("GET "+p+"/schema/{version}", opLookup, h.getSchemaVersion)
	h.handleSchema("GET "+p+"/schemas", opLookup, h.getAllSchemas)
	h.handleSchema("POST "+p+"/schema", opProduce, h.postSchema)
	h.handleSchema("DELETE "+p+"/schema", opTenantAdmin, h.deleteSchema)
	h.handleSchema("POST "+p+"/compatibility", opLookup, h.testCompatibility)
	h.handleSchema("POST "+p+"/version", opLookup, h.schemaVersionOf)
}

// handleSchema registers a schema route; the schemas path names persistent
// topics without their domain, as Pulsar's does.
func (h *handler) handleSchema(pattern string, op operation, fn topicRoute) {
	h.register(pattern, op, opNone, func(w http.ResponseWriter, r *http.Request) error {
		t, err := topicFromPath(topology.Persistent, r)
		if err != nil {
			return err
		}
		if err := h.authorize(r, op, t.Tenant, t); err != nil {
			return err
		}
		if err := h.namespaceExists(t.Tenant, t.Namespace); err != nil {
			return err
		}
		return fn(w, r, t)
	})
}

func schemaResponse(e schema.Entry) getSchemaResponse {
	props := e.Info.Properties
	if props == nil {
		props = map[string]string{}
	}
	return getSchemaResponse{Version: int64(e.Version), Type: e.Info.Type.String(), Timestamp: e.Added.UnixMilli(),
		Data: string(e.Info.Data), Properties: props}
}

func (h *handler) getSchema(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	all, err := h.svc.Schemas().All(r.Context(), t.String())
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return fmt.Errorf("%w: topic %s has no schema", schema.ErrNotFound, t)
	}
	return ok(w, schemaResponse(all[len(all)-1]))
}

func (h *handler) getSchemaVersion(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	v, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("%w: schema version %q is not a non-negative number", ErrBadRequest, r.PathValue("version"))
	}
	info, err := h.svc.Schemas().Get(r.Context(), t.String(), schema.Version(v))
	if err != nil {
		return err
	}
	e := schema.Entry{Version: schema.Version(v), Info: info}
	// The version's timestamp is kept with its entry; versions before a
	// deletion are not listed and answer 0, as Pulsar answers for versions
	// it cannot date.
	if all, err := h.svc.Schemas().All(r.Context(), t.String()); err == nil {
		for _, a := range all {
			if a.Version == e.Version {
				e.Added = a.Added
			}
		}
	}
	res := schemaResponse(e)
	if e.Added.IsZero() {
		res.Timestamp = 0
	}
	return ok(w, res)
}

func (h *handler) getAllSchemas(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	all, err := h.svc.Schemas().All(r.Context(), t.String())
	if err != nil {
		return err
	}
	res := getAllSchemasResponse{Schemas: []getSchemaResponse{}}
	for _, e := range all {
		res.Schemas = append(res.Schemas, schemaResponse(e))
	}
	return ok(w, res)
}

// schemaInfo reads a PostSchemaPayload body.
func (h *handler) schemaInfo(r *http.Request) (schema.Info, error) {
	var p postSchemaPayload
	if err := h.mustReadJSON(r, &p); err != nil {
		return schema.Info{}, err
	}
	typ, err := schema.ParseType(p.Type)
	if err != nil {
		return schema.Info{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return schema.Info{Type: typ, Data: []byte(p.Schema), Properties: p.Properties}, nil
}

// strategy is t's effective schema compatibility strategy.
func (h *handler) strategy(t topology.TopicName) (global.SchemaCompatibilityStrategy, error) {
	eff, err := h.svc.Policies().Resolve(t, h.cfg.PolicyDefaults)
	if err != nil {
		return "", err
	}
	return eff.SchemaCompatibilityStrategy, nil
}

// postSchema uploads a schema: it is added as a new version if it is new
// and compatible (409 when it is not), and its version is returned.
func (h *handler) postSchema(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	info, err := h.schemaInfo(r)
	if err != nil {
		return err
	}
	s, err := h.strategy(t)
	if err != nil {
		return err
	}
	v, err := h.svc.Schemas().GetOrCreate(r.Context(), t.String(), info, s)
	if err != nil {
		return err
	}
	return ok(w, map[string]schemaVersion{"version": {Version: int64(v)}})
}

func (h *handler) deleteSchema(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	if _, err := queryBool(r, "force"); err != nil {
		return err
	}
	v, err := h.svc.Schemas().Delete(r.Context(), t.String())
	if err != nil {
		return err
	}
	return ok(w, map[string]schemaVersion{"version": {Version: int64(v)}})
}

// testCompatibility answers whether a schema could be added, without
// adding it: an incompatible schema is a 200 with compatibility false.
func (h *handler) testCompatibility(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	info, err := h.schemaInfo(r)
	if err != nil {
		return err
	}
	s, err := h.strategy(t)
	if err != nil {
		return err
	}
	err = h.svc.Schemas().Compatible(r.Context(), t.String(), info, s)
	if err != nil && !errors.Is(err, schema.ErrIncompatible) {
		return err
	}
	return ok(w, isCompatibility{Compatibility: err == nil, Strategy: s})
}

// schemaVersionOf answers the version a schema was registered as (404 when
// it is not one of the topic's current schemas).
func (h *handler) schemaVersionOf(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	info, err := h.schemaInfo(r)
	if err != nil {
		return err
	}
	v, found, err := h.svc.Schemas().VersionOf(r.Context(), t.String(), info)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: the schema is not registered on %s", schema.ErrNotFound, t)
	}
	return ok(w, schemaVersion{Version: int64(v)})
}
