package remote

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// FuzzPrepare: on any input prepare either refuses with ErrBadEntry or
// ErrAlreadyReplicated, or returns a message with a valid checksum, the
// same payload, replicated_from set, and the source index range.
func FuzzPrepare(f *testing.F) {
	entry, _, _ := batchEntry(f, 102)
	f.Add(entry)
	f.Add(simpleEntry(f, 0))
	f.Add([]byte{0x0e, 0x02, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, entry []byte) {
		out, err := prepare(entry, "us-east", testIncarnation, nil)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) && !errors.Is(err, ErrAlreadyReplicated) {
				t.Fatalf("prepare failed with an unclassified error: %v", err)
			}
			return
		}
		_, msg, err := mledger.SplitEntry(entry)
		if err != nil {
			t.Fatal(err)
		}
		_, payload, err := wire.SplitMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		mdBytes, gotPayload, err := wire.SplitMessage(out.message)
		if err != nil {
			t.Fatalf("the prepared message does not verify: %v", err)
		}
		md := &pb.MessageMetadata{}
		if err := proto.Unmarshal(mdBytes, md); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotPayload, payload) || md.GetReplicatedFrom() != "us-east" ||
			out.lastIndex-out.firstIndex+1 != int64(out.numMessages) || out.firstIndex < 0 {
			t.Fatalf("prepared %+v from %x", out, entry)
		}
	})
}
