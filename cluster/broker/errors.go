package broker

import "errors"

var (
	// ErrServerClosed: Serve was called on, or returned from, a closed Server.
	ErrServerClosed = errors.New("broker: server closed")
	// ErrInvalidConfig: a Config field is out of its documented bounds.
	ErrInvalidConfig = errors.New("broker: invalid config")
)
