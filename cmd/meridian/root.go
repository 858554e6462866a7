package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// it is read from the module's build information.
var version = ""

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "meridian",
		Short:         "Meridian: a geo-replicated messaging plane that speaks the Pulsar protocol",
		SilenceUsage:  true,
		SilenceErrors: true,
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
	root.AddCommand(newProduceCommand())
	root.AddCommand(newConsumeCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Meridian's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "meridian %s (%s, %s/%s)\n",
				buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
