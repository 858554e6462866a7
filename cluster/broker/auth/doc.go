// Package auth authenticates Meridian's clients the way Apache Pulsar does,
// so that a Pulsar user keeps their tokens, certificates and htpasswd files:
// the binary-protocol broker calls it at CONNECT, and the admin REST API on
// every request.
//
// # Methods
//
// A Provider answers for one authentication method, named as Pulsar clients
// send it in CONNECT's auth_method_name:
//
//   - "token" (Token): a JWT signed with a shared secret (HS256/384/512) or a
//     key pair (RS*, PS*, ES*), Pulsar's AuthenticationProviderToken. Keys are
//     configured as broker.conf gives them (data:;base64,…, file:///…, or a
//     path) and may be raw/DER, as `pulsar tokens` writes them, or PEM.
//   - "tls" (TLS): the Subject CommonName of the peer's verified client
//     certificate, Pulsar's AuthenticationProviderTls.
//   - "basic" (Basic): user:password checked against an htpasswd file of
//     $apr1$ or bcrypt hashes, Pulsar's AuthenticationProviderBasic.
//
// An Authenticator holds the enabled providers by method. Every refusal
// satisfies errors.Is(err, ErrUnauthenticated), which the broker maps to
// Pulsar's AuthenticationError; a method no provider serves is
// ErrUnknownMethod.
//
// # What the verifier trusts
//
// The token's header never chooses the key or the algorithm family: the
// configured key does. A provider with a secret key accepts only HS*; one
// with an RSA public key only RS* and PS*; one with an EC key only the ES*
// of that key's curve. "alg: none" is always refused. This is what defeats
// the classic confusion attack of an HS256 token signed with the bytes of
// the broker's public RSA key.
//
// Providers are immutable once built and safe for concurrent use; they read
// their key or password files once, in their constructor. Time comes from an
// injected clock so that expiry is testable without sleeping.
//
// Authorization (superuser roles, tenant admins, namespace permissions) is
// not here: this package only says who a client is.
package auth
