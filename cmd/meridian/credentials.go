package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// credentials are the authentication and TLS flags that `meridian admin`
// and `meridian perf` share, with pulsar-admin's names.
type credentials struct {
	token     string
	tokenFile string
	trustCert string
	insecure  bool
	certFile  string
	keyFile   string
}

// register adds the flags to cmd and its subcommands.
func (c *credentials) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&c.token, "token", "", "authenticate with this JWT token")
	pf.StringVar(&c.tokenFile, "token-file", "", "authenticate with the JWT token in this file")
	pf.StringVar(&c.trustCert, "tls-trust-cert-path", "", "PEM file of the CA certificates that sign the broker's certificate")
	pf.BoolVar(&c.insecure, "tls-allow-insecure", false, "accept any broker certificate (no verification: for tests only)")
	pf.StringVar(&c.certFile, "tls-cert-file", "", "client certificate (PEM) for TLS authentication; with --tls-key-file")
	pf.StringVar(&c.keyFile, "tls-key-file", "", "client private key (PEM) for TLS authentication; with --tls-cert-file")
}

// authMethod is one way to authenticate, as an error names it, and
// whether its flags are set.
type authMethod struct {
	name string
	set  bool
}

// check makes sure a client certificate comes with its key and that at
// most one way to authenticate is given; others are the ways a command
// offers beyond these flags (admin's --auth-plugin).
func (c *credentials) check(others ...authMethod) error {
	if (c.certFile == "") != (c.keyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together: give both or neither")
	}
	methods := append([]authMethod{{"--token", c.token != ""}, {"--token-file", c.tokenFile != ""}}, others...)
	methods = append(methods, authMethod{"--tls-cert-file with --tls-key-file", c.certFile != ""})
	var names []string
	given := 0
	for _, m := range methods {
		names = append(names, m.name)
		if m.set {
			given++
		}
	}
	if given > 1 {
		last := len(names) - 1
		return fmt.Errorf("give one way to authenticate: %s, or %s", strings.Join(names[:last], ", "), names[last])
	}
	return nil
}
