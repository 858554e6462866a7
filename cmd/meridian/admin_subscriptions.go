package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The verbs of `meridian admin topics` on one subscription of a topic (as
// pulsaradmin's Subscriptions does them): create, delete, skip, clear,
// reset, expire and peek.

// subVerb is a verb on one subscription of one topic (--subscription/-s).
func (a *adminCLI) subVerb(use, short string, fn func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName, sub string) error) (*cobra.Command, *string) {
	sub := new(string)
	cmd := a.topicVerb(use, short, func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		if *sub == "" {
			return errors.New("give --subscription (-s)")
		}
		return fn(ctx, c, p, t, *sub)
	})
	cmd.Flags().StringVarP(sub, "subscription", "s", "", "subscription name (required)")
	return cmd, sub
}

func (a *adminCLI) createSubCommand() *cobra.Command {
	var at string
	cmd, _ := a.subVerb("create-subscription TOPIC", "Create a subscription at a position", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		id, err := messageIDArg(at)
		if err != nil {
			return fmt.Errorf("--messageId: %w", err)
		}
		return c.Subscriptions().CreateWithContext(ctx, t, sub, id)
	})
	cmd.Flags().StringVarP(&at, "messageId", "m", "latest", "where it starts: latest, earliest or ledger:entry")
	return cmd
}

func (a *adminCLI) unsubscribeCommand() *cobra.Command {
	var force bool
	cmd, _ := a.subVerb("unsubscribe TOPIC", "Delete a subscription (-f: even with consumers connected)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		if force {
			return c.Subscriptions().ForceDeleteWithContext(ctx, t, sub)
		}
		return c.Subscriptions().DeleteWithContext(ctx, t, sub)
	})
	cmd.Flags().BoolVarP(&force, "force", "f", false, "disconnect its consumers and delete it")
	return cmd
}

func (a *adminCLI) skipCommand() *cobra.Command {
	var n int64
	cmd, _ := a.subVerb("skip TOPIC", "Skip (acknowledge) the next N messages of a subscription", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		if n <= 0 {
			return errors.New("give --count (-n) of 1 or more")
		}
		return c.Subscriptions().SkipMessagesWithContext(ctx, t, sub, n)
	})
	cmd.Flags().Int64VarP(&n, "count", "n", 0, "number of messages to skip (required)")
	return cmd
}

func (a *adminCLI) clearBacklogCommand() *cobra.Command {
	cmd, _ := a.subVerb("clear-backlog TOPIC", "Skip every message of a subscription's backlog", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		return c.Subscriptions().ClearBacklogWithContext(ctx, t, sub)
	})
	return cmd
}

func (a *adminCLI) resetCursorCommand() *cobra.Command {
	var ago, at string
	cmd, _ := a.subVerb("reset-cursor TOPIC", "Move a subscription back or forward, to a time (-t) or a message (-m)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		switch {
		case (ago == "") == (at == ""):
			return errors.New("give exactly one of --time (-t, e.g. 1h ago) and --messageId (-m)")
		case at != "":
			id, err := messageIDArg(at)
			if err != nil {
				return fmt.Errorf("--messageId: %w", err)
			}
			return c.Subscriptions().ResetCursorToMessageIDWithContext(ctx, t, sub, id)
		}
		secs, err := parseSeconds(ago)
		if err != nil || secs < 0 {
			return fmt.Errorf("--time %q: want how long ago, e.g. 100m, 3h, 2d", ago)
		}
		ts := time.Now().Add(-time.Duration(secs) * time.Second).UnixMilli()
		return c.Subscriptions().ResetCursorToTimestampWithContext(ctx, t, sub, ts)
	})
	cmd.Flags().StringVarP(&ago, "time", "t", "", "how far back from now: seconds, or a number with s, m, h, d or w")
	cmd.Flags().StringVarP(&at, "messageId", "m", "", "the message to reset to: ledger:entry, earliest or latest")
	return cmd
}

func (a *adminCLI) expireCommand() *cobra.Command {
	var (
		expire string
		all    bool
		sub    string
	)
	cmd := a.topicVerb("expire-messages TOPIC", "Acknowledge a subscription's messages older than --expireTime", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		secs, err := parseSeconds(expire)
		if expire == "" || err != nil || secs < 0 {
			return fmt.Errorf("--expireTime %q: want an age, e.g. 60 or 1h", expire)
		}
		switch {
		case all && sub != "":
			return errors.New("give --subscription or --all-subscriptions, not both")
		case all:
			return c.Subscriptions().ExpireAllMessagesWithContext(ctx, t, secs)
		case sub == "":
			return errors.New("give --subscription (-s) or --all-subscriptions")
		}
		return c.Subscriptions().ExpireMessagesWithContext(ctx, t, sub, secs)
	})
	f := cmd.Flags()
	f.StringVarP(&sub, "subscription", "s", "", "subscription name")
	f.BoolVar(&all, "all-subscriptions", false, "expire on every subscription of the topic")
	f.StringVarP(&expire, "expireTime", "t", "", "messages older than this expire: seconds, or a number with s, m, h, d or w (required)")
	return cmd
}

func (a *adminCLI) peekCommand() *cobra.Command {
	var n int
	cmd, _ := a.subVerb("peek-messages TOPIC", "Show the next N messages of a subscription without acknowledging them", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName, sub string) error {
		if n <= 0 {
			return errors.New("give --count (-n) of 1 or more")
		}
		msgs, err := c.Subscriptions().PeekMessagesWithContext(ctx, t, sub, n)
		if err != nil {
			return err
		}
		return p.messages(msgs)
	})
	cmd.Flags().IntVarP(&n, "count", "n", 1, "number of messages")
	return cmd
}

// replicatedSubscriptionPath is the endpoint of a subscription's
// replicated status (pulsaradmin has no call for it).
func replicatedSubscriptionPath(t utils.TopicName, sub string) string {
	return topicPath(t, "subscription/"+url.PathEscape(sub)+"/replicatedSubscriptionStatus")
}

func (a *adminCLI) setReplicatedSubscriptionCommand() *cobra.Command {
	var f switchFlags
	cmd, _ := a.subVerb("set-replicated-subscription-status TOPIC", "Make a subscription replicated (--enable): its acknowledgements reach the other regions",
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
			on, err := f.on()
			if err != nil {
				return err
			}
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			return rc.PostWithContext(ctx, replicatedSubscriptionPath(t, sub), on)
		})
	f.register(cmd, "the subscription's replication")
	return cmd
}

func (a *adminCLI) getReplicatedSubscriptionCommand() *cobra.Command {
	cmd, _ := a.subVerb("get-replicated-subscription-status TOPIC", "Show whether a subscription is replicated",
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName, sub string) error {
			body, err := a.rawGet(ctx, replicatedSubscriptionPath(t, sub), nil)
			if err != nil {
				return err
			}
			return p.raw(body)
		})
	return cmd
}
