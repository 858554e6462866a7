package testbed

import "errors"

// ErrBadConfig is wrapped by every Validate error of this package.
var ErrBadConfig = errors.New("testbed: invalid configuration")

// ErrLinkClosed is returned by a Link's methods after Close.
var ErrLinkClosed = errors.New("testbed: link closed")
