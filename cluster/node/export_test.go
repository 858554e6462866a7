package node

import (
	"fmt"
	"slices"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// Store is the region's metadata store, for tests that check its records.
func (r *Region) Store() meta.Store { return r.parts.store }

// Region is the region named name, or nil.
func (n *Node) Region(name string) *Region {
	i := slices.IndexFunc(n.regions, func(r *Region) bool { return r.Name() == name })
	if i < 0 {
		return nil
	}
	return n.regions[i]
}

// CloseRegion stops one region's parts, leaving the other regions and the
// etcd running, as a test of a region's loss needs; Close no longer closes
// it.
func (n *Node) CloseRegion(name string) error {
	i := slices.IndexFunc(n.regions, func(r *Region) bool { return r.Name() == name })
	if i < 0 {
		return fmt.Errorf("node: no region %s", name)
	}
	r := n.regions[i]
	n.regions = slices.Delete(n.regions, i, i+1)
	return r.close()
}

// BrokerListenAddr is the address the broker's protocol listener is bound
// to, which its advertised listeners may not name.
func (n *Broker) BrokerListenAddr() string { return n.brokerLn.Addr().String() }
