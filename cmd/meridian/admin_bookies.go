package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
)

// `meridian admin bookies`: the region's bookies and their repair
// (cluster/autorecovery), over cluster/admin's bookies.go endpoints.

func (a *adminCLI) bookiesCommand() *cobra.Command {
	list := a.verb("list", "List the bookies: state (writable, read-only, decommissioning, lost, unregistered), rack, ledgers", 0,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, _ []string) error {
			var bs []autorecovery.BookieInfo
			if err := a.bookiesGet(ctx, "list", &bs); err != nil {
				return err
			}
			rows := make([][]string, 0, len(bs))
			for _, b := range bs {
				rows = append(rows, []string{b.ID, b.State, orDash(b.Rack), orDash(b.Address), strconv.Itoa(b.Ledgers), strconv.Itoa(b.UnderReplicated)})
			}
			return p.table(nonNil(bs), []string{"ID", "STATE", "RACK", "ADDRESS", "LEDGERS", "UNDER-REPLICATED"}, rows)
		})
	under := a.verb("under-replicated", "List the under-replicated ledgers: the bookies to replace, why, who repairs them, the last error", 0,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, _ []string) error {
			var ls []autorecovery.UnderReplicatedLedger
			if err := a.bookiesGet(ctx, "under-replicated", &ls); err != nil {
				return err
			}
			rows := make([][]string, 0, len(ls))
			for _, l := range ls {
				lastErr := orDash(l.LastError)
				if l.EntryLost {
					lastErr = "ENTRY LOST: " + lastErr
				}
				rows = append(rows, []string{strconv.FormatInt(l.Ledger, 10), orDash(l.State), joinOrNone(l.Bookies),
					time.UnixMilli(l.Since).UTC().Format(time.RFC3339), orDash(l.Worker), l.Reason, lastErr})
			}
			return p.table(nonNil(ls), []string{"LEDGER", "STATE", "REPLACE", "SINCE", "WORKER", "REASON", "LAST-ERROR"}, rows)
		})
	var wait time.Duration
	decommission := a.verb("decommission BOOKIE", "Drain a bookie: read-only, everything it holds re-replicated; says when it can be removed", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			c, err := a.restClient()
			if err != nil {
				return err
			}
			var d autorecovery.Decommission
			path := bookiePath(args[0], "decommission")
			if err := c.PostWithObjWithContext(ctx, path, nil, &d); err != nil {
				return err
			}
			for deadline := time.Now().Add(wait); !d.Done && time.Now().Before(deadline); {
				select {
				case <-time.After(2 * time.Second):
				case <-ctx.Done():
					return ctx.Err()
				}
				if err := c.GetWithContext(ctx, path, &d); err != nil {
					return err
				}
			}
			return p.scalar(d.Message, d)
		})
	decommission.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the drain to finish (0: start it and return)")
	status := a.verb("decommission-status BOOKIE", "Show a decommission's progress", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			var d autorecovery.Decommission
			if err := a.bookiesGet(ctx, url.PathEscape(args[0])+"/decommission", &d); err != nil {
				return err
			}
			return p.scalar(d.Message, d)
		})
	lost := a.verb("mark-lost BOOKIE", "Declare a bookie gone for good: its ledgers are re-replicated now, without the recovery delay", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			c, err := a.restClient()
			if err != nil {
				return err
			}
			return c.PostWithContext(ctx, bookiePath(args[0], "lost"), nil)
		})
	clear := a.verb("clear-state BOOKIE", "Cancel a decommission or a lost mark (ledgers already moved stay where they are)", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			c, err := a.restClient()
			if err != nil {
				return err
			}
			return c.DeleteWithContext(ctx, bookiePath(args[0], "state"))
		})
	// pulsar-admin's own two listings, in BookKeeper's JSON as Pulsar
	// answers them.
	listBookies := a.rawVerb("list-bookies", "List the registered bookies, as pulsar-admin's bookies list-bookies", "/admin/v2/bookies/all")
	racks := a.rawVerb("racks-placement", "Show the bookies' racks, as pulsar-admin's bookies racks-placement", "/admin/v2/bookies/racks-info")
	verbs := append([]*cobra.Command{list, under, decommission, status, lost, clear, a.autoRecoveryCommand(), listBookies, racks},
		a.bookieRackCommands()...)
	return group("bookies", "The region's bookies and their auto-recovery", verbs...)
}

// bookieRackCommands are pulsar-admin's bookies set-, get- and
// delete-bookie-rack, flags and all: a bookie's group (which namespaces'
// bookie affinity groups name) and rack, by its address host:port.
func (a *adminCLI) bookieRackCommands() []*cobra.Command {
	var bookie, rackName, hostname, groupName string
	path := func() string { return "/admin/v2/bookies/racks-info/" + url.PathEscape(bookie) }
	set := a.verb("set-bookie-rack", "Put a bookie in a group (for namespaces' bookie affinity) and on a rack", 0,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, _ []string) error {
			c, err := a.restClient()
			if err != nil {
				return err
			}
			return c.PostWithContext(ctx, path()+"?group="+url.QueryEscape(groupName), autorecovery.BookieRack{Rack: rackName, Hostname: hostname})
		})
	set.Flags().StringVar(&rackName, "rack", "", "the bookie's rack (required)")
	set.Flags().StringVar(&hostname, "hostname", "", "the bookie's hostname")
	set.Flags().StringVar(&groupName, "group", "default", "the bookie's group")
	withShorthand(set.Flags(), "rack", "r")
	withShorthand(set.Flags(), "hostname", "hn")
	withShorthand(set.Flags(), "group", "g")
	if err := set.MarkFlagRequired("rack"); err != nil {
		panic(err) // the flag is defined just above
	}
	get := a.verb("get-bookie-rack", "Show a bookie's rack and hostname", 0,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, _ []string) error {
			body, err := a.rawGet(ctx, path(), nil)
			if err != nil {
				return err
			}
			return p.raw(body)
		})
	del := a.verb("delete-bookie-rack", "Put a bookie back in group default, on the rack it registered with", 0,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, _ []string) error {
			c, err := a.restClient()
			if err != nil {
				return err
			}
			return c.DeleteWithContext(ctx, path())
		})
	cmds := []*cobra.Command{set, get, del}
	for _, cmd := range cmds {
		cmd.Flags().StringVar(&bookie, "bookie", "", "the bookie's address, host:port (required)")
		withShorthand(cmd.Flags(), "bookie", "b")
		if err := cmd.MarkFlagRequired("bookie"); err != nil {
			panic(err) // the flag is defined just above
		}
	}
	return cmds
}

// autoRecoveryCommand is `meridian admin bookies autorecovery
// enable|disable|status`, BookKeeper's `autorecovery -enable|-disable`.
func (a *adminCLI) autoRecoveryCommand() *cobra.Command {
	set := func(verb, short string) *cobra.Command {
		return a.verb(verb, short, 0, func(ctx context.Context, _ pulsaradmin.Client, _ *printer, _ []string) error {
			c, err := a.restClient()
			if err != nil {
				return err
			}
			return c.PostWithContext(ctx, "/admin/v2/bookies/autorecovery/"+verb, nil)
		})
	}
	status := a.verb("status", "Say whether auto-recovery is enabled", 0, func(ctx context.Context, _ pulsaradmin.Client, p *printer, _ []string) error {
		var st struct {
			Enabled bool `json:"enabled"`
		}
		if err := a.bookiesGet(ctx, "autorecovery", &st); err != nil {
			return err
		}
		text := "enabled"
		if !st.Enabled {
			text = "disabled"
		}
		return p.scalar(text, st)
	})
	return group("autorecovery", "Pause or resume the region's auto-recovery (during maintenance)",
		set("enable", "Resume auto-recovery"), set("disable", "Pause auto-recovery: nothing is marked or copied until enabled"), status)
}

// bookiesGet GETs /admin/v2/bookies/<rest> into v.
func (a *adminCLI) bookiesGet(ctx context.Context, rest string, v any) error {
	c, err := a.restClient()
	if err != nil {
		return err
	}
	return c.GetWithContext(ctx, "/admin/v2/bookies/"+rest, v)
}

func bookiePath(id, resource string) string {
	return "/admin/v2/bookies/" + url.PathEscape(id) + "/" + resource
}

// autoRecoveryFlags are a server command's auto-recovery settings
// (autorecovery.Config).
type autoRecoveryFlags struct {
	enabled bool
	cfg     autorecovery.Config
}

func addAutoRecoveryFlags(f *pflag.FlagSet) *autoRecoveryFlags {
	ar := &autoRecoveryFlags{enabled: true, cfg: autorecovery.DefaultConfig("", "")}
	f.BoolVar(&ar.enabled, "autorecovery", true, "run auto-recovery in this process: a candidate for the region's auditor, and replication workers that re-replicate the ledgers of lost bookies")
	f.DurationVar(&ar.cfg.LostBookieRecoveryDelay, "lost-bookie-recovery-delay", ar.cfg.LostBookieRecoveryDelay, "how long a bookie must be gone before its ledgers are re-replicated (BookKeeper's lostBookieRecoveryDelay); longer than a restart")
	f.Int64Var(&ar.cfg.RateBytesPerSecond, "autorecovery-rate", ar.cfg.RateBytesPerSecond, "bytes per second this process's replication workers copy at most, together (> 0)")
	f.IntVar(&ar.cfg.Workers, "autorecovery-workers", ar.cfg.Workers, "ledgers this process repairs at once (0: auditor only)")
	f.DurationVar(&ar.cfg.AuditInterval, "autorecovery-audit-interval", ar.cfg.AuditInterval, "how often the auditor compares every ledger with the live bookies even when none came or went")
	f.DurationVar(&ar.cfg.CheckInterval, "autorecovery-check-interval", ar.cfg.CheckInterval, "how often the auditor reads sampled entries from every copy (0: never)")
	f.DurationVar(&ar.cfg.RetryInterval, "autorecovery-retry-interval", ar.cfg.RetryInterval, "how long a worker leaves a ledger it could not finish (an open ledger whose writer still holds the bookie, no spare bookie) before it tries again")
	f.Float64Var(&ar.cfg.CheckSampleRate, "autorecovery-check-sample", ar.cfg.CheckSampleRate, "fraction of each ledger's entries a periodic check reads, (0, 1]")
	return ar
}

// config returns the configuration to run, or nil with --autorecovery=false.
// Region and WorkerID are the node's to set; everything else is checked
// here, so that a bad flag fails before anything starts.
func (ar *autoRecoveryFlags) config() (*autorecovery.Config, error) {
	if !ar.enabled {
		return nil, nil
	}
	cfg := ar.cfg
	if cfg.RateBytesPerSecond <= 0 {
		return nil, fmt.Errorf("--autorecovery-rate %d: the re-replication rate must be a positive number of bytes per second (to stop copying, run 'meridian admin bookies autorecovery disable')", cfg.RateBytesPerSecond)
	}
	probe := cfg
	probe.Region, probe.WorkerID = "r", "w"
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("auto-recovery flags: %s", strings.TrimPrefix(err.Error(), autorecovery.ErrInvalidConfig.Error()+": "))
	}
	return &cfg, nil
}
