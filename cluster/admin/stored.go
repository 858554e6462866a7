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
// answers back. Some of them are enforced, as global.Resolve reads them:
// the broker enforces the producer, consumer and subscription limits, the
// unacked-message limits per consumer and per subscription,
// schemaValidationEnforced, autoSubscriptionCreation,
// the publish rate, the subscribe rate, maxTopicsPerNamespace,
// maxMessageSize and persistence (the E/Qw/Qa of new ledgers); the replicator enforces replicatorDispatchRate
// (dispatchrate.go). The others are stored and not enforced yet, and
// global.UnbuiltPolicies lists each: a set of one answers with a Warning
// (unbuilt.go). A namespace's properties are metadata, which is all they
// mean.
//
// One table describes them all, and one set of handlers serves the table:
// a policy is its path, its key in Extra (Pulsar's JSON field name), the
// JSON kind its body must have, and what an unset policy answers.

// valueKind is the JSON shape a stored policy's body must have.
type valueKind int

const (
	kindInt            valueKind = iota // an integer
	kindNonNegInt                       // an integer >= 0
	kindBool                            // true or false
	kindObject                          // a JSON object (Pulsar's *Data types)
	kindStringMap                       // an object of strings, merged on set (properties)
	kindDispatchRate                    // a global.DispatchRate (the replicator's, the topic's, a subscription's)
	kindPublishRate                     // a global.PublishRate
	kindPersistence                     // global.PersistencePolicies, within the region's bookies
	kindSubscribeRate                   // a global.SubscribeRate
	kindBookieAffinity                  // a global.BookieAffinityGroup
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
	// perRegion, for a namespace policy, keeps one value per region, as
	// Pulsar keys its rates by cluster: the Extra value is a map from
	// region to value, and this region's admin API sets, answers and
	// removes this region's entry.
	perRegion bool
	// deletePath, when set, is where DELETE is served instead of path
	// (Pulsar's removeOffloadPolicies).
	deletePath string
}

var namespaceStored = []storedPolicy{
	{path: "maxTopicsPerNamespace", key: global.ExtraMaxTopicsPerNamespace, kind: kindNonNegInt, unset: "0",
		invalid: "maxTopicsPerNamespace must be 0 or more"},
	{path: "subscriptionExpirationTime", key: global.ExtraSubscriptionExpirationTime, kind: kindNonNegInt,
		invalid: "Invalid value for subscription expiration time"},
	{path: "maxProducersPerTopic", key: global.ExtraMaxProducersPerTopic, kind: kindNonNegInt},
	{path: "maxConsumersPerTopic", key: global.ExtraMaxConsumersPerTopic, kind: kindNonNegInt},
	{path: "maxConsumersPerSubscription", key: global.ExtraMaxConsumersPerSubscription, kind: kindNonNegInt},
	{path: "maxUnackedMessagesPerConsumer", key: global.ExtraMaxUnackedPerConsumer, kind: kindNonNegInt,
		invalid: "maxUnackedMessagesPerConsumer must be 0 or more"},
	{path: "maxUnackedMessagesPerSubscription", key: global.ExtraMaxUnackedPerSubscription, kind: kindNonNegInt,
		invalid: "maxUnackedMessagesPerSubscription must be 0 or more"},
	{path: "schemaValidationEnforced", key: global.ExtraSchemaValidationEnforced, kind: kindBool, unset: "false"},
	{path: "compactionThreshold", key: global.ExtraCompactionThreshold, kind: kindNonNegInt},
	{path: "offloadThreshold", key: "offload_threshold", kind: kindInt},
	{path: "offloadThresholdInSeconds", key: "offload_threshold_in_seconds", kind: kindNonNegInt,
		invalid: "Invalid value for offloadThresholdInSecond"},
	{path: "offloadDeletionLagMs", key: "offload_deletion_lag_ms", kind: kindNonNegInt},
	{path: "persistence", key: global.ExtraPersistence, kind: kindPersistence},
	{path: "publishRate", key: global.ExtraPublishRate, kind: kindPublishRate, perRegion: true},
	{path: "dispatchRate", key: global.ExtraDispatchRate, kind: kindDispatchRate, perRegion: true},
	{path: "subscriptionDispatchRate", key: global.ExtraSubscriptionDispatchRate, kind: kindDispatchRate, perRegion: true},
	{path: "subscribeRate", key: global.ExtraSubscribeRate, kind: kindSubscribeRate, perRegion: true},
	{path: "delayedDelivery", key: global.ExtraDelayedDelivery, kind: kindObject},
	{path: "offloadPolicies", key: "offload_policies", kind: kindObject, deletePath: "removeOffloadPolicies"},
	{path: "persistence/bookieAffinity", key: global.ExtraBookieAffinityGroup, kind: kindBookieAffinity},
	{path: "autoSubscriptionCreation", key: global.ExtraAutoSubscriptionCreation, kind: kindObject},
	{path: "properties", key: "properties", kind: kindStringMap, unset: "{}"},
}

var topicStored = []storedPolicy{
	{path: "maxProducers", key: global.ExtraTopicMaxProducers, kind: kindNonNegInt, nsKey: global.ExtraMaxProducersPerTopic},
	{path: "maxConsumers", key: global.ExtraTopicMaxConsumers, kind: kindNonNegInt, nsKey: global.ExtraMaxConsumersPerTopic},
	{path: "maxUnackedMessagesOnConsumer", key: global.ExtraTopicMaxUnackedOnConsumer, kind: kindNonNegInt, nsKey: global.ExtraMaxUnackedPerConsumer},
	{path: "maxUnackedMessagesOnSubscription", key: global.ExtraTopicMaxUnackedOnSubscription, kind: kindNonNegInt,
		nsKey: global.ExtraMaxUnackedPerSubscription},
	{path: "persistence", key: global.ExtraPersistence, kind: kindPersistence, nsKey: global.ExtraPersistence},
	{path: "delayedDelivery", key: global.ExtraTopicDelayedDelivery, kind: kindObject},
	{path: "dispatchRate", key: global.ExtraTopicDispatchRate, kind: kindDispatchRate},
	{path: "publishRate", key: global.ExtraTopicPublishRate, kind: kindPublishRate},
	{path: "subscribeRate", key: global.ExtraTopicSubscribeRate, kind: kindSubscribeRate},
	{path: "subscriptionDispatchRate", key: global.ExtraTopicSubscriptionDispatchRate, kind: kindDispatchRate},
	{path: "replicatorDispatchRate", key: global.ExtraReplicatorDispatchRate, kind: kindDispatchRate},
	{path: "offloadPolicies", key: "offloadPolicies", kind: kindObject},
	{path: "maxMessageSize", key: global.ExtraMaxMessageSize, kind: kindNonNegInt},
	{path: "maxSubscriptionsPerTopic", key: global.ExtraTopicMaxSubscriptions, kind: kindNonNegInt},
	{path: "maxConsumersPerSubscription", key: global.ExtraTopicMaxConsumersPerSubscription, kind: kindNonNegInt, nsKey: global.ExtraMaxConsumersPerSubscription},
	{path: "deduplicationSnapshotInterval", key: global.ExtraTopicDedupSnapshotInterval, kind: kindNonNegInt},
	{path: "schemaValidationEnforced", key: global.ExtraTopicSchemaValidationEnforced, kind: kindBool, nsKey: global.ExtraSchemaValidationEnforced},
	{path: "compactionThreshold", key: global.ExtraTopicCompactionThreshold, kind: kindNonNegInt, nsKey: global.ExtraCompactionThreshold},
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
	case kindPublishRate:
		var rate global.PublishRate
		if strictJSON(body, &rate) != nil {
			return nil, bad("{publishThrottlingRateInMsg, publishThrottlingRateInByte}")
		}
	case kindSubscribeRate:
		if err := strictValid[global.SubscribeRate](body, bad("{subscribeThrottlingRatePerConsumer, ratePeriodInSecond}")); err != nil {
			return nil, err
		}
	case kindBookieAffinity:
		shape := bad("{bookkeeperAffinityGroupPrimary, bookkeeperAffinityGroupSecondary}")
		if err := strictValid[global.BookieAffinityGroup](body, shape); err != nil {
			return nil, err
		}
	case kindPersistence:
		shape := bad("{bookkeeperEnsemble, bookkeeperWriteQuorum, bookkeeperAckQuorum, managedLedgerMaxMarkDeleteRate}")
		if err := strictValid[global.PersistencePolicies](body, shape); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	if err = json.Compact(&out, body); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
	}
	return out.Bytes(), nil
}

// strictJSON decodes body into v, refusing fields v does not have: a
// misspelt field of a policy would otherwise read as its default.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// strictValid decodes body as a T (strictJSON), and answers shape when it
// is not one, or what T's Validate says of it.
func strictValid[T interface{ Validate() error }](body []byte, shape error) error {
	var v T
	if strictJSON(body, &v) != nil {
		return shape
	}
	return v.Validate()
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

// readStored reads and checks a required body for sp, a policy of
// namespace tenant/ns or of one of its topics.
func (h *handler) readStored(r *http.Request, sp storedPolicy, tenant, ns string) (json.RawMessage, error) {
	b, err := h.readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: a JSON body is required", ErrBadRequest)
	}
	v, err := sp.check(b)
	if err != nil || sp.kind != kindPersistence {
		return v, err
	}
	// Checked when set, as a ledger with a larger ensemble could not be
	// created: the topic's appends would fail until the policy changed.
	var p global.PersistencePolicies
	if err := json.Unmarshal(v, &p); err != nil {
		return nil, err
	}
	n, groups, err := h.placeable(r, tenant, ns)
	if err != nil {
		return nil, err
	}
	if p.BookkeeperEnsemble <= n {
		return v, nil
	}
	if groups.IsZero() {
		return nil, fmt.Errorf("%w: Bookkeeper Ensemble (%d) is larger than the %d writable bookies of region %s",
			global.ErrInvalidPolicies, p.BookkeeperEnsemble, n, h.svc.Region())
	}
	return nil, fmt.Errorf("%w: Bookkeeper Ensemble (%d) is larger than the %d writable bookies placement can give in %s (the bookie affinity of namespace %s/%s) of region %s",
		global.ErrInvalidPolicies, p.BookkeeperEnsemble, n, groups, tenant, ns, h.svc.Region())
}

// placeable is the largest ensemble placement could give a new ledger of
// namespace tenant/ns, and the bookie groups it counted in: the
// namespace's, as the broker resolves them for its topics (Pulsar keeps
// them per namespace only; none for a namespace not found, which the
// update then reports), counted by the region's bookie administration
// (autorecovery.Admin.Capacity). An admin API served without one
// (Config.Bookies nil: tests) knows no bookie's group, and counts the
// region's writable bookies.
func (h *handler) placeable(r *http.Request, tenant, ns string) (int, topology.Groups, error) {
	if h.cfg.Bookies == nil {
		return h.svc.WritableBookies(), topology.Groups{}, nil
	}
	p, _ := h.svc.Policies().Namespace(tenant, ns)
	groups := p.BookieGroups()
	n, err := h.cfg.Bookies.Capacity(r.Context(), groups)
	return n, groups, err
}

// inRegion is the value of a per-region policy for region, from the
// namespace's Extra value of the policy (nil: unset).
func inRegion(v json.RawMessage, region string) json.RawMessage {
	var m map[string]json.RawMessage
	if v == nil || json.Unmarshal(v, &m) != nil {
		return nil
	}
	return m[region]
}

// setInRegion sets region's entry of a per-region policy in extra, or
// removes it when v is nil (and the policy with its last entry).
func (sp storedPolicy) setInRegion(extra global.Extra, region string, v json.RawMessage) (global.Extra, error) {
	m := map[string]json.RawMessage{}
	if old, found := extra[sp.key]; found {
		if err := json.Unmarshal(old, &m); err != nil {
			return nil, fmt.Errorf("%w: stored %s: %v", global.ErrCorrupt, sp.key, err)
		}
	}
	if v != nil {
		m[region] = v
	} else {
		delete(m, region)
	}
	if len(m) == 0 {
		delete(extra, sp.key)
		return extra, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if extra == nil {
		extra = global.Extra{}
	}
	extra[sp.key] = b
	return extra, nil
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
			v := p.Extra[sp.key]
			if sp.perRegion {
				v = inRegion(v, h.svc.Region())
			}
			return sp.answer(w, v, false)
		})
		set := func(w http.ResponseWriter, r *http.Request) error {
			v, err := h.readStored(r, sp, r.PathValue("tenant"), r.PathValue("namespace"))
			if err != nil {
				return err
			}
			return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
				if sp.perRegion {
					p.Extra, err = sp.setInRegion(p.Extra, h.svc.Region(), v)
				} else {
					p.Extra, err = sp.set(p.Extra, v)
				}
				return err
			})
		}
		// Pulsar takes some of these by POST and others by PUT;
		// pulsaradmin's choice varies by version, so both are served.
		h.handle("POST "+ns+sp.path, opTenantAdmin, set)
		h.handle("PUT "+ns+sp.path, opTenantAdmin, set)
		deletePath := sp.path
		if sp.deletePath != "" {
			deletePath = sp.deletePath
		}
		h.handle("DELETE "+ns+deletePath, opTenantAdmin, func(w http.ResponseWriter, r *http.Request) error {
			return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
				if sp.perRegion {
					var err error
					p.Extra, err = sp.setInRegion(p.Extra, h.svc.Region(), nil)
					return err
				}
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
			v, err := h.readStored(r, sp, base.Tenant, base.Namespace)
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
			h.warnUnbuiltTopic(w, r, base)
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
