package node

import "errors"

// ErrConf: a configuration file could not be read or has a value that does
// not parse; the message names the file, line and key.
var ErrConf = errors.New("node: bad configuration file")
