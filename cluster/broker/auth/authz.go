package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// ErrForbidden: an authenticated role may not do what it asked.
var ErrForbidden = errors.New("auth: forbidden")

// Authorizer decides what a role may do, as Pulsar's
// PulsarAuthorizationProvider does, from the global configuration cache
// (so it answers while the global store is unreachable):
//   - a superuser (Pulsar's superUserRoles) may do anything;
//   - a tenant's admin roles administer the tenant and everything in it,
//     and may produce and consume on its topics;
//   - otherwise a role may produce or consume on a topic when the topic's
//     grants (destination_auth) or its namespace's grants (namespace_auth)
//     give it that action; a lookup needs either.
//
// Authorization needs authentication: without it every client has the
// anonymous role, which is authorized like any other role.
type Authorizer struct {
	superUsers []string
	policies   *global.Cache
}

// NewAuthorizer returns an Authorizer over the watched global
// configuration.
func NewAuthorizer(superUsers []string, policies *global.Cache) *Authorizer {
	return &Authorizer{superUsers: slices.Clone(superUsers), policies: policies}
}

// IsSuperUser reports whether role is a superuser.
func (a *Authorizer) IsSuperUser(role string) bool {
	return role != "" && slices.Contains(a.superUsers, role)
}

// CanAdminTenant allows superusers and the tenant's admin roles.
func (a *Authorizer) CanAdminTenant(_ context.Context, role, tenant string) error {
	if a.IsSuperUser(role) {
		return nil
	}
	t, ok := a.policies.Tenant(tenant)
	if ok && role != "" && slices.Contains(t.AdminRoles, role) {
		return nil
	}
	return fmt.Errorf("%w: role %q is not an admin of tenant %s", ErrForbidden, role, tenant)
}

// Action is what a client asks to do on a topic.
type Action int

// The actions the broker authorizes.
const (
	ActionLookup  Action = iota // lookup and partition metadata: produce or consume
	ActionProduce               // PRODUCER
	ActionConsume               // SUBSCRIBE
)

// Can allows role to do act on topic, or says why not (ErrForbidden).
func (a *Authorizer) Can(ctx context.Context, role string, act Action, topic topology.TopicName) error {
	switch act {
	case ActionProduce:
		return a.can(ctx, role, topic, global.ActionProduce)
	case ActionConsume:
		return a.can(ctx, role, topic, global.ActionConsume)
	default:
		if a.can(ctx, role, topic, global.ActionProduce) == nil {
			return nil
		}
		return a.can(ctx, role, topic, global.ActionConsume)
	}
}

func (a *Authorizer) can(ctx context.Context, role string, topic topology.TopicName, act global.AuthAction) error {
	if a.CanAdminTenant(ctx, role, topic.Tenant) == nil {
		return nil
	}
	if role != "" {
		if ns, ok := a.policies.Namespace(topic.Tenant, topic.Namespace); ok {
			if slices.Contains(ns.AuthPolicies.DestinationAuth[topic.Base().String()][role], act) ||
				slices.Contains(ns.AuthPolicies.NamespaceAuth[role], act) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: role %q may not %s on %s", ErrForbidden, role, act, topic)
}

// CanListTopics allows role to list a namespace's topics, as Pulsar's
// GET_TOPICS namespace operation does: a tenant admin, or a role that the
// namespace itself grants produce or consume (a grant on one topic does
// not reveal the others).
func (a *Authorizer) CanListTopics(ctx context.Context, role, tenant, namespace string) error {
	if a.CanAdminTenant(ctx, role, tenant) == nil {
		return nil
	}
	if role != "" {
		if ns, ok := a.policies.Namespace(tenant, namespace); ok {
			granted := ns.AuthPolicies.NamespaceAuth[role]
			if slices.Contains(granted, global.ActionProduce) || slices.Contains(granted, global.ActionConsume) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: role %q may not list the topics of %s/%s", ErrForbidden, role, tenant, namespace)
}
