package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// printer writes results as text or JSON. Commands that change something
// print nothing on success, as pulsar-admin does.
type printer struct {
	w    io.Writer
	json bool
}

// list prints names one per line, or a JSON array (never null).
func (p *printer) list(items []string) error {
	if items == nil {
		items = []string{}
	}
	if p.json {
		return p.jsonValue(items)
	}
	for _, s := range items {
		if _, err := fmt.Fprintln(p.w, s); err != nil {
			return err
		}
	}
	return nil
}

// object prints v as indented JSON in both modes: statistics and policies
// are nested records that pulsar-admin also prints as JSON.
func (p *printer) object(v any) error { return p.jsonValue(v) }

// table prints rows under a header as aligned columns, or v as JSON.
func (p *printer) table(v any, header []string, rows [][]string) error {
	if p.json {
		return p.jsonValue(v)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// scalar prints one value as text, or v as JSON.
func (p *printer) scalar(text string, v any) error {
	if p.json {
		return p.jsonValue(v)
	}
	_, err := fmt.Fprintln(p.w, text)
	return err
}

func (p *printer) jsonValue(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}

// raw prints a JSON body as the server sent it, indented.
func (p *printer) raw(body []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	_, err := fmt.Fprintf(p.w, "%s\n", b.Bytes())
	return err
}

// sortedKeys are m's keys in order, for printing a map a row a key.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// nonNil makes a nil slice empty, so that JSON prints [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortID prints a message id as pulsar-admin does: ledger:entry, with the
// partition only for a partition's message.
func shortID(id utils.MessageID) string {
	s := strconv.FormatInt(id.LedgerID, 10) + ":" + strconv.FormatInt(id.EntryID, 10)
	if id.PartitionIndex >= 0 {
		s += ":" + strconv.Itoa(id.PartitionIndex)
	}
	return s
}
