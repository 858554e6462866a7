package broker

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// Re-authentication, as Pulsar's authenticationRefreshCheckSeconds does
// it. A connection whose credentials expire (a token's exp) is checked
// every AuthRefreshInterval: once they have expired the broker sends
// AUTH_CHALLENGE, and the client answers AUTH_RESPONSE with fresh
// credentials (pulsar-client-go asks its authentication provider again).
// Fresh credentials of the same role keep the connection; credentials that
// are refused, of another role, or not sent by the next check close it.
// Credentials that do not expire (TLS certificates, basic) are never
// asked again, as on Pulsar.
type credentials struct {
	method    string       // the method the client authenticated with at CONNECT
	expiresAt atomic.Int64 // unix nanoseconds; 0: never
	// challenged is set when an AUTH_CHALLENGE is unanswered.
	challenged atomic.Bool
}

// noteCredentials records, at CONNECT or on an accepted AUTH_RESPONSE,
// when the connection's credentials expire.
func (c *conn) noteCredentials(a *auth.Authenticator, creds auth.Credentials) {
	var expires int64
	if t := a.ExpiresAt(c.creds.method, creds); !t.IsZero() {
		expires = t.UnixNano()
	}
	c.creds.expiresAt.Store(expires)
	c.creds.challenged.Store(false)
}

// reauthLoop checks the connection's credentials every
// AuthRefreshInterval until it closes.
func (c *conn) reauthLoop() {
	defer c.wg.Done()
	tick := c.srv.clock.NewTicker(c.srv.cfg.AuthRefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-tick.Chan():
			if !c.checkCredentials(now) {
				return
			}
		}
	}
}

// checkCredentials challenges expired credentials, or closes the
// connection when a challenge went unanswered since the last check. It
// reports whether the connection stays open.
func (c *conn) checkCredentials(now time.Time) bool {
	expires := c.creds.expiresAt.Load()
	if expires == 0 || now.UnixNano() < expires {
		return true
	}
	if c.creds.challenged.Load() {
		c.log.Info("closing connection: its credentials expired and were not refreshed",
			"role", c.role, "expired", time.Unix(0, expires).UTC())
		c.close()
		return false
	}
	c.creds.challenged.Store(true)
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_AUTH_CHALLENGE.Enum(), AuthChallenge: pb.CommandAuthChallenge_builder{
		ServerVersion:   &c.srv.cfg.ServerVersion,
		Challenge:       pb.AuthData_builder{AuthMethodName: &c.creds.method, AuthData: []byte("refresh")}.Build(),
		ProtocolVersion: ptr(c.protocolVersion),
	}.Build()}.Build())
	return true
}

// handleAuthResponse takes the client's fresh credentials. A refusal, or
// credentials of another role, closes the connection: its producers and
// consumers were authorized for the role it had.
func (c *conn) handleAuthResponse(resp *pb.CommandAuthResponse) error {
	a := c.srv.cfg.Auth
	if a == nil {
		return nil // nothing was asked
	}
	method := resp.GetResponse().GetAuthMethodName()
	creds := auth.Credentials{Data: resp.GetResponse().GetAuthData()}
	role, err := a.Authenticate(c.ctx, method, creds)
	switch {
	case err != nil:
		err = fmt.Errorf("refreshed credentials refused: %w", err)
	case method != c.creds.method || role != c.role:
		err = fmt.Errorf("refreshed credentials are for role %q by %q, not the connection's %q by %q", role, method, c.role, c.creds.method)
	}
	if err != nil {
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ERROR.Enum(), Error: pb.CommandError_builder{
			RequestId: ptr(^uint64(0)), Error: pb.ServerError_AuthenticationError.Enum(), Message: ptr(err.Error()),
		}.Build()}.Build())
		return c.closeAfterFlush(err)
	}
	c.noteCredentials(a, creds)
	return nil
}
