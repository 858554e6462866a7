package wire_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

func TestEveryServerErrorHasASentinel(t *testing.T) {
	values := pb.ServerError(0).Descriptor().Values()
	for i := range values.Len() {
		code := pb.ServerError(values.Get(i).Number())
		s := wire.Sentinel(code)
		var se *wire.ServerError
		if !errors.As(s, &se) || se.Code != code {
			t.Errorf("%v has no sentinel of its own (got %v)", code, s)
		}
	}
}

func TestServerErrorRoundTrip(t *testing.T) {
	err := fmt.Errorf("%w: topic persistent://public/default/t is being loaded", wire.ErrServiceNotReady)
	code, msg := wire.ToWire(err)
	if code != pb.ServerError_ServiceNotReady || msg != "topic persistent://public/default/t is being loaded" {
		t.Fatalf("ToWire = %v, %q", code, msg)
	}
	received := &wire.ServerError{Code: code, Message: msg}
	if !errors.Is(received, wire.ErrServiceNotReady) || errors.Is(received, wire.ErrTopicNotFound) {
		t.Fatal("a received error does not match its code's sentinel only")
	}
	if got := received.Error(); got != "ServiceNotReady: "+msg {
		t.Fatalf("Error() = %q: the client matches on the code's name", got)
	}
	if code, msg := wire.ToWire(errors.New("disk on fire")); code != pb.ServerError_UnknownError || msg != "disk on fire" {
		t.Fatalf("ToWire of a plain error = %v, %q", code, msg)
	}
	if code, _ := wire.ToWire(wire.Errorf(pb.ServerError_TopicNotFound, "no %s", "t")); code != pb.ServerError_TopicNotFound {
		t.Fatalf("Errorf lost its code: %v", code)
	}
}
