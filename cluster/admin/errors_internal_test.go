package admin

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
)

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("%w: x", ErrBadRequest), 400},
		{fmt.Errorf("%w: x", auth.ErrUnauthenticated), 401},
		{fmt.Errorf("%w: x", ErrForbidden), 403},
		{fmt.Errorf("%w: x", global.ErrNotAllowedCluster), 403},
		{fmt.Errorf("%w: x", global.ErrNotFound), 404},
		{fmt.Errorf("%w: x", wire.ErrTopicNotFound), 404},
		{fmt.Errorf("%w: x", wire.ErrSubscriptionNotFound), 404},
		{fmt.Errorf("%w: x", schema.ErrNotFound), 404},
		{fmt.Errorf("%w: x", global.ErrExists), 409},
		{fmt.Errorf("%w: x", global.ErrNamespaceNotEmpty), 409},
		{fmt.Errorf("%w: x", schema.ErrIncompatible), 409},
		{fmt.Errorf("%w: x", wire.ErrNotAllowed), 412},
		{fmt.Errorf("%w: x", wire.ErrConsumerBusy), 412},
		{fmt.Errorf("%w: x", global.ErrInvalidPolicies), 412},
		{fmt.Errorf("%w: cluster: %w", global.ErrInvalidTenant, global.ErrNotFound), 412},
		{fmt.Errorf("%w: x", schema.ErrInvalidSchema), 422},
		{fmt.Errorf("%w: x", global.ErrUnavailable), 503},
		{fmt.Errorf("%w: x", wire.ErrServiceNotReady), 503},
		{&statusError{status: 404}, 404},
		{errors.New("anything else"), 500},
	} {
		if got := statusOf(tc.err); got != tc.want {
			t.Errorf("statusOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestRates(t *testing.T) {
	r := newRates(2)
	t0 := time.Unix(1000, 0)
	if m, b := r.rate("a", t0, 10, 100); m != 0 || b != 0 {
		t.Fatalf("first sample: %v %v, want 0", m, b)
	}
	if m, b := r.rate("a", t0.Add(2*time.Second), 30, 300); m != 10 || b != 100 {
		t.Fatalf("rate %v %v, want 10 100", m, b)
	}
	if m, _ := r.rate("a", t0.Add(3*time.Second), 5, 50); m != 0 {
		t.Fatalf("after a counter reset: %v, want 0", m)
	}
	r.rate("b", t0, 1, 1)
	r.rate("c", t0, 1, 1) // over the bound: everything is forgotten
	if m, _ := r.rate("a", t0.Add(4*time.Second), 100, 100); m != 0 {
		t.Fatalf("rate after the samples were dropped: %v, want 0", m)
	}
	if len(r.mu.samples) > 2 {
		t.Fatalf("%d samples kept, bound 2", len(r.mu.samples))
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.RequestTimeout = time.Millisecond
	if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate: %v", err)
	}
}

func TestBrokerConfig(t *testing.T) {
	c := BrokerConfig(broker.DefaultConfig("pulsar://localhost:6650"), broker.DefaultServiceConfig("r", "b", "pulsar://localhost:6650"))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Authorizer != nil || c.Authenticator != nil {
		t.Fatal("a broker without auth gave the admin API auth")
	}
}
