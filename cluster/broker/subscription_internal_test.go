package broker

import (
	"encoding/binary"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// TestReplayedEntryWaitsBehindAnEarlierOfItsKey: a Key_Shared round took
// entry 84 of key k from the replay set, the earliest of k there; while it
// read storage, the consumer holding entry 4 of k left, which handed 4
// back to the replay set. The round must not deliver 84 before 4: it goes
// back behind it. (TestFrozenConsumerIsSkipped/Key_Shared saw "key k4:
// message 4 after 84" under load this way.)
func TestReplayedEntryWaitsBehindAnEarlierOfItsKey(t *testing.T) {
	var d dispatchState
	d.init(pb.CommandSubscribe_Key_Shared, -1, DefaultDispatchConfig(), slog.Default(), func(*consumer, bool) {}, func() {})
	live := &consumer{c: &conn{msgs: newMsgQueue(100, 1<<20)}, permits: 100, maxUnacked: 1000}
	if err := d.keys.add(live, nil); err != nil {
		t.Fatal(err)
	}
	at := func(entry int64) mledger.Position { return mledger.Position{Ledger: 1, Entry: entry} }
	h := keyHash([]byte("k"))

	d.addReplay(at(4), h) // handed back by the consumer that left
	out := d.assign([]mledger.Entry{keyedEntry(t, at(84), "k"), keyedEntry(t, at(85), "other")}, time.Now())

	for _, d := range out {
		if d.e.pos == at(84) {
			t.Fatalf("entry 84 of key k delivered while entry 4 of k waits for redelivery")
		}
	}
	if len(out) != 1 || out[0].e.pos != at(85) {
		t.Errorf("delivered %d entries, want only entry 85 (another key)", len(out))
	}
	if _, ok := d.replay[at(84)]; !ok || d.replayKeys[h] != 2 {
		t.Errorf("entry 84 is not back in replay behind entry 4 (replay %v)", d.replay)
	}
}

// keyedEntry is a stored entry at p holding one message with partition key
// key.
func keyedEntry(t *testing.T, p mledger.Position, key string) mledger.Entry {
	t.Helper()
	msg, err := wire.AppendMessage(nil, pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(uint64(p.Entry)),
		PublishTime: proto.Uint64(1), PartitionKey: proto.String(key)}.Build(), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	data := binary.BigEndian.AppendUint16(nil, wire.MagicBrokerEntryMetadata)
	data = binary.BigEndian.AppendUint32(data, 0) // an empty BrokerEntryMetadata
	return mledger.Entry{Position: p, Data: append(data, msg...)}
}
