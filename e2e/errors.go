package e2e

import "errors"

// ErrBadConfig is wrapped by every Validate error of this package.
var ErrBadConfig = errors.New("e2e: invalid configuration")

// ErrLinkClosed is returned by a Link's methods after Close.
var ErrLinkClosed = errors.New("e2e: link closed")
