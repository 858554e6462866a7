package broker

import (
	"errors"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
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
)
