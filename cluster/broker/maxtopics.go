package broker

import (
	"context"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/topology"
)

// tooManyTopics refuses a topic that would take its namespace beyond its
// maxTopicsPerNamespace. Its text begins with Pulsar's reason, word for
// word, which the admin API answers and the protocol's NotAllowed
// carries; it is NotAllowed on the protocol and 412 from the admin API,
// as Pulsar answers it.
type tooManyTopics struct {
	namespace  string
	held, more int
	max        int
}

func (e tooManyTopics) Error() string {
	return fmt.Sprintf("Exceed maximum number of topics in namespace. %s holds %d, %d more would pass its maxTopicsPerNamespace of %d",
		e.namespace, e.held, e.more, e.max)
}

func (tooManyTopics) Unwrap() error { return wire.ErrNotAllowed }

// AdmitTopics refuses to create n persistent topics in t's namespace
// beyond its maxTopicsPerNamespace (global.Effective): a topic that a
// producer, a consumer or the admin API creates is 1, a partitioned
// topic its partitions, and a partitioned topic that grows what it grows
// by. It is the one check every creation makes, as Pulsar's
// checkMaxTopicsPerNamespace: the load that creates a non-partitioned
// topic (loadTopic), a partitioned topic's auto-creation (Partitions), and
// the admin API's create and update of a partitioned topic. A partition
// counts from its topic's creation, so creating it on first use is not
// counted again. Existing topics are never refused: the check is made
// only where a topic is created.
//
// The count is what TopicsOfNamespace lists: the namespace's topics stored
// in this region and every partition of its partitioned topics. Pulsar
// leaves its system topics out; Meridian has none (topic policies live
// in the global store, not in __change_events), so every topic counts.
// Two creations at once may both pass the check, as on Pulsar: the limit
// bounds a namespace's growth, it is no lock.
func (s *Service) AdmitTopics(ctx context.Context, t topology.TopicName, n int) error {
	if t.Domain != topology.Persistent {
		return nil // as Pulsar, which checks persistent topics' creation only
	}
	eff, err := s.resolve(t)
	if err != nil {
		return err
	}
	limit := eff.MaxTopicsPerNamespace
	if limit == 0 {
		return nil
	}
	names, err := s.TopicsOfNamespace(ctx, t.Tenant, t.Namespace)
	if err != nil {
		return err
	}
	if len(names)+n > limit {
		return tooManyTopics{namespace: t.Tenant + "/" + t.Namespace, held: len(names), more: n, max: limit}
	}
	return nil
}
