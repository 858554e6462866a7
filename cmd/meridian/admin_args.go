package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// The parsing of `meridian admin`'s arguments and flag values, as
// pulsar-admin parses them: names, message ids, sizes and times.

func namespaceArg(s string) (utils.NameSpaceName, error) {
	ns, err := utils.GetNamespaceName(s)
	if err != nil {
		return utils.NameSpaceName{}, fmt.Errorf("namespace %q: want tenant/namespace: %w", s, err)
	}
	return *ns, nil
}

func topicArg(s string) (utils.TopicName, error) {
	t, err := utils.GetTopicName(s)
	if err != nil {
		return utils.TopicName{}, fmt.Errorf("topic %q: want persistent://tenant/namespace/topic (or a short name): %w", s, err)
	}
	return *t, nil
}

// messageIDArg parses "latest", "earliest" or ledger:entry[:partition[:batch]].
func messageIDArg(s string) (utils.MessageID, error) {
	switch strings.ToLower(s) {
	case "latest":
		return utils.Latest, nil
	case "earliest":
		return utils.Earliest, nil
	}
	id, err := utils.ParseMessageID(s)
	if err != nil {
		return utils.MessageID{}, fmt.Errorf("message id %q: want latest, earliest or ledger:entry", s)
	}
	return *id, nil
}

// parseSize parses a size as pulsar-admin does: bytes, or a number with
// k, m, g or t (powers of 1024); -1 means unlimited.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "-1" {
		return -1, nil
	}
	mult := int64(1)
	if s != "" {
		switch strings.ToLower(s[len(s)-1:]) {
		case "k":
			mult = 1 << 10
		case "m":
			mult = 1 << 20
		case "g":
			mult = 1 << 30
		case "t":
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, errors.New("want bytes, or a number with k, M, G or T (e.g. 10G), or -1 for unlimited")
	}
	return n * mult, nil
}

// parseSeconds parses a time as pulsar-admin's RelativeTimeUtil does
// (seconds, or a number with s, m, h, d, w or y), and also 0 and -1
// (unlimited), which some policies take.
func parseSeconds(s string) (int64, error) {
	switch strings.TrimSpace(s) {
	case "-1":
		return -1, nil
	case "0":
		return 0, nil
	}
	d, err := parseRelativeTime(s)
	if err != nil {
		return 0, err
	}
	return int64(d / time.Second), nil
}

// propertiesArg parses key=value pairs given with flag, at least one.
func propertiesArg(flag string, pairs []string) (map[string]string, error) {
	props, err := parseProperties(pairs)
	if err != nil {
		return nil, err
	}
	if len(props) == 0 {
		return nil, fmt.Errorf("give %s (-p) key=value, repeated or comma-separated", flag)
	}
	return props, nil
}
