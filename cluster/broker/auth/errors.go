package auth

import "errors"

var (
	// ErrUnauthenticated: a provider refused the credentials. Every refusal
	// matches it; the broker answers Pulsar's AuthenticationError and the
	// REST API 401.
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrUnknownMethod: no enabled provider serves the method the client
	// asked for.
	ErrUnknownMethod = errors.New("auth: unknown authentication method")
	// ErrInvalidConfig: a Config field is missing, contradictory or out of
	// its bounds.
	ErrInvalidConfig = errors.New("auth: invalid config")
	// ErrInvalidKey: a key could not be read or parsed, or does not suit
	// the algorithm asked for.
	ErrInvalidKey = errors.New("auth: invalid key")
	// ErrTokenExpired: the token's exp is past (beyond the allowed clock
	// skew). It also matches ErrUnauthenticated; it is separate so that a
	// broker can ask a connected client for a fresh token (Pulsar's
	// AUTH_CHALLENGE) instead of treating it as an attack.
	ErrTokenExpired = errors.New("auth: token expired")
	// ErrTokenNotYetValid: the token's nbf is in the future (beyond the
	// allowed clock skew). It also matches ErrUnauthenticated.
	ErrTokenNotYetValid = errors.New("auth: token not valid yet")
)

// refusal is the error every provider returns when it refuses credentials:
// it reads as one sentence naming the method, matches ErrUnauthenticated
// and, when set, a more specific sentinel (kind), and unwraps to its cause.
type refusal struct {
	method string
	msg    string
	kind   error // optional: ErrTokenExpired, ErrTokenNotYetValid
	cause  error // optional
}

func (e *refusal) Error() string {
	s := "auth: " + e.method + " authentication refused: " + e.msg
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *refusal) Is(target error) bool {
	return target == ErrUnauthenticated || (e.kind != nil && target == e.kind)
}

func (e *refusal) Unwrap() error { return e.cause }

func refuse(method, msg string) error { return &refusal{method: method, msg: msg} }
