package node

import "github.com/meridian-mq/meridian/cluster/meta"

// Store is the region's metadata store, for tests that check its records.
func (r *Region) Store() meta.Store { return r.parts.store }
