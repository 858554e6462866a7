package broker

import (
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// dispatchEntry is a stored entry as dispatch sees it: its bytes, split
// into the BrokerEntryMetadata prefix and the message, and what its
// metadata says about delivery.
type dispatchEntry struct {
	pos  mledger.Position
	bem  []byte
	msg  []byte
	md   *pb.MessageMetadata
	size int // messages in the entry: a batch counts its messages
}

func newDispatchEntry(e mledger.Entry) (*dispatchEntry, error) {
	bem, msg, err := e.Split()
	if err != nil {
		return nil, err
	}
	md, payload, err := wire.DecodeMessage(msg)
	if err != nil {
		return nil, err
	}
	return &dispatchEntry{pos: e.Position, bem: bem, msg: msg, md: md, size: wire.BatchMessages(md, len(payload))}, nil
}

// stickyKey is the key Key_Shared routes on: the ordering key, else the
// partition key, else none (all keyless messages go to one consumer, as in
// Pulsar).
func (e *dispatchEntry) stickyKey() []byte {
	if k := e.md.GetOrderingKey(); len(k) > 0 {
		return k
	}
	return []byte(e.md.GetPartitionKey())
}
