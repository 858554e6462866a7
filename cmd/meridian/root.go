package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	root.AddCommand(newProbeCommand())
	refuseUnknown(root)
	return root
}

// Mistakes on the command line fail, as pulsar-admin's do: an unknown
// command or flag is an error (main exits 1) that suggests the nearest
// names, never a help text and exit 0, so that a script with a typo stops.
// A group of commands run alone prints its help.

// refuseUnknown makes every group of commands in cmd's tree refuse an
// unknown subcommand with suggestions, and every command an unknown flag.
// cobra refuses an unknown subcommand only at the root: a group without a
// RunE of its own answers any argument with its help and no error.
func refuseUnknown(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(suggestFlag)
	walk(cmd, func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args, c.SuggestionsMinimumDistance = knownSubcommand, 2
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
	})
}

// knownSubcommand is a group's argument check: any argument names a
// subcommand the group does not have (it would have run otherwise).
func knownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		return fmt.Errorf("%s; did you mean %s?", msg, strings.Join(near, " or "))
	}
	return fmt.Errorf("%s; '%s --help' lists its commands", msg, cmd.CommandPath())
}

// suggestFlag adds to pflag's error about an unknown flag the flags of
// cmd whose names are near it.
func suggestFlag(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var given string
	switch {
	case strings.HasPrefix(msg, "unknown flag: "):
		given = strings.TrimPrefix(msg, "unknown flag: ")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		_, given, _ = strings.Cut(msg, " in ")
	default:
		return err
	}
	given = strings.TrimLeft(given, "-")
	var near []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		for _, name := range append([]string{f.Name}, multiLetterShorthands(f)...) {
			if editDistance(strings.ToLower(given), strings.ToLower(name)) <= 2 {
				dashes := "--"
				if name != f.Name {
					dashes = "-"
				}
				near = append(near, dashes+name)
			}
		}
	})
	if len(near) == 0 {
		return fmt.Errorf("%w; '%s --help' lists its flags", err, cmd.CommandPath())
	}
	return fmt.Errorf("%w; did you mean %s?", err, strings.Join(near, " or "))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Pulsar's tools name many flags with a short form of more than one
// letter (pulsar-admin's -ttl, -lt, -gpb; pulsar-client's -dr). pflag has
// one-letter shorthands only, and reads "-lt" as -l and -t; so such a flag
// carries its Pulsar short forms in an annotation, and main rewrites each
// of them to the long flag before cobra parses the command line.

// multiLetterShorthandKey is the annotation that holds a flag's short
// forms of more than one letter, without their dash.
const multiLetterShorthandKey = "meridian/multi-letter-shorthand"

// withShorthand gives the flag named name in fs a Pulsar short form of
// more than one letter ("lt" for -lt).
func withShorthand(fs *pflag.FlagSet, name, short string) {
	if fs.Lookup(name) == nil {
		panic("withShorthand: no flag --" + name) // a programming error, caught by any test of the command
	}
	if err := fs.SetAnnotation(name, multiLetterShorthandKey, append(multiLetterShorthands(fs.Lookup(name)), short)); err != nil {
		panic(err)
	}
}

func multiLetterShorthands(f *pflag.Flag) []string { return f.Annotations[multiLetterShorthandKey] }

// expandMultiLetterShorthands returns args with every multi-letter short
// flag of the command that args run written as its long flag.
func expandMultiLetterShorthands(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return args // cobra reports the unknown command
	}
	cmd.InitDefaultHelpFlag()
	cmd.InheritedFlags() // merges the persistent flags of cmd's parents into cmd.Flags()
	long := map[string]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		for _, short := range multiLetterShorthands(f) {
			long["-"+short] = "--" + f.Name
		}
	})
	if len(long) == 0 {
		return args
	}
	return expandShorthands(cmd, args, long)
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

// expandShorthands returns args with every multi-letter short flag in
// long ("-lt": "--limitTime") written as its long flag. An
// argument that is the value of the flag before it (in `-m -dr` it is the
// message) and every argument after "--" are left as they are; cmd's flags
// tell which flags take a value, as pflag reads them.
func expandShorthands(cmd *cobra.Command, args []string, long map[string]string) []string {
	flags := cmd.Flags()
	// valueFollows reports whether the flag argument arg takes the next
	// argument as its value.
	valueFollows := func(arg string) bool {
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			if strings.Contains(name, "=") {
				return false
			}
			f := flags.Lookup(name)
			return f != nil && f.NoOptDefVal == ""
		}
		// A group of shorthands (-xvf): the first that takes a value takes
		// the rest of the group, or the next argument when it ends the group.
		for i := 1; i < len(arg); i++ {
			f := flags.ShorthandLookup(arg[i : i+1])
			if f == nil {
				return false // pflag reports the unknown flag
			}
			if f.NoOptDefVal == "" {
				return i == len(arg)-1
			}
		}
		return false
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(out, args[i:]...)
		}
		if l, ok := long[arg]; ok {
			out = append(out, l)
			continue
		}
		out = append(out, arg)
		if len(arg) > 1 && arg[0] == '-' && valueFollows(arg) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
