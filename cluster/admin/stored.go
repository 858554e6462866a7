package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Stored policies: the Pulsar namespace and topic policies that Meridian
// keeps in the Extra map of the namespace's or topic's global record and
// answers back. The broker enforces the producer, consumer and subscription
// limits (namespace maxProducersPerTopic, maxConsumersPerTopic and
// maxConsumersPerSubscription; topic maxProducers, maxConsumers,
// maxConsumersPerSubscription, maxSubscriptionsPerTopic and
// maxUnackedMessagesOnConsumer) and the namespace's and the topic's
// autoSubscriptionCreation, as global.Resolve reads them; the replicator
// enforces the topic's replicatorDispatchRate (dispatchrate.go). Setting
// any other changes what GET returns and nothing else:
//
//   - namespace: maxTopicsPerNamespace, subscriptionExpirationTime,
//     compactionThreshold, offloadThreshold, offloadThresholdInSeconds,
//     offloadDeletionLagMs, persistence, persistence/bookieAffinity,
//     properties (namespace properties are metadata, so "not enforced" is
//     their whole meaning);
//   - topic: maxUnackedMessagesOnSubscription, persistence,
//     delayedDelivery, dispatchRate, publishRate, subscribeRate,
//     subscriptionDispatchRate, offloadPolicies,
//     maxMessageSize, deduplicationSnapshotInterval,
//     schemaValidationEnforced, and the topic's properties.
//
// One table describes them all, and one set of handlers serves the table:
// a policy is its path, its key in Extra (Pulsar's JSON field name), the
// JSON kind its body must have, and what an unset policy answers.

// valueKind is the JSON shape a stored policy's body must have.
type valueKind int

const (
	kindInt          valueKind = iota // an integer
	kindNonNegInt                     // an integer >= 0
	kindBool                          // true or false
	kindObject                        // a JSON object (Pulsar's *Data types)
	kindStringMap                     // an object of strings, merged on set (properties)
	kindDispatchRate                  // a global.DispatchRate (replicatorDispatchRate)
)

// storedPolicy is one row of the table.
type storedPolicy struct {
	path  string    // the URL segment(s) after the namespace or topic
	key   string    // the Extra key: Pulsar's JSON field name
	kind  valueKind // what the body must be
	unset string    // the answer when unset: "" is no body (204 or null)
	// nsKey, for a topic policy, is the namespace policy an applied=true
	// GET falls back to.
	nsKey string
	// invalid, when set, is Pulsar's reason for refusing a value.
	invalid string
}

var namespaceStored = []storedPolicy{
	{path: "maxTopicsPerNamespace", key: "max_topics_per_namespace", kind: kindNonNegInt, unset: "0",
		invalid: "maxTopicsPerNamespace must be 0 or more"},
	{path: "subscriptionExpirationTime", key: "subscription_expiration_time_minutes", kind: kindNonNegInt,
		invalid: "Invalid value for subscription expiration time"},
	{path: "maxProducersPerTopic", key: global.ExtraMaxProducersPerTopic, kind: kindNonNegInt},
	{path: "maxConsumersPerTopic", key: global.ExtraMaxConsumersPerTopic, kind: kindNonNegInt},
	{path: "maxConsumersPerSubscription", key: global.ExtraMaxConsumersPerSubscription, kind: kindNonNegInt},
	{path: "compactionThreshold", key: "compaction_threshold", kind: kindNonNegInt},
	{path: "offloadThreshold", key: "offload_threshold", kind: kindInt},
	{path: "offloadThresholdInSeconds", key: "offload_threshold_in_seconds", kind: kindNonNegInt,
		invalid: "Invalid value for offloadThresholdInSecond"},
	{path: "offloadDeletionLagMs", key: "offload_deletion_lag_ms", kind: kindNonNegInt},
	{path: "persistence", key: "persistence", kind: kindObject},
	{path: "persistence/bookieAffinity", key: "bookie_affinity_group", kind: kindObject},
	{path: "autoSubscriptionCreation", key: global.ExtraAutoSubscriptionCreation, kind: kindObject},
	{path: "properties", key: "properties", kind: kindStringMap, unset: "{}"},
}

var topicStored = []storedPolicy{
	{path: "maxProducers", key: global.ExtraTopicMaxProducers, kind: kindNonNegInt, nsKey: global.ExtraMaxProducersPerTopic},
	{path: "maxConsumers", key: global.ExtraTopicMaxConsumers, kind: kindNonNegInt, nsKey: global.ExtraMaxConsumersPerTopic},
	{path: "maxUnackedMessagesOnConsumer", key: global.ExtraTopicMaxUnackedOnConsumer, kind: kindNonNegInt},
	{path: "maxUnackedMessagesOnSubscription", key: "maxUnackedMessagesOnSubscription", kind: kindNonNegInt},
	{path: "persistence", key: "persistence", kind: kindObject, nsKey: "persistence"},
	{path: "delayedDelivery", key: "delayedDelivery", kind: kindObject},
	{path: "dispatchRate", key: "dispatchRate", kind: kindObject},
	{path: "publishRate", key: "publishRate", kind: kindObject},
	{path: "subscribeRate", key: "subscribeRate", kind: kindObject},
	{path: "subscriptionDispatchRate", key: "subscriptionDispatchRate", kind: kindObject},
	{path: "replicatorDispatchRate", key: global.ExtraReplicatorDispatchRate, kind: kindDispatchRate},
	{path: "offloadPolicies", key: "offloadPolicies", kind: kindObject},
	{path: "maxMessageSize", key: "maxMessageSize", kind: kindNonNegInt},
	{path: "maxSubscriptionsPerTopic", key: global.ExtraTopicMaxSubscriptions, kind: kindNonNegInt},
	{path: "maxConsumersPerSubscription", key: global.ExtraTopicMaxConsumersPerSubscription, kind: kindNonNegInt, nsKey: global.ExtraMaxConsumersPerSubscription},
	{path: "deduplicationSnapshotInterval", key: "deduplicationSnapshotIntervalSeconds", kind: kindNonNegInt},
	{path: "schemaValidationEnforced", key: "schemaValidationEnforced", kind: kindBool},
	{path: "autoSubscriptionCreation", key: global.ExtraTopicAutoSubscriptionCreation, kind: kindObject, nsKey: global.ExtraAutoSubscriptionCreation},
	topicProperties,
}

// check returns body, compacted, if it has the policy's kind.
func (sp storedPolicy) check(body []byte) (json.RawMessage, error) {
	bad := func(want string) error {
		if sp.invalid != "" {
			return pulsarReason{ErrPrecondition, sp.invalid}
		}
		return fmt.Errorf("%w: Invalid value for %s: want %s, got %.100s", ErrPrecondition, sp.path, want, body)
	}
	var err error
	switch sp.kind {
	case kindInt, kindNonNegInt:
		var n int64
		if json.Unmarshal(body, &n) != nil {
			return nil, bad("an integer")
		}
		if sp.kind == kindNonNegInt && n < 0 {
			return nil, bad("an integer >= 0")
		}
	case kindBool:
		var b bool
		if json.Unmarshal(body, &b) != nil {
			return nil, bad("true or false")
		}
	case kindObject:
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil || m == nil {
			return nil, bad("a JSON object")
		}
	case kindStringMap:
		var m map[string]string
		if json.Unmarshal(body, &m) != nil || m == nil {
			return nil, bad("a JSON object of strings")
		}
	case kindDispatchRate:
		// Stored as parsed, with Pulsar's defaults filled in, so that
		// the replicator reads the rate the API accepted.
		rate, err := parseDispatchRate(body)
		if err != nil {
			return nil, err
		}
		return json.Marshal(rate)
	}
	var out bytes.Buffer
	if err = json.Compact(&out, body); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
	}
	return out.Bytes(), nil
}

// set applies v to extra: a replacement, or for a string map a merge.
func (sp storedPolicy) set(extra global.Extra, v json.RawMessage) (global.Extra, error) {
	if extra == nil {
		extra = global.Extra{}
	}
	if sp.kind == kindStringMap {
		merged := map[string]string{}
		if old, found := extra[sp.key]; found {
			if err := json.Unmarshal(old, &merged); err != nil {
				return nil, fmt.Errorf("%w: stored %s: %v", global.ErrCorrupt, sp.key, err)
			}
		}
		var add map[string]string
		if err := json.Unmarshal(v, &add); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		maps.Copy(merged, add)
		b, err := json.Marshal(merged)
		if err != nil {
			return nil, err
		}
		v = b
	}
	extra[sp.key] = v
	return extra, nil
}

// clear removes the policy from extra; for a string map, ?key= removes one
// entry only.
func (sp storedPolicy) clear(r *http.Request, extra global.Extra) error {
	k := r.URL.Query().Get("key")
	if sp.kind != kindStringMap || k == "" {
		delete(extra, sp.key)
		return nil
	}
	m := map[string]string{}
	if old, found := extra[sp.key]; found {
		if err := json.Unmarshal(old, &m); err != nil {
			return fmt.Errorf("%w: stored %s: %v", global.ErrCorrupt, sp.key, err)
		}
	}
	delete(m, k)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	extra[sp.key] = b
	return nil
}

// answer writes v, or the policy's unset answer when v is nil; an unset
// answer of "" is 204 for a namespace (as the other namespace policies)
// and null for a topic (as the other topic policies).
func (sp storedPolicy) answer(w http.ResponseWriter, v json.RawMessage, topic bool) error {
	if v == nil && sp.unset != "" {
		v = json.RawMessage(sp.unset)
	}
	if v == nil {
		if !topic {
			return noContent(w)
		}
		v = json.RawMessage("null")
	}
	return ok(w, v)
}

// readStored reads and checks a required body for sp.
func (h *handler) readStored(r *http.Request, sp storedPolicy) (json.RawMessage, error) {
	b, err := h.readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: a JSON body is required", ErrBadRequest)
	}
	return sp.check(b)
}

func (h *handler) routeStoredPolicies() {
	const ns = "/admin/v2/namespaces/{tenant}/{namespace}/"
	for _, sp := range namespaceStored {
		h.handle("GET "+ns+sp.path, opTenantAdmin, func(w http.ResponseWriter, r *http.Request) error {
			tenant, name := r.PathValue("tenant"), r.PathValue("namespace")
			p, found := h.svc.Policies().Namespace(tenant, name)
			if !found {
				return fmt.Errorf("%w: namespace %s/%s does not exist", ErrNotFound, tenant, name)
			}
			return sp.answer(w, p.Extra[sp.key], false)
		})
		set := func(w http.ResponseWriter, r *http.Request) error {
			v, err := h.readStored(r, sp)
			if err != nil {
				return err
			}
			return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
				p.Extra, err = sp.set(p.Extra, v)
				return err
			})
		}
		// Pulsar takes some of these by POST and others by PUT;
		// pulsaradmin's choice varies by version, so both are served.
		h.handle("POST "+ns+sp.path, opTenantAdmin, set)
		h.handle("PUT "+ns+sp.path, opTenantAdmin, set)
		h.handle("DELETE "+ns+sp.path, opTenantAdmin, func(w http.ResponseWriter, r *http.Request) error {
			return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
				return sp.clear(r, p.Extra)
			})
		})
	}

	const p = "/admin/v2"
	for _, sp := range topicStored {
		h.handleTopic("GET", p, "/"+sp.path, opTenantAdmin, func(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
			applied, err := queryBool(r, "applied")
			if err != nil {
				return err
			}
			base, err := h.policyTopic(r, t)
			if err != nil {
				return err
			}
			tp, _ := h.svc.Policies().Topic(base)
			v := tp.Extra[sp.key]
			if v == nil && applied && sp.nsKey != "" {
				nsp, _ := h.svc.Policies().Namespace(base.Tenant, base.Namespace)
				v = nsp.Extra[sp.nsKey]
			}
			return sp.answer(w, v, true)
		})
		set := func(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
			base, err := h.policyTopic(r, t)
			if err != nil {
				return err
			}
			v, err := h.readStored(r, sp)
			if err != nil {
				return err
			}
			err = h.updateTopicPolicies(r, base, func(tp *global.TopicPolicies) error {
				tp.Extra, err = sp.set(tp.Extra, v)
				return err
			})
			if err != nil {
				return err
			}
			return noContent(w)
		}
		h.handleTopic("POST", p, "/"+sp.path, opTenantAdmin, set)
		h.handleTopic("PUT", p, "/"+sp.path, opTenantAdmin, set)
		h.handleTopic("DELETE", p, "/"+sp.path, opTenantAdmin, h.clearTopicPolicyReq(func(r *http.Request, tp *global.TopicPolicies) {
			// A string map that does not decode is left as it is.
			_ = sp.clear(r, tp.Extra)
		}))
	}
}

// topicProperties is the table's row for a topic's properties.
var topicProperties = storedPolicy{path: "properties", key: "properties", kind: kindStringMap, unset: "{}"}

// propertiesExtra merges props into a topic's Extra, as a create with
// properties stores them.
func propertiesExtra(extra global.Extra, props map[string]string) (global.Extra, error) {
	if len(props) == 0 {
		return extra, nil
	}
	b, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	return topicProperties.set(extra, b)
}
