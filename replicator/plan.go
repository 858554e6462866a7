package replicator

import (
	"cmp"
	"hash/fnv"
	"slices"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// CursorPrefix names the replication cursors in a topic's managed ledger:
// meridian.repl.<remote> is how far the region's copy has reached remote
// (DESIGN §6). The task that holds the lease is its only writer; the topic's
// owner only reads it, to hold retention.
const CursorPrefix = mledger.ReplicationCursorPrefix

// localOnly is the replicate_to value that keeps a message in its region
// (pulsar-client-go's DisableReplication).
const localOnly = "__local__"

// taskID names one replication task: one source topic (a partition, or a
// non-partitioned topic) and one remote region.
type taskID struct {
	Topic  string
	Remote string
}

// key is the task's lease key, /meridian/regions/<r>/replicators/<topic>/<remote>.
func (t taskID) key(region string) string {
	return meta.RegionKey(region, "replicators", t.Topic, t.Remote)
}

func (t taskID) String() string { return t.Topic + " -> " + t.Remote }

// plan returns the tasks that region's topics need, sorted: one for each
// topic and each region of its effective replication clusters other than
// region itself (a full mesh, one hop). A topic whose clusters cannot be
// resolved (its namespace is gone) needs none.
func plan(region string, topics []string, clusters func(topic string) ([]string, bool)) []taskID {
	var tasks []taskID
	for _, topic := range topics {
		cs, ok := clusters(topic)
		if !ok || !slices.Contains(cs, region) {
			continue
		}
		for _, c := range cs {
			if c != region {
				tasks = append(tasks, taskID{Topic: topic, Remote: c})
			}
		}
	}
	slices.SortFunc(tasks, func(a, b taskID) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Remote, b.Remote))
	})
	return tasks
}

// preferredWorker is the worker that should run t among the live workers:
// the one with the highest hash of (t's topic, worker) (rendezvous hashing),
// so that topics spread evenly and only the topics of a worker that comes
// or goes change hands. A topic's tasks, one per remote, all prefer the
// same worker: there they tail the topic's ledgers through one shared
// reader (ledger.Client.OpenTail), so the region's bookies serve each
// entry once, not once per remote. Empty when there are no workers.
func preferredWorker(t taskID, workers []string) string {
	best, bestHash := "", uint64(0)
	for _, w := range workers {
		h := fnv.New64a()
		h.Write([]byte(t.Topic))
		h.Write([]byte{0})
		h.Write([]byte(w))
		if v := h.Sum64(); best == "" || v > bestHash || (v == bestHash && w < best) {
			best, bestHash = w, v
		}
	}
	return best
}

// forwardTo reports whether a stored message goes to remote: never when it
// arrived by replication (replicated_from is set: no loops), and otherwise
// when its replicate_to is empty or names remote. ["__local__"] names no
// region, so it keeps the message home.
func forwardTo(md *pb.MessageMetadata, remote string) bool {
	if md.GetReplicatedFrom() != "" {
		return false
	}
	to := md.GetReplicateTo()
	return len(to) == 0 || slices.Contains(to, remote)
}
