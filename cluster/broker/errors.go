package broker

import (
	"errors"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/wire"
)

var (
	// ErrServerClosed: Serve was called on, or returned from, a closed Server.
	ErrServerClosed = errors.New("broker: server closed")
	// ErrCloseIncomplete: a Close's context ended before everything it
	// closes had finished.
	ErrCloseIncomplete = errors.New("broker: close did not finish in time")
	// ErrInvalidConfig: a Config field is out of its documented bounds. It
	// is the load manager's sentinel, so that one errors.Is covers every
	// part of a broker's configuration.
	ErrInvalidConfig = loadmgr.ErrInvalidConfig
	// ErrAckNotDelivered: an ack named a position this subscription never
	// delivered to that consumer, such as an id a client brought from
	// another region after a failover. It was ignored and counted (see
	// subscription.ack); a client that asked for an ack response gets it
	// as NotAllowed.
	ErrAckNotDelivered = fmt.Errorf("%w: ack of a position never delivered to this consumer; ignored", wire.ErrNotAllowed)
)
