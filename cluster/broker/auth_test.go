package broker_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
)

// TestTokenAuthentication: a broker with token authentication admits a
// client presenting a token signed with its secret key, and refuses one
// without a token or with a token signed by another key, without
// affecting the admitted client.
func TestTokenAuthentication(t *testing.T) {
	key := auth.GenerateSecretKey()
	cfg := auth.DefaultConfig()
	cfg.Enabled = true
	cfg.Providers = []string{"org.apache.pulsar.broker.authentication.AuthenticationProviderToken"}
	cfg.Token.SecretKey = "data:;base64," + base64.StdEncoding.EncodeToString(key)
	authn, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Broker.Auth = authn })

	good, err := auth.CreateToken(key, "HS256", "alice", time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), Authentication: pulsar.NewAuthenticationToken(good),
		OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "auth-topic"})
	if err != nil {
		t.Fatalf("producer with a valid token: %v", err)
	}
	defer p.Close()

	other, err := auth.CreateToken(auth.GenerateSecretKey(), "HS256", "mallory", time.Time{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]pulsar.Authentication{"no token": nil, "foreign key": pulsar.NewAuthenticationToken(other)} {
		bad, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), Authentication: a,
			OperationTimeout: 3 * time.Second, ConnectionTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.CreateProducer(pulsar.ProducerOptions{Topic: "auth-topic", SendTimeout: time.Second})
		bad.Close()
		if err == nil {
			t.Fatalf("%s: producer created without valid credentials", name)
		}
	}
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("still served")}); err != nil {
		t.Fatalf("the authenticated producer stopped working: %v", err)
	}
}
