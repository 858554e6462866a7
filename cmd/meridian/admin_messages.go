package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The verbs of `meridian admin topics` that read stored messages without
// a subscription: get-message-by-id and get-message-id (the id of the
// message at a time). peek-messages reads a subscription's, in
// admin_subscriptions.go; they all print messages as messages does.

// messageJSON is a message as --output json prints it.
type messageJSON struct {
	MessageID  string            `json:"messageId"`
	Topic      string            `json:"topic,omitempty"`
	Properties map[string]string `json:"properties"`
	Payload    []byte            `json:"payload"`
}

// messages prints msgs as pulsar-admin does (each message's id, its
// properties and a hex dump of its payload), or as a JSON array.
func (p *printer) messages(msgs []*utils.Message) error {
	if p.json {
		out := make([]messageJSON, 0, len(msgs))
		for _, m := range msgs {
			out = append(out, messageJSON{MessageID: m.MessageID.String(), Topic: m.Topic, Properties: m.Properties, Payload: m.Payload})
		}
		return p.jsonValue(out)
	}
	for i, m := range msgs {
		props := make([]string, 0, len(m.Properties))
		for _, k := range sortedKeys(m.Properties) {
			props = append(props, k+"="+m.Properties[k])
		}
		if _, err := fmt.Fprintf(p.w, "Batch Message ID: %s\nProperties: %s\n%s", m.MessageID.String(),
			strings.Join(props, ", "), hex.Dump(m.Payload)); err != nil {
			return err
		}
		if i < len(msgs)-1 {
			fmt.Fprintln(p.w)
		}
	}
	return nil
}

func (a *adminCLI) getMessageByIDCommand() *cobra.Command {
	var ledger, entry int64
	cmd := a.topicVerb("get-message-by-id TOPIC", "Show the message stored at a ledger and entry (every message of a batch)",
		func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
			if ledger < 0 || entry < 0 {
				return errors.New("give --ledgerId (-l) and --entryId (-e)")
			}
			msgs, err := c.Subscriptions().GetMessagesByIDWithContext(ctx, t, ledger, entry)
			if err != nil {
				return err
			}
			return p.messages(msgs)
		})
	cmd.Flags().Int64VarP(&ledger, "ledgerId", "l", -1, "the ledger (required)")
	cmd.Flags().Int64VarP(&entry, "entryId", "e", -1, "the entry in the ledger (required)")
	return cmd
}

func (a *adminCLI) getMessageIDCommand() *cobra.Command {
	var datetime string
	cmd := a.topicVerb("get-message-id TOPIC", "Show the id of the first message published at or after a time",
		func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
			at, err := time.Parse(time.RFC3339Nano, datetime)
			if err != nil {
				return fmt.Errorf("--datetime %q: want an ISO 8601 time with its offset, e.g. 2021-06-28T16:53:08Z", datetime)
			}
			id, err := c.Topics().GetMessageIDWithContext(ctx, t, at.UnixMilli())
			if err != nil {
				return err
			}
			return p.scalar(shortID(id), id)
		})
	cmd.Flags().StringVarP(&datetime, "datetime", "d", "", "the time, e.g. 2021-06-28T16:53:08Z or 2021-06-28T16:53:08.123+08:00 (required)")
	return cmd
}
