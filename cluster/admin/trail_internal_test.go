package admin

import (
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// A replicated entry's trail runs producer, origin region (its broker time
// from the reserved property), this region; a BrokerEntryMetadata that does
// not parse leaves its headers out.
func TestTrailHeadersOfAReplicatedEntry(t *testing.T) {
	md := pb.MessageMetadata_builder{
		PublishTime:    proto.Uint64(1_700_000_000_100),
		ReplicatedFrom: proto.String("us-east"),
		Properties: []*pb.KeyValue{pb.KeyValue_builder{Key: proto.String(wire.PropReplicationOriginTime),
			Value: proto.String("1700000000102")}.Build()},
	}.Build()
	bem, err := proto.Marshal(pb.BrokerEntryMetadata_builder{BrokerTimestamp: proto.Uint64(1_700_000_000_131), Index: proto.Uint64(41)}.Build())
	if err != nil {
		t.Fatal(err)
	}
	hd := http.Header{}
	setTrailHeaders(hd, "eu-west", bem, md)
	for k, want := range map[string]string{
		headerBrokerTimestamp: "1700000000131",
		headerBrokerIndex:     "41",
		headerOriginTimestamp: "1700000000102",
		headerTrail:           "producer=1700000000100, us-east=1700000000102, eu-west=1700000000131",
	} {
		if got := hd.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	hd = http.Header{}
	setTrailHeaders(hd, "eu-west", []byte{0xff, 0xff}, md)
	if hd.Get(headerBrokerTimestamp) != "" || hd.Get(headerTrail) != "producer=1700000000100, us-east=1700000000102" {
		t.Errorf("with a bad BrokerEntryMetadata: %v", hd)
	}
}
