package main

import (
	"errors"
	"fmt"
	"strings"
)

// checkCredentials checks the authentication flags `meridian admin` and
// `meridian perf` share: a client certificate comes with its key, and at
// most one way to authenticate is given. methods maps each way, as the
// error names it, to whether its flags are set.
func checkCredentials(certFile, keyFile string, methods []authMethod) error {
	if (certFile == "") != (keyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together: give both or neither")
	}
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

// authMethod is one way to authenticate, for checkCredentials.
type authMethod struct {
	name string
	set  bool
}
