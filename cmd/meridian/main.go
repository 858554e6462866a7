// Command meridian is the one Meridian binary: every component (etcd, bookie,
// broker, standalone, dev) and every client tool is a subcommand. Each
// subcommand is thin wiring over the packages that do the work.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "meridian:", err)
		os.Exit(1)
	}
}
