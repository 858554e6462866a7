package replicator

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

func TestPlan(t *testing.T) {
	clusters := map[string][]string{
		"a": {"east", "west", "south"},
		"b": {"east"},          // replicated nowhere
		"c": {"west", "south"}, // not this region's
	}
	got := plan("east", []string{"c", "a", "b", "gone"}, func(topic string) ([]string, bool) {
		cs, ok := clusters[topic]
		return cs, ok
	})
	want := []taskID{{"a", "south"}, {"a", "west"}}
	if !slices.Equal(got, want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}
}

func TestPreferredWorkerSpreadsKeepsTopicsTogetherAndIsStable(t *testing.T) {
	if got := preferredWorker(taskID{"t", "r"}, nil); got != "" {
		t.Fatalf("no workers: %q", got)
	}
	workers := []string{"w1", "w2", "w3"}
	count := map[string]int{}
	owner := map[taskID]string{}
	for i := range 300 {
		id := taskID{fmt.Sprintf("persistent://public/default/t%d", i), "west"}
		w := preferredWorker(id, workers)
		count[w]++
		owner[id] = w
	}
	for _, w := range workers {
		if count[w] < 60 {
			t.Errorf("worker %s prefers %d of 300 tasks: not spread (%v)", w, count[w], count)
		}
	}
	// A worker that goes away moves only its own tasks.
	for id, w := range owner {
		if now := preferredWorker(id, []string{"w1", "w3"}); w != "w2" && now != w {
			t.Fatalf("task %v moved from %s to %s when w2 left", id, w, now)
		}
	}
	// A topic's tasks go together, to share its tail.
	for id, w := range owner {
		if other := preferredWorker(taskID{id.Topic, "south"}, workers); other != w {
			t.Fatalf("%s's task to west prefers %s, its task to south %s", id.Topic, w, other)
		}
	}
}

func TestForwardTo(t *testing.T) {
	md := func(from string, to ...string) *pb.MessageMetadata {
		b := pb.MessageMetadata_builder{ReplicateTo: to}
		if from != "" {
			b.ReplicatedFrom = proto.String(from)
		}
		return b.Build()
	}
	for _, tc := range []struct {
		md   *pb.MessageMetadata
		want bool
	}{
		{md(""), true},
		{md("", "west"), true},
		{md("", "south"), false},
		{md("", "south", "west"), true},
		{md("", localOnly), false},
		{md("south"), false}, // arrived by replication: never sent on
		{md("south", "west"), false},
	} {
		if got := forwardTo(tc.md, "west"); got != tc.want {
			t.Errorf("forwardTo(from %q, to %v, west) = %v, want %v", tc.md.GetReplicatedFrom(), tc.md.GetReplicateTo(), got, tc.want)
		}
	}
}
