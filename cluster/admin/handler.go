package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/topology"
)

// handler serves the admin API of one broker.
type handler struct {
	cfg   Config
	svc   *broker.Service
	lm    *loadmgr.Manager // svc's load manager: brokers, bundles, leader
	log   *slog.Logger
	mux   *http.ServeMux
	rates *rates
	dyn   dynamicConfig // see brokerconfig.go
	// routes are the registered patterns and what each checks the role
	// for, in registration order (a test walks them).
	routes []routeOp
}

// routeOp is a registered pattern and the operation its role is checked
// for; opNone is a route open to every authenticated role.
type routeOp struct {
	pattern string
	op      operation
}

// New returns the admin API of the broker whose topic service is svc,
// logging to log (required).
func New(cfg Config, svc *broker.Service, log *slog.Logger) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, fmt.Errorf("%w: a broker service is required", ErrInvalidConfig)
	}
	if log == nil {
		return nil, fmt.Errorf("%w: a logger is required", ErrInvalidConfig)
	}
	h := &handler{cfg: cfg, svc: svc, lm: svc.LoadManager(), log: log.With("component", "admin"), mux: http.NewServeMux(),
		rates: newRates(cfg.MaxRateSamples)}
	h.routeLookups()
	h.routeSchemas()
	h.routeTopics()
	h.routeTopicPolicies()
	h.routeNamespaces()
	h.routeActiveRegion()
	h.routeTopicActiveRegion()
	h.routeAutoFailover()
	h.routeFences()
	h.routeTenants()
	h.routeClusters()
	h.routeBrokers()
	h.routeBrokerConfig()
	h.routeBrokerStats()
	h.routeLoadBalance()
	h.routeStoredPolicies()
	h.routeReplicatorDispatchRate()
	h.routeRefusedPolicies()
	h.routeBookies()
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, fmt.Errorf("%w: no endpoint %s %s", ErrNotFound, r.Method, r.URL.Path))
	})
	return h, nil
}

// roleKey carries the authenticated role in a request's context.
type roleKey struct{}

func roleOf(ctx context.Context) string {
	role, _ := ctx.Value(roleKey{}).(string)
	return role
}

// ServeHTTP authenticates the request, then routes it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-h.svc.Policies().Ready():
	default:
		h.fail(w, r, fmt.Errorf("%w: the global configuration is not loaded yet; retry", ErrNotReady))
		return
	}
	role, err := h.authenticate(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), roleKey{}, role)))
}

// authenticate returns the request's role from its Authorization header
// or TLS client certificate.
func (h *handler) authenticate(r *http.Request) (string, error) {
	a := h.cfg.Authenticator
	if a == nil {
		return "", nil
	}
	var (
		method string
		data   []byte
	)
	hdr := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, cred, _ := strings.Cut(hdr, " ")
	switch {
	case hdr == "":
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			method = auth.MethodTLS
		}
	case strings.EqualFold(scheme, "Bearer"):
		method, data = auth.MethodToken, []byte(strings.TrimSpace(cred))
	case strings.EqualFold(scheme, "Basic"):
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return "", fmt.Errorf("%w: basic credentials are not base64", auth.ErrUnauthenticated)
		}
		method, data = auth.MethodBasic, b
	default:
		return "", fmt.Errorf("%w: Authorization scheme %q (use Bearer or Basic)", auth.ErrUnauthenticated, scheme)
	}
	return a.Authenticate(r.Context(), method, auth.Credentials{Data: data, TLS: r.TLS})
}

// operation is what a route asks the Authorizer for.
type operation int

const (
	opNone        operation = iota // open to every authenticated role
	opSuperUser                    // clusters, tenants, brokers
	opTenantAdmin                  // namespaces and topic administration
	opLookup                       // lookup, partitioned metadata, reading schemas
	opProduce                      // uploading schemas
	opConsume                      // subscription operations consumers may do
)

// authorize checks the request's role for op on tenant (and topic, for the
// topic operations). Superusers may do anything; a tenant admin may do
// every operation on the tenant's topics.
func (h *handler) authorize(r *http.Request, op operation, tenant string, topic topology.TopicName) error {
	a := h.cfg.Authorizer
	if a == nil || op == opNone {
		return nil
	}
	ctx, role := r.Context(), roleOf(r.Context())
	if a.IsSuperUser(role) || (role != "" && slices.Contains(h.cfg.SuperUserRoles, role)) {
		return nil
	}
	var err error
	switch op {
	case opSuperUser:
		err = fmt.Errorf("role %q is not a superuser", role)
	default:
		if _, found := h.svc.Policies().Tenant(tenant); tenant != "" && !found {
			// Pulsar reads the tenant before it weighs the role's rights on
			// it (validateAdminAccessForTenant): a tenant that does not
			// exist is a 404, whoever asks.
			return pulsarReason{ErrNotFound, "Tenant does not exist"}
		}
		err = a.CanAdminTenant(ctx, role, tenant)
		if err == nil || op == opTenantAdmin {
			break
		}
		switch op {
		case opLookup:
			err = a.CanLookup(ctx, role, topic)
		case opProduce:
			err = a.CanProduce(ctx, role, topic)
		case opConsume:
			err = a.CanConsume(ctx, role, topic)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	return nil
}

// route is one endpoint: it writes its answer, or returns the error that
// fail turns into a status.
type route func(w http.ResponseWriter, r *http.Request) error

// handle registers pattern with op checked against the {tenant} path
// value, if any.
func (h *handler) handle(pattern string, op operation, fn route) { h.register(pattern, op, op, fn) }

// register serves pattern with fn once check passes against the {tenant}
// path value; op is what the route checks the role for, recorded in
// routes. A route that checks its topic's op itself, after parsing the
// topic (handleTopic, handleSchema), checks opNone first.
func (h *handler) register(pattern string, op, check operation, fn route) {
	h.routes = append(h.routes, routeOp{pattern, op})
	h.serve(pattern, check, fn)
}

// serve is register without the record in routes, for a pattern that
// serves several recorded ones (handleOneBookie).
func (h *handler) serve(pattern string, check operation, fn route) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		err := h.authorize(r, check, r.PathValue("tenant"), topology.TopicName{})
		if err == nil {
			err = fn(w, r)
		}
		if err != nil {
			h.fail(w, r, err)
		}
	})
}

// topicRoute is an endpoint on one topic.
type topicRoute func(w http.ResponseWriter, r *http.Request, t topology.TopicName) error

// domains are the topic domains of the REST paths.
var domains = []topology.Domain{topology.Persistent, topology.NonPersistent}

// handleTopic registers method prefix/<domain>/{tenant}/{namespace}/{topic}suffix
// for both domains.
func (h *handler) handleTopic(method, prefix, suffix string, op operation, fn topicRoute) {
	for _, d := range domains {
		pattern := method + " " + prefix + "/" + string(d) + "/{tenant}/{namespace}/{topic}" + suffix
		h.register(pattern, op, opNone, func(w http.ResponseWriter, r *http.Request) error {
			t, err := topicFromPath(d, r)
			if err != nil {
				return err
			}
			if err := h.authorize(r, op, t.Tenant, t); err != nil {
				return err
			}
			return fn(w, r, t)
		})
	}
}

func topicFromPath(d topology.Domain, r *http.Request) (topology.TopicName, error) {
	return topology.ParseTopicName(string(d) + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
}

// redirect answers 307 to the broker that serves a topic.
type redirect struct{ url string }

func (e *redirect) Error() string { return "served by " + e.url }

// reason is Pulsar's error body.
type reason struct {
	Reason string `json:"reason"`
}

// fail writes err as Pulsar does: its status and {"reason": ...}.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var rd *redirect
	if errors.As(err, &rd) {
		http.Redirect(w, r, rd.url, http.StatusTemporaryRedirect)
		return
	}
	status := statusOf(err)
	if status >= 500 {
		h.log.Warn("admin request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, reason{Reason: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"reason":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func ok(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readBody returns the request body, at most MaxBodyBytes.
func (h *handler) readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
	if int64(len(b)) > h.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrBadRequest, h.cfg.MaxBodyBytes)
	}
	return b, nil
}

// readJSON decodes the body into v; an empty body leaves v alone and
// reports false. Anything but one JSON value is ErrBadRequest.
func (h *handler) readJSON(r *http.Request, v any) (bool, error) {
	b, err := h.readBody(r)
	if err != nil {
		return false, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return false, nil
	}
	if err := decodeJSON(b, v); err != nil {
		return false, err
	}
	return true, nil
}

func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: malformed JSON body: data after the value", ErrBadRequest)
	}
	return nil
}

// mustReadJSON is readJSON for bodies that are required.
func (h *handler) mustReadJSON(r *http.Request, v any) error {
	present, err := h.readJSON(r, v)
	if err == nil && !present {
		err = fmt.Errorf("%w: a JSON body is required", ErrBadRequest)
	}
	return err
}

// queryBool reads a boolean query parameter, false when absent.
func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	switch strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fmt.Errorf("%w: query parameter %s=%q is not true or false", ErrBadRequest, name, v)
}

// Routes returns the patterns an admin handler (from New) serves and
// what each checks the role for: "none" (open to every authenticated role),
// "superuser", "tenant-admin", "lookup", "produce" or "consume".
// Tests walk it: the authorization walk, the fuzzer, and the CLI's check
// that every route has a verb.
func Routes(h http.Handler) map[string]string {
	names := map[operation]string{opNone: "none", opSuperUser: "superuser", opTenantAdmin: "tenant-admin",
		opLookup: "lookup", opProduce: "produce", opConsume: "consume"}
	out := map[string]string{}
	for _, r := range h.(*handler).routes {
		out[r.pattern] = names[r.op]
	}
	return out
}
