package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version and revision are set at link time (deploy/build-image.sh:
// -ldflags "-X main.version=v1.2.3 -X main.revision=<commit>"); otherwise
// they are read from the binary's build information: the module version
// (a `go install ...@v1.2.3`) and the VCS revision that `go build` stamps
// in a git checkout.
var version, revision = "", ""

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "meridian",
		Short:         "Meridian: a geo-replicated messaging plane that speaks the Pulsar protocol",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A command with a PersistentPreRunE of its own (admin) calls
		// applyEnv first itself: cobra runs only the nearest one.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd) },
	}
	root.AddCommand(newVersionCommand())
	root.AddCommand(newEtcdCommand())
	root.AddCommand(newBookieCommand())
	root.AddCommand(newBrokerCommand())
	root.AddCommand(newReplicatorCommand())
	root.AddCommand(newStandaloneCommand())
	root.AddCommand(newDevCommand())
	root.AddCommand(newTokenCommand())
	root.AddCommand(newAdminCommand())
	root.AddCommand(newPerfCommand())
	root.AddCommand(newDrillCommand())
	root.AddCommand(newProduceCommand())
	root.AddCommand(newConsumeCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Meridian's version, the commit it was built from, and the Go toolchain",
		Long: `Print one line: the version, the VCS revision (with "+dirty" when the tree
had uncommitted changes, and the commit's time), the Go version and the platform:
  meridian v1.2.3 (revision 9fd97905e1c2, 2026-12-05T07:00:00Z; go1.26.8 linux/amd64)
A binary built by 'go run', or outside a git checkout without
deploy/build-image.sh's -ldflags, says "(devel)" and "revision unknown".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine(info, version, revision))
			return err
		},
	}
}

// versionLine is `meridian version`'s line, from the build information
// (nil when the binary has none) and the link-time values, which win.
func versionLine(info *debug.BuildInfo, ldVersion, ldRevision string) string {
	v, rev, when, dirty := ldVersion, ldRevision, "", false
	if info != nil {
		if v == "" && info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	r := "revision unknown"
	if rev != "" {
		hash, suffix, _ := strings.Cut(rev, "+") // build-image.sh's <commit>+dirty
		r = "revision " + hash[:min(len(hash), 12)]
		if dirty || suffix == "dirty" {
			r += "+dirty"
		}
		if when != "" {
			r += ", " + when
		}
	}
	return fmt.Sprintf("meridian %s (%s; %s %s/%s)", v, r, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
