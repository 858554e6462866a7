package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
)

// Every flag of every command can come from the environment, by one rule:
// --some-flag is MERIDIAN_FLAG_SOME_FLAG (upper case, "-" as "_"). A flag
// given on the command line wins over its variable; a variable wins over
// a --config file and Pulsar's variables (config.go), so the precedence is
// flag, MERIDIAN_FLAG_, Pulsar's variables, --config file, default. The
// values parse as the flags do, onto the same Config fields: there is no
// second source of truth.
//
// The prefix is not MERIDIAN_: Kubernetes injects MERIDIAN_PORT,
// MERIDIAN_SERVICE_HOST and more into every pod of a namespace that has a
// Service named meridian (its service links), and MERIDIAN_ is also the
// prefix of the test bed's own settings (MERIDIAN_E2E_SEED, ...) and of
// MERIDIAN_FAILPOINTS. A variable with the prefix that names no flag of any
// command gets a warning naming it (a typo, most likely); one that names
// another command's flag is left alone, so that one environment can serve
// several commands; service-link variables (a Service named meridian-flag)
// are no settings and are skipped.

// flagEnvPrefix begins the variable of every flag.
const flagEnvPrefix = "MERIDIAN_FLAG_"

// flagEnvName is the variable that sets the flag named name.
func flagEnvName(name string) string {
	return flagEnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyFlagEnv sets each flag of cmd that the command line did not set
// from its variable in environ (os.Environ's form). A value that does not
// parse is an error naming the variable and the flag. It returns the
// variables with the prefix that name no flag of any command under root.
func applyFlagEnv(cmd *cobra.Command, environ []string) (unknown []string, err error) {
	known := map[string]bool{}
	walk(cmd.Root(), func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known[flagEnvName(f.Name)] = true })
		}
	})
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, flagEnvPrefix) || node.IsServiceLink(name) {
			continue
		}
		vars[name] = value
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	var errs []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		value, ok := vars[flagEnvName(f.Name)]
		if !ok || f.Changed || f.Name == "help" {
			return
		}
		if err := cmd.Flags().Set(f.Name, value); err != nil {
			errs = append(errs, fmt.Sprintf("environment variable %s=%s (--%s): %v", flagEnvName(f.Name), value, f.Name, err))
		}
	})
	if len(errs) > 0 {
		return unknown, fmt.Errorf("%s; fix or unset it", strings.Join(errs, "; "))
	}
	return unknown, nil
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// applyEnv is every command's first step (the root's PersistentPreRunE,
// which admin's calls too): the flags from the environment, and a warning
// for each unknown variable, logged as the command logs.
func applyEnv(cmd *cobra.Command) error {
	unknown, err := applyFlagEnv(cmd, os.Environ())
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		log := commandLogger(cmd)
		for _, name := range unknown {
			log.Warn("environment variable ignored: it names no flag of any meridian command (--some-flag is "+flagEnvPrefix+"SOME_FLAG)", "variable", name)
		}
	}
	return nil
}

// commandLogger writes to cmd's stderr at its --log-level in its
// --log-format, where it has them (already set from the environment).
func commandLogger(cmd *cobra.Command) *slog.Logger {
	format, level := telemetry.LogText, slog.LevelInfo
	if f := cmd.Flags().Lookup("log-format"); f != nil {
		format.UnmarshalText([]byte(f.Value.String()))
	}
	if f := cmd.Flags().Lookup("log-level"); f != nil {
		level.UnmarshalText([]byte(f.Value.String()))
	}
	return telemetry.NewLogger(cmd.ErrOrStderr(), format, level)
}
