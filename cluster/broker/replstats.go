package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/meridian-mq/meridian/cluster/mledger"
)

// ReplicationStats is the state of a topic's replication to one remote
// region: what the replicator worker running the task publishes (its
// record, mledger.ReplicationStateKey), with the backlog this broker
// measures from the replication cursor as its owner's watch sees it. Both
// are right wherever the worker runs: the record and the cursor are in the
// region's store.
type ReplicationStats struct {
	// Task is the worker's report; zero (Connected false) when no worker
	// reports the task: none runs it yet, or its worker died.
	Task mledger.ReplicationTaskState
	// Reported: a worker reports the task.
	Reported bool
	// Cursor is the replication cursor's mark-delete position, and
	// HasCursor whether the cursor exists. A task without a cursor yet
	// starts from the topic's first entry, so the backlog is all of it.
	Cursor    mledger.Position
	HasCursor bool
	// Backlog is what the cursor has yet to send.
	Backlog mledger.ReplicationBacklog
}

// ReplicationStats returns the state of the topic's replication by remote
// region: every remote of its effective replication clusters, and any
// other that a replication cursor or a worker still names (a region just
// removed, whose task has not stopped yet). On an error reading the
// workers' records or the backlog it returns what it could learn, and the
// error.
func (t *Topic) ReplicationStats(ctx context.Context) (map[string]ReplicationStats, error) {
	tasks, err := mledger.ReplicationTasks(ctx, t.svc.store, t.svc.Region(), t.name.String())
	return t.replicationStats(ctx, tasks, err)
}

// replicationStats is ReplicationStats from the workers' reports of this
// topic's tasks, already read (with the error of that read, if any).
func (t *Topic) replicationStats(ctx context.Context, tasks map[string]mledger.ReplicationTaskState, tasksErr error) (map[string]ReplicationStats, error) {
	region := t.svc.Region()
	topic := t.name.String()
	out := map[string]ReplicationStats{}
	if eff, err := t.svc.resolve(t.name); err == nil {
		for _, c := range eff.ReplicationClusters {
			if c != region {
				out[c] = ReplicationStats{}
			}
		}
	}
	for name, p := range t.ml.ForeignCursors() {
		if remote, ok := strings.CutPrefix(name, mledger.ReplicationCursorPrefix); ok {
			st := out[remote]
			st.Cursor, st.HasCursor = p, true
			out[remote] = st
		}
	}
	var errs []error
	if tasksErr != nil {
		errs = append(errs, tasksErr)
	}
	for remote, task := range tasks {
		st := out[remote]
		st.Task, st.Reported = task, true
		if !st.HasCursor && task.MarkDelete != (mledger.Position{}) {
			// The owner's watch has not seen the cursor yet.
			st.Cursor, st.HasCursor = task.MarkDelete, true
		}
		out[remote] = st
	}
	for remote, st := range out {
		b, err := t.ml.BacklogAfter(ctx, st.Cursor)
		if err != nil {
			errs = append(errs, fmt.Errorf("replication backlog of %s to %s: %w", topic, remote, err))
		}
		st.Backlog = b
		out[remote] = st
	}
	return out, errors.Join(errs...)
}
