package topology

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Domain is a topic's persistence domain.
type Domain string

const (
	Persistent    Domain = "persistent"
	NonPersistent Domain = "non-persistent"
)

// DefaultTenant and DefaultNamespace complete a short topic name, as Pulsar
// does: "my-topic" is persistent://public/default/my-topic.
const (
	DefaultTenant    = "public"
	DefaultNamespace = "default"
)

// partitionSuffix marks one partition of a partitioned topic.
const partitionSuffix = "-partition-"

// TopicName is a parsed, normalised Pulsar topic name. The zero value is not
// a valid name; build one with ParseTopicName.
//
// Pulsar has two forms: V2, domain://tenant/namespace/local, and the older
// V1, domain://tenant/cluster/namespace/local, in which the namespace is
// three segments. Both are kept as given: String returns the canonical text
// that clients send, which is also what bundles hash.
type TopicName struct {
	Domain    Domain
	Tenant    string
	Cluster   string // V1 names only
	Namespace string // the namespace's own segment, without the tenant
	Local     string // the topic's name within its namespace, partition suffix included
	// Partition is the partition index for "<name>-partition-N", else -1.
	Partition int
}

// nameSegment is what Pulsar accepts for tenant, cluster and namespace names.
var nameSegment = regexp.MustCompile(`^[-=:.\w]+$`)

// MaxNameLength bounds a tenant, namespace or cluster name, and
// MaxLocalNameLength a topic's name within its namespace, in bytes. Pulsar
// sets no bound; without one a name of a megabyte reached the metadata
// store and failed there.
const (
	MaxNameLength      = 255
	MaxLocalNameLength = 512
)

// ValidName reports whether name is a valid tenant, namespace or cluster
// name: Pulsar's characters (letters, digits, '_', '-', '=', ':', '.'),
// at most MaxNameLength bytes.
func ValidName(name string) bool {
	return len(name) <= MaxNameLength && nameSegment.MatchString(name)
}

// checkLocalName says what is wrong with a topic's local name, if anything:
// it must be valid UTF-8 without control characters (NUL, line breaks),
// at most MaxLocalNameLength bytes. Pulsar allows other characters, so
// this is as far as Meridian narrows it.
func checkLocalName(local string) string {
	switch {
	case local == "":
		return "empty topic"
	case len(local) > MaxLocalNameLength:
		return fmt.Sprintf("the topic's name is %d bytes, at most %d", len(local), MaxLocalNameLength)
	case !utf8.ValidString(local):
		return "the topic's name is not valid UTF-8"
	case strings.IndexFunc(local, unicode.IsControl) >= 0:
		return "the topic's name has a control character"
	}
	return ""
}

// ParseTopicName normalises a topic name the way Pulsar clients and brokers
// do:
//
//	my-topic                          -> persistent://public/default/my-topic
//	tenant/ns/my-topic                -> persistent://tenant/ns/my-topic
//	non-persistent://tenant/ns/t      (V2, kept)
//	persistent://tenant/cluster/ns/t  (V1, kept)
func ParseTopicName(name string) (TopicName, error) {
	invalid := func(why string) (TopicName, error) {
		return TopicName{}, fmt.Errorf("%w %q: %s", ErrInvalidTopicName, name, why)
	}
	rest := name
	domain := Persistent
	if d, r, ok := strings.Cut(name, "://"); ok {
		switch Domain(d) {
		case Persistent, NonPersistent:
			domain, rest = Domain(d), r
		default:
			return invalid("the domain must be persistent or non-persistent")
		}
	} else {
		switch strings.Count(name, "/") {
		case 0:
			rest = DefaultTenant + "/" + DefaultNamespace + "/" + name
		case 2:
		default:
			return invalid("a short name is <topic> or <tenant>/<namespace>/<topic>")
		}
	}
	parts := strings.SplitN(rest, "/", 4)
	t := TopicName{Domain: domain, Partition: -1}
	switch len(parts) {
	case 3:
		t.Tenant, t.Namespace, t.Local = parts[0], parts[1], parts[2]
	case 4:
		t.Tenant, t.Cluster, t.Namespace, t.Local = parts[0], parts[1], parts[2], parts[3]
		if !ValidName(t.Cluster) {
			return invalid("bad cluster segment")
		}
	default:
		return invalid("want <domain>://<tenant>/<namespace>/<topic>")
	}
	switch {
	case !ValidName(t.Tenant):
		return invalid("bad tenant segment")
	case !ValidName(t.Namespace):
		return invalid("bad namespace segment")
	}
	if why := checkLocalName(t.Local); why != "" {
		return invalid(why)
	}
	if i := strings.LastIndex(t.Local, partitionSuffix); i >= 0 {
		n, err := strconv.Atoi(t.Local[i+len(partitionSuffix):])
		if err == nil && n >= 0 {
			t.Partition = n
		}
	}
	return t, nil
}

// String returns the canonical name.
func (t TopicName) String() string {
	return string(t.Domain) + "://" + t.NamespaceName() + "/" + t.Local
}

// NamespaceName returns "tenant/namespace" (V2) or
// "tenant/cluster/namespace" (V1).
func (t TopicName) NamespaceName() string {
	if t.Cluster != "" {
		return t.Tenant + "/" + t.Cluster + "/" + t.Namespace
	}
	return t.Tenant + "/" + t.Namespace
}

// IsPartition reports whether the name is one partition of a partitioned
// topic.
func (t TopicName) IsPartition() bool { return t.Partition >= 0 }

// Base returns the partitioned topic a partition belongs to, or t itself.
func (t TopicName) Base() TopicName {
	if !t.IsPartition() {
		return t
	}
	t.Local = t.Local[:strings.LastIndex(t.Local, partitionSuffix)]
	t.Partition = -1
	return t
}

// PartitionN returns partition n of t (which must not itself be a partition).
func (t TopicName) PartitionN(n int) TopicName {
	t.Local = t.Base().Local + partitionSuffix + strconv.Itoa(n)
	t.Partition = n
	return t
}
