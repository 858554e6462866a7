package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

func (h *handler) routeNamespaces() {
	const p = "/admin/v2/namespaces/{tenant}"
	const ns = p + "/{namespace}"
	h.handle("GET "+p, opTenantAdmin, h.listNamespaces)
	h.handle("PUT "+ns, opTenantAdmin, h.createNamespace)
	h.handle("GET "+ns, opTenantAdmin, h.getPolicies)
	h.handle("DELETE "+ns, opTenantAdmin, h.deleteNamespace)
	h.handle("GET "+ns+"/topics", opTenantAdmin, h.namespaceTopics)
	h.handle("GET "+ns+"/bundles", opTenantAdmin, h.policy(func(p global.Policies) any { return p.Bundles }))
	h.handle("PUT "+ns+"/unload", opTenantAdmin, h.unloadNamespace)
	h.handle("PUT "+ns+"/{bundle}/unload", opTenantAdmin, h.unloadBundle) // bundles.go

	h.handle("GET "+ns+"/replication", opTenantAdmin, h.policy(func(p global.Policies) any { return p.ReplicationClusters }))
	h.handle("POST "+ns+"/replication", opTenantAdmin, setPolicy(h, func(p *global.Policies, v []string) error {
		if len(v) == 0 {
			return fmt.Errorf("%w: the replication clusters must not be empty", ErrPrecondition)
		}
		p.ReplicationClusters = v
		return nil
	}))

	h.handle("GET "+ns+"/retention", opTenantAdmin, h.policy(func(p global.Policies) any { return p.RetentionPolicies }))
	h.handle("POST "+ns+"/retention", opTenantAdmin, setPolicy(h, func(p *global.Policies, v global.RetentionPolicies) error {
		p.RetentionPolicies = &v
		return nil
	}))
	h.handle("DELETE "+ns+"/retention", opTenantAdmin, h.clearPolicy(func(p *global.Policies) { p.RetentionPolicies = nil }))

	h.handle("GET "+ns+"/backlogQuotaMap", opTenantAdmin, h.policy(func(p global.Policies) any { return p.BacklogQuotaMap }))
	h.handle("POST "+ns+"/backlogQuota", opTenantAdmin, h.setBacklogQuota)
	h.handle("DELETE "+ns+"/backlogQuota", opTenantAdmin, h.removeBacklogQuota)

	h.handle("GET "+ns+"/messageTTL", opTenantAdmin, h.policy(func(p global.Policies) any { return p.MessageTTLInSeconds }))
	h.handle("POST "+ns+"/messageTTL", opTenantAdmin, setPolicy(h, func(p *global.Policies, v int) error {
		p.MessageTTLInSeconds = &v
		return nil
	}))
	h.handle("DELETE "+ns+"/messageTTL", opTenantAdmin, h.clearPolicy(func(p *global.Policies) { p.MessageTTLInSeconds = nil }))

	h.handle("GET "+ns+"/deduplication", opTenantAdmin, h.policy(func(p global.Policies) any { return p.DeduplicationEnabled }))
	h.handle("POST "+ns+"/deduplication", opTenantAdmin, setPolicy(h, func(p *global.Policies, v bool) error {
		p.DeduplicationEnabled = &v
		return nil
	}))
	h.handle("DELETE "+ns+"/deduplication", opTenantAdmin, h.clearPolicy(func(p *global.Policies) { p.DeduplicationEnabled = nil }))

	h.handle("GET "+ns+"/autoTopicCreation", opTenantAdmin, h.policy(func(p global.Policies) any { return p.AutoTopicCreationOverride }))
	h.handle("POST "+ns+"/autoTopicCreation", opTenantAdmin, setPolicy(h, func(p *global.Policies, v global.AutoTopicCreation) error {
		if err := checkAutoTopicCreation(v, h.cfg.PolicyDefaults); err != nil {
			return err
		}
		p.AutoTopicCreationOverride = &v
		return nil
	}))
	h.handle("DELETE "+ns+"/autoTopicCreation", opTenantAdmin, h.clearPolicy(func(p *global.Policies) { p.AutoTopicCreationOverride = nil }))

	h.handle("GET "+ns+"/schemaCompatibilityStrategy", opTenantAdmin, h.policy(func(p global.Policies) any { return p.SchemaCompatibilityStrategy }))
	h.handle("PUT "+ns+"/schemaCompatibilityStrategy", opTenantAdmin, h.setSchemaStrategy)

	h.handle("GET "+ns+"/permissions", opTenantAdmin, h.policy(func(p global.Policies) any { return p.AuthPolicies.NamespaceAuth }))
	h.handle("POST "+ns+"/permissions/{role}", opTenantAdmin, h.grantNamespacePermission)
	h.handle("DELETE "+ns+"/permissions/{role}", opTenantAdmin, h.revokeNamespacePermission)

	// Subscription permissions (auth_policies.subscription_auth_roles):
	// pulsaradmin revokes with DELETE permissions/{subscription}/{role}.
	h.handle("GET "+ns+"/permissions/subscription", opTenantAdmin, h.policy(func(p global.Policies) any { return p.AuthPolicies.SubscriptionAuthRoles }))
	h.handle("POST "+ns+"/permissions/subscription/{subscription}", opTenantAdmin, h.grantSubscriptionPermission)
	h.handle("DELETE "+ns+"/permissions/{subscription}/{role}", opTenantAdmin, h.revokeSubscriptionPermission)
}

// updateNamespace applies mutate to tenant/ns's policies in the global
// store (validated there as a whole: a refused update changes nothing),
// waits for this broker's cache to show it, and answers 204.
func (h *handler) updateNamespace(w http.ResponseWriter, r *http.Request, tenant, ns string, mutate func(*global.Policies) error) error {
	p, rc, err := h.svc.Global().UpdateNamespace(r.Context(), tenant, ns, mutate)
	if errors.Is(err, global.ErrNotFound) {
		if _, found := h.svc.Policies().Tenant(tenant); !found {
			return pulsarReason{ErrNotFound, "Tenant does not exist"}
		}
		return pulsarReason{ErrNotFound, "Namespace does not exist"}
	}
	if err != nil {
		return err
	}
	h.await(r, rc)
	h.warnUnbuilt(w, r, global.UnbuiltIn(p), tenant+"/"+ns)
	return noContent(w)
}

// policy answers one field of a namespace's policies, from the cache; an
// unset field is 204 with no body, as Pulsar answers a null.
func (h *handler) policy(field func(global.Policies) any) route {
	return func(w http.ResponseWriter, r *http.Request) error {
		tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
		p, found := h.svc.Policies().Namespace(tenant, ns)
		if !found {
			return fmt.Errorf("%w: namespace %s/%s does not exist", ErrNotFound, tenant, ns)
		}
		v := field(p)
		if isNil(v) {
			return noContent(w)
		}
		return ok(w, v)
	}
}

func isNil(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case *global.RetentionPolicies:
		return x == nil
	case *int:
		return x == nil
	case *bool:
		return x == nil
	case *global.AutoTopicCreation:
		return x == nil
	case *global.BundlesData:
		return x == nil
	case []string:
		return x == nil
	}
	return false
}

// setPolicy decodes a required body of type T and applies set with it.
func setPolicy[T any](h *handler, set func(*global.Policies, T) error) route {
	return func(w http.ResponseWriter, r *http.Request) error {
		var v T
		if err := h.mustReadJSON(r, &v); err != nil {
			return err
		}
		return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
			return set(p, v)
		})
	}
}

func (h *handler) clearPolicy(clear func(*global.Policies)) route {
	return func(w http.ResponseWriter, r *http.Request) error {
		return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
			clear(p)
			return nil
		})
	}
}

func (h *handler) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant")
	if _, found := h.svc.Policies().Tenant(tenant); !found {
		return fmt.Errorf("%w: tenant %s does not exist", ErrNotFound, tenant)
	}
	out := []string{}
	for _, ns := range h.svc.Policies().Namespaces(tenant) {
		out = append(out, tenant+"/"+ns)
	}
	return ok(w, out)
}

// createNamespace creates a namespace with the policies in the body, if
// any. Bundles given as a count are spread evenly; no replication clusters
// means this region, as Pulsar fills in its local cluster.
func (h *handler) createNamespace(w http.ResponseWriter, r *http.Request) error {
	var p global.Policies
	if _, err := h.readJSON(r, &p); err != nil {
		return err
	}
	if p.Bundles != nil && len(p.Bundles.Boundaries) == 0 {
		b, err := global.EvenBundlesData(p.Bundles.NumBundles)
		if err != nil {
			return err
		}
		p.Bundles = &b
	}
	if len(p.ReplicationClusters) == 0 {
		p.ReplicationClusters = []string{h.svc.Region()}
	}
	rc, err := h.svc.Global().CreateNamespace(r.Context(), r.PathValue("tenant"), r.PathValue("namespace"), p)
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

func (h *handler) getPolicies(w http.ResponseWriter, r *http.Request) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	p, found := h.svc.Policies().Namespace(tenant, ns)
	if !found {
		return fmt.Errorf("%w: namespace %s/%s does not exist", ErrNotFound, tenant, ns)
	}
	return ok(w, p)
}

// deleteNamespace deletes an empty namespace (409 while it has topics, as
// Pulsar). With force its topics are deleted first, each where it is
// served.
func (h *handler) deleteNamespace(w http.ResponseWriter, r *http.Request) error {
	force, err := queryBool(r, "force")
	if err != nil {
		return err
	}
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if err := h.namespaceExists(tenant, ns); err != nil {
		return err
	}
	names, err := h.svc.TopicsOfNamespace(r.Context(), tenant, ns)
	if err != nil {
		return err
	}
	records := h.svc.Policies().Topics(tenant, ns)
	if !force && (len(names) > 0 || len(records) > 0) {
		return fmt.Errorf("%w: namespace %s/%s has topics; delete them first (or use force)", global.ErrNamespaceNotEmpty, tenant, ns)
	}
	for _, name := range names {
		t, err := topology.ParseTopicName(name)
		if err != nil {
			continue
		}
		local, url, err := h.owner(r, t)
		if err != nil {
			return err
		}
		if local {
			err = h.svc.DeleteTopic(r.Context(), t, true)
		} else {
			_, err = h.forward(r, url, "DELETE", t, "", nil)
		}
		if err != nil && !errors.Is(err, wire.ErrTopicNotFound) && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("deleting %s: %w", t, err)
		}
	}
	for _, name := range records {
		t, err := topology.ParseTopicName(name)
		if err != nil {
			continue
		}
		if _, err := h.svc.Global().DeleteTopic(r.Context(), t); err != nil && !errors.Is(err, global.ErrNotFound) {
			return err
		}
	}
	rc, err := h.svc.Global().DeleteNamespace(r.Context(), tenant, ns)
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

// namespaceTopics lists the namespace's topics as the binary protocol's
// GET_TOPICS_OF_NAMESPACE does (partitions one by one); mode is
// PERSISTENT (default), NON_PERSISTENT or ALL, and Meridian has only
// persistent topics.
func (h *handler) namespaceTopics(w http.ResponseWriter, r *http.Request) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	mode := strings.ToUpper(r.URL.Query().Get("mode"))
	switch mode {
	case "", "PERSISTENT", "ALL":
	case "NON_PERSISTENT":
		if err := h.namespaceExists(tenant, ns); err != nil {
			return err
		}
		return ok(w, []string{})
	default:
		return fmt.Errorf("%w: mode %q (want PERSISTENT, NON_PERSISTENT or ALL)", ErrBadRequest, mode)
	}
	if err := h.namespaceExists(tenant, ns); err != nil {
		return err
	}
	names, err := h.svc.TopicsOfNamespace(r.Context(), tenant, ns)
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{}
	}
	return ok(w, names)
}

// setBacklogQuota sets one quota type (backlogQuotaType, default
// destination_storage).
func (h *handler) setBacklogQuota(w http.ResponseWriter, r *http.Request) error {
	typ := backlogQuotaType(r)
	var body backlogQuotaBody
	if err := h.mustReadJSON(r, &body); err != nil {
		return err
	}
	q := body.quota()
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		if p.BacklogQuotaMap == nil {
			p.BacklogQuotaMap = map[global.BacklogQuotaType]global.BacklogQuota{}
		}
		p.BacklogQuotaMap[typ] = q
		return nil
	})
}

func (h *handler) removeBacklogQuota(w http.ResponseWriter, r *http.Request) error {
	typ := backlogQuotaType(r)
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		delete(p.BacklogQuotaMap, typ)
		return nil
	})
}

// backlogQuotaBody is a BacklogQuota as Pulsar's admin accepts it: limits
// as numbers or numeric strings, the deprecated "limit" meaning limitSize,
// and an absent limit meaning none (-1).
type backlogQuotaBody struct {
	LimitSize *flexInt64           `json:"limitSize"`
	LimitTime *flexInt64           `json:"limitTime"`
	Limit     *flexInt64           `json:"limit"`
	Policy    global.BacklogPolicy `json:"policy"`
}

func (b backlogQuotaBody) quota() global.BacklogQuota {
	q := global.BacklogQuota{LimitSize: -1, LimitTime: -1, Policy: b.Policy}
	switch {
	case b.LimitSize != nil:
		q.LimitSize = int64(*b.LimitSize)
	case b.Limit != nil:
		q.LimitSize = int64(*b.Limit)
	}
	if b.LimitTime != nil {
		q.LimitTime = int64(*b.LimitTime)
	}
	return q
}

// flexInt64 is a JSON number, or a string holding one (Jackson's leniency,
// which Pulsar's clients rely on).
type flexInt64 int64

func (f *flexInt64) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*f = flexInt64(v)
	return nil
}

func backlogQuotaType(r *http.Request) global.BacklogQuotaType {
	if t := r.URL.Query().Get("backlogQuotaType"); t != "" {
		return global.BacklogQuotaType(t)
	}
	return global.DestinationStorage
}

// readSchemaStrategy reads a schema compatibility strategy from the body: a
// JSON string (pulsaradmin's) or bare text.
func (h *handler) readSchemaStrategy(r *http.Request) (global.SchemaCompatibilityStrategy, error) {
	b, err := h.readBody(r)
	if err != nil {
		return "", err
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		s = strings.TrimSpace(string(b))
	}
	if s == "" {
		return "", fmt.Errorf("%w: a schema compatibility strategy is required", ErrBadRequest)
	}
	return global.SchemaCompatibilityStrategy(s), nil
}

func (h *handler) setSchemaStrategy(w http.ResponseWriter, r *http.Request) error {
	s, err := h.readSchemaStrategy(r)
	if err != nil {
		return err
	}
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		p.SchemaCompatibilityStrategy = s
		return nil
	})
}

func (h *handler) grantNamespacePermission(w http.ResponseWriter, r *http.Request) error {
	var acts []global.AuthAction
	if err := h.mustReadJSON(r, &acts); err != nil {
		return err
	}
	role := r.PathValue("role")
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		if p.AuthPolicies.NamespaceAuth == nil {
			p.AuthPolicies.NamespaceAuth = map[string][]global.AuthAction{}
		}
		p.AuthPolicies.NamespaceAuth[role] = acts
		return nil
	})
}

func (h *handler) revokeNamespacePermission(w http.ResponseWriter, r *http.Request) error {
	role := r.PathValue("role")
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		if _, found := p.AuthPolicies.NamespaceAuth[role]; !found {
			return fmt.Errorf("%w: role %s has no permission on the namespace", ErrPrecondition, role)
		}
		delete(p.AuthPolicies.NamespaceAuth, role)
		return nil
	})
}

func (h *handler) grantSubscriptionPermission(w http.ResponseWriter, r *http.Request) error {
	var roles []string
	if err := h.mustReadJSON(r, &roles); err != nil {
		return err
	}
	sub := r.PathValue("subscription")
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		if p.AuthPolicies.SubscriptionAuthRoles == nil {
			p.AuthPolicies.SubscriptionAuthRoles = map[string][]string{}
		}
		p.AuthPolicies.SubscriptionAuthRoles[sub] = append(p.AuthPolicies.SubscriptionAuthRoles[sub], roles...)
		return nil
	})
}

// revokeSubscriptionPermission removes one role from a subscription's
// roles, and the subscription's entry with its last role.
func (h *handler) revokeSubscriptionPermission(w http.ResponseWriter, r *http.Request) error {
	sub, role := r.PathValue("subscription"), r.PathValue("role")
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		roles, found := p.AuthPolicies.SubscriptionAuthRoles[sub]
		if !found || !slices.Contains(roles, role) {
			return fmt.Errorf("%w: role %s has no permission on subscription %s", ErrPrecondition, role, sub)
		}
		roles = slices.DeleteFunc(roles, func(x string) bool { return x == role })
		if len(roles) == 0 {
			delete(p.AuthPolicies.SubscriptionAuthRoles, sub)
		} else {
			p.AuthPolicies.SubscriptionAuthRoles[sub] = roles
		}
		return nil
	})
}

// checkAutoTopicCreation refuses what the global store would, with
// Pulsar's reasons (which pulsaradmin's users compare).
func checkAutoTopicCreation(a global.AutoTopicCreation, d global.BrokerDefaults) error {
	const prefix = "Invalid configuration for autoTopicCreationOverride. the detail is "
	switch {
	case a.Type == global.Partitioned && a.Partitions == nil:
		return pulsarReason{ErrPrecondition, prefix + "[defaultNumPartitions] cannot be null when the type is partitioned."}
	case a.Type == global.Partitioned && *a.Partitions < 1:
		return pulsarReason{ErrPrecondition, prefix + "[defaultNumPartitions] cannot be less than 1 for partition type."}
	case a.Type == global.NonPartitioned && a.Partitions != nil:
		return pulsarReason{ErrPrecondition, prefix + "[defaultNumPartitions] is not allowed to be set when the type is non-partition."}
	}
	if a.Type == global.Partitioned {
		return d.PartitionsAllowed(*a.Partitions)
	}
	return nil
}
