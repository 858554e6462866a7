package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Authorizer decides what an authenticated role may do. Each method
// returns nil to allow, or an error that says why not (it is reported as
// 403 Forbidden whatever it wraps). Implementations are safe for
// concurrent use and answer from local state: they are called on every
// request.
type Authorizer interface {
	// IsSuperUser reports whether role may do anything, including managing
	// clusters and tenants.
	IsSuperUser(role string) bool
	// CanAdminTenant allows managing tenant's namespaces and topics.
	CanAdminTenant(ctx context.Context, role, tenant string) error
	// CanProduce, CanConsume and CanLookup allow the client operations on
	// one topic: publishing, subscribing (and the subscription admin
	// operations Pulsar lets consumers do: peek, skip, reset, expire), and
	// looking it up (lookup, partitioned metadata, reading its schema).
	CanProduce(ctx context.Context, role string, topic topology.TopicName) error
	CanConsume(ctx context.Context, role string, topic topology.TopicName) error
	CanLookup(ctx context.Context, role string, topic topology.TopicName) error
}

// Config configures the admin API.
type Config struct {
	// Authenticator checks the credentials of each request: an
	// "Authorization: Bearer <token>" header (method token), "Basic"
	// (method basic), or a verified TLS client certificate (method tls);
	// a request with none gets the anonymous role, or 401 when there is
	// none. Nil, or a disabled one, lets every request in with an empty
	// role.
	Authenticator *auth.Authenticator
	// Authorizer authorizes each request's role. Nil allows everything
	// (Pulsar's authorizationEnabled=false).
	Authorizer Authorizer
	// SuperUserRoles are roles allowed everything in addition to the
	// Authorizer's superusers (Pulsar's superUserRoles). Used only with an
	// Authorizer.
	SuperUserRoles []string
	// PolicyDefaults are the broker's policy defaults, for what the admin
	// API reports as effective (schema compatibility strategy, dedup
	// status). They must be the broker's ServiceConfig.Policies. Default
	// global.DefaultBrokerDefaults().
	PolicyDefaults global.BrokerDefaults
	// MaxBodyBytes bounds a request body. Schemas are the largest bodies
	// (the registry takes up to 1 MiB). Default 2 MiB; 1 KiB..64 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds each request's work (loading a topic, writing
	// the global store). Default 30s, the client's own operation timeout;
	// at least 1s.
	RequestTimeout time.Duration
	// MaxRateSamples bounds the topics whose counters are remembered to
	// compute rates in topic stats (one small record each). Past it the
	// samples are forgotten and rates start again from 0. Default 10000;
	// at least 1.
	MaxRateSamples int
	// Bookies is the region's bookie administration (auto-recovery's:
	// the bookies' states, decommission, under-replicated ledgers, the
	// pause switch), served under /admin/v2/bookies/ to superusers. Nil:
	// those endpoints answer 404.
	Bookies *autorecovery.Admin
	// Client makes the requests this broker sends to other brokers (stats
	// and subscription operations on partitions another broker owns).
	// Default: a client with a 30s timeout.
	Client *http.Client
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		PolicyDefaults: global.DefaultBrokerDefaults(),
		MaxBodyBytes:   2 << 20,
		RequestTimeout: 30 * time.Second,
		MaxRateSamples: 10000,
		Client:         &http.Client{Timeout: 30 * time.Second},
	}
}

// Validate reports a field out of bounds.
func (c Config) Validate() error {
	switch {
	case c.MaxBodyBytes < 1<<10 || c.MaxBodyBytes > 64<<20:
		return fmt.Errorf("%w: MaxBodyBytes %d, want 1 KiB..64 MiB", ErrInvalidConfig, c.MaxBodyBytes)
	case c.RequestTimeout < time.Second:
		return fmt.Errorf("%w: RequestTimeout %v, want at least 1s", ErrInvalidConfig, c.RequestTimeout)
	case c.MaxRateSamples < 1:
		return fmt.Errorf("%w: MaxRateSamples %d, want at least 1", ErrInvalidConfig, c.MaxRateSamples)
	case c.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	}
	if err := c.PolicyDefaults.Validate(); err != nil {
		return fmt.Errorf("%w: PolicyDefaults: %w", ErrInvalidConfig, err)
	}
	return nil
}

// BrokerAuthorizer adapts the broker's authorizer (the one that authorizes
// LOOKUP, PRODUCER and SUBSCRIBE) to the admin API, so that both decide
// alike; nil gives nil (allow all).
func BrokerAuthorizer(a *auth.Authorizer) Authorizer {
	if a == nil {
		return nil
	}
	return brokerAuthorizer{a}
}

type brokerAuthorizer struct{ a *auth.Authorizer }

func (b brokerAuthorizer) IsSuperUser(role string) bool { return b.a.IsSuperUser(role) }

func (b brokerAuthorizer) CanAdminTenant(ctx context.Context, role, tenant string) error {
	return b.a.CanAdminTenant(ctx, role, tenant)
}

func (b brokerAuthorizer) CanProduce(ctx context.Context, role string, t topology.TopicName) error {
	return b.a.Can(ctx, role, auth.ActionProduce, t)
}

func (b brokerAuthorizer) CanConsume(ctx context.Context, role string, t topology.TopicName) error {
	return b.a.Can(ctx, role, auth.ActionConsume, t)
}

func (b brokerAuthorizer) CanLookup(ctx context.Context, role string, t topology.TopicName) error {
	return b.a.Can(ctx, role, auth.ActionLookup, t)
}

// BrokerConfig returns the admin configuration that decides as the broker
// does: the broker's authenticator and authorizer (Pulsar's one
// authentication and authorization setting covers both the binary protocol
// and the REST API), and its policy defaults.
func BrokerConfig(b broker.Config, s broker.ServiceConfig) Config {
	c := DefaultConfig()
	c.Authenticator = b.Auth
	c.Authorizer = BrokerAuthorizer(b.Authz)
	c.PolicyDefaults = s.Policies
	return c
}
