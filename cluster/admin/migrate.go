package admin

import (
	"fmt"
	"net/http"

	"github.com/meridian-mq/meridian/global"
)

// Cluster migration, Pulsar's PIP-188: an operator moves every client of a
// cluster (a region) to another cluster.
//
//	POST /admin/v2/clusters/{cluster}/migrate?migrated=true|false  body: ClusterUrl
//	GET  /admin/v2/clusters/{cluster}/migrate                      ClusterPolicies
//
// Both are a superuser's, as in Pulsar. migrated=false records the URLs
// without moving anyone. The region's brokers act on the record
// (cluster/broker/migrate.go): producers move at once, a subscription's
// consumers once they have drained its backlog here.

func (h *handler) routeClusterMigration() {
	h.handle("POST /admin/v2/clusters/{cluster}/migrate", opSuperUser, h.updateClusterMigration)
	h.handle("GET /admin/v2/clusters/{cluster}/migrate", opSuperUser, h.getClusterMigration)
}

// updateClusterMigration stores the cluster's migration. A request that
// would move clients to no broker URL, or names a malformed URL, is
// refused and nothing is stored: 400 "Cluster url must not be empty" (as
// Pulsar answers) for migrated=true without a URL, 412 with the field for
// a URL of the wrong shape.
func (h *handler) updateClusterMigration(w http.ResponseWriter, r *http.Request) error {
	migrated, err := queryBool(r, "migrated")
	if err != nil {
		return err
	}
	var u global.ClusterURL
	if err := h.mustReadJSON(r, &u); err != nil {
		return err
	}
	if migrated && u.Empty() {
		return fmt.Errorf("%w: Cluster url must not be empty", ErrBadRequest)
	}
	m := &global.ClusterMigration{Migrated: migrated, MigratedClusterURL: u}
	if err := m.Validate(); err != nil {
		return err
	}
	_, rc, err := h.svc.Global().UpdateCluster(r.Context(), r.PathValue("cluster"), func(c *global.ClusterData) error {
		c.Migration = m
		return nil
	})
	if err != nil {
		return err
	}
	h.await(r, rc)
	w.WriteHeader(http.StatusOK)
	return nil
}

// getClusterMigration answers Pulsar's ClusterPolicies: not migrated, with
// no URL, for a cluster whose migration was never set.
func (h *handler) getClusterMigration(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("cluster")
	c, found := h.svc.Policies().Cluster(name)
	if !found {
		return fmt.Errorf("%w: cluster %s does not exist", ErrNotFound, name)
	}
	var m global.ClusterMigration
	if c.Migration != nil {
		m = *c.Migration
	}
	return ok(w, m)
}
