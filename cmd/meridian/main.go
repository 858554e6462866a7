// Command meridian is the one Meridian binary: every server (etcd, bookie,
// broker, replicator, standalone, dev) and every client tool (admin,
// produce, consume, perf, token) is a subcommand. Each subcommand is thin
// wiring over the packages that do the work.
//
// root.go holds the command tree, which main.go runs, and what makes the
// command line Pulsar's: multi-letter short flags, and an unknown command
// or flag refused with a suggestion. Each server command
// has its file, named after it; all but etcd.go configure cluster/node, and
// config.go holds what they share (the config file, the TLS and log flags,
// running a node). credentials.go holds the authentication and TLS flags of
// the tools that connect to a region. client.go is produce and consume, with
// hops.go's hop trail for consume --hops; perf.go and perftrace.go are perf;
// token.go is token; pulsarcli.go the container image's command lines,
// Pulsar's `bin/pulsar standalone` among them; envflags.go the flags from
// the environment; admin.go and the admin_*.go files are admin, and
// admin.go's opening comment says which file holds which group of verbs.
package main

import (
	"fmt"
	"os"
)

func main() {
	args, err := commandLine(os.Args[0], os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "meridian:", err)
		os.Exit(2)
	}
	root := newRootCommand()
	root.SetArgs(expandMultiLetterShorthands(root, args))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "meridian:", err)
		os.Exit(1)
	}
}
