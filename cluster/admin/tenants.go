package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/meridian-mq/meridian/global"
)

func (h *handler) routeTenants() {
	h.handle("GET /admin/v2/tenants", opSuperUser, h.listTenants) // as on Pulsar: the names of every tenant
	h.handle("GET /admin/v2/tenants/{tenant}", opTenantAdmin, h.getTenant)
	h.handle("PUT /admin/v2/tenants/{tenant}", opSuperUser, h.createTenant)
	h.handle("POST /admin/v2/tenants/{tenant}", opSuperUser, h.updateTenant)
	h.handle("DELETE /admin/v2/tenants/{tenant}", opSuperUser, h.deleteTenant)
}

func (h *handler) listTenants(w http.ResponseWriter, r *http.Request) error {
	out := h.svc.Policies().Tenants()
	if out == nil {
		out = []string{}
	}
	return ok(w, out)
}

func (h *handler) getTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant")
	t, found := h.svc.Policies().Tenant(name)
	if !found {
		return fmt.Errorf("%w: tenant %s does not exist", ErrNotFound, name)
	}
	return ok(w, t)
}

func (h *handler) createTenant(w http.ResponseWriter, r *http.Request) error {
	var t global.TenantInfo
	if _, err := h.readJSON(r, &t); err != nil {
		return err
	}
	rc, err := h.svc.Global().CreateTenant(r.Context(), r.PathValue("tenant"), t)
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

// updateTenant replaces the tenant's admin roles and allowed clusters.
func (h *handler) updateTenant(w http.ResponseWriter, r *http.Request) error {
	var t global.TenantInfo
	if err := h.mustReadJSON(r, &t); err != nil {
		return err
	}
	_, rc, err := h.svc.Global().UpdateTenant(r.Context(), r.PathValue("tenant"), func(old *global.TenantInfo) error {
		*old = t.Clone()
		return nil
	})
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

func (h *handler) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryBool(r, "force"); err != nil {
		return err
	}
	rc, err := h.svc.Global().DeleteTenant(r.Context(), r.PathValue("tenant"))
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

func (h *handler) routeClusters() {
	h.handle("GET /admin/v2/clusters", opNone, h.listClusters)
	h.handle("GET /admin/v2/clusters/{cluster}", opSuperUser, h.getCluster) // as on Pulsar: it may hold the replicator's credentials
	h.handle("PUT /admin/v2/clusters/{cluster}", opSuperUser, h.createCluster)
	h.handle("POST /admin/v2/clusters/{cluster}", opSuperUser, h.updateCluster)
	h.handle("DELETE /admin/v2/clusters/{cluster}", opSuperUser, h.deleteCluster)
	h.handle("GET /admin/v2/clusters/{cluster}/peers", opNone, h.clusterPeers)
	h.routeClusterMigration()
}

func (h *handler) listClusters(w http.ResponseWriter, r *http.Request) error {
	out := h.svc.Policies().Clusters()
	if out == nil {
		out = []string{}
	}
	return ok(w, out)
}

func (h *handler) getCluster(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("cluster")
	c, found := h.svc.Policies().Cluster(name)
	if !found {
		return fmt.Errorf("%w: cluster %s does not exist", ErrNotFound, name)
	}
	return ok(w, c)
}

func (h *handler) createCluster(w http.ResponseWriter, r *http.Request) error {
	var c global.ClusterData
	if err := h.mustReadJSON(r, &c); err != nil {
		return err
	}
	rc, err := h.svc.Global().CreateCluster(r.Context(), r.PathValue("cluster"), c)
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

func (h *handler) updateCluster(w http.ResponseWriter, r *http.Request) error {
	var c global.ClusterData
	if err := h.mustReadJSON(r, &c); err != nil {
		return err
	}
	_, rc, err := h.svc.Global().UpdateCluster(r.Context(), r.PathValue("cluster"), func(old *global.ClusterData) error {
		// The migration is set apart (migrate.go); pulsar-admin's update
		// sends the URLs alone.
		c.Migration = old.Migration
		*old = c
		return nil
	})
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

func (h *handler) deleteCluster(w http.ResponseWriter, r *http.Request) error {
	rc, err := h.svc.Global().DeleteCluster(r.Context(), r.PathValue("cluster"))
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

// clusterPeers answers no peers: Meridian's replication graph is the full
// mesh of each namespace's clusters (DESIGN §6), not peer lists.
func (h *handler) clusterPeers(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("cluster")
	if _, found := h.svc.Policies().Cluster(name); !found {
		return fmt.Errorf("%w: cluster %s does not exist", ErrNotFound, name)
	}
	return ok(w, []string{})
}

func (h *handler) routeBrokers() {
	h.handle("GET /admin/v2/brokers", opSuperUser, h.localBrokers)
	h.handle("GET /admin/v2/brokers/{cluster}", opSuperUser, h.brokers)
	h.handle("GET /admin/v2/brokers/health", opSuperUser, h.health)
	h.handle("GET /admin/v2/brokers/ready", opNone, h.health)
}

// brokerAddrs lists the region's live brokers as Pulsar does: the
// host:port of their web service, sorted.
func (h *handler) brokerAddrs(r *http.Request) ([]string, error) {
	owners, err := h.lm.Brokers(r.Context())
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, o := range owners {
		if u, err := url.Parse(o.WebURL); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (h *handler) localBrokers(w http.ResponseWriter, r *http.Request) error {
	out, err := h.brokerAddrs(r)
	if err != nil {
		return err
	}
	return ok(w, out)
}

// brokers lists the brokers of cluster: this region's, or a redirect to the
// region's own web service for another.
func (h *handler) brokers(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("cluster")
	if name != h.svc.Region() {
		c, found := h.svc.Policies().Cluster(name)
		if !found {
			return fmt.Errorf("%w: cluster %s does not exist", ErrNotFound, name)
		}
		if c.ServiceURL == "" || sameURL(c.ServiceURL, h.svc.Self().WebURL) {
			return fmt.Errorf("%w: cluster %s has no web service URL to ask", ErrNotFound, name)
		}
		return &redirect{url: strings.TrimSuffix(c.ServiceURL, "/") + r.URL.RequestURI()}
	}
	return h.localBrokers(w, r)
}

// health answers "ok" once the broker serves: the global configuration is
// loaded (ServeHTTP checked it) and the broker is registered.
func (h *handler) health(w http.ResponseWriter, r *http.Request) error {
	if _, err := h.lm.Brokers(r.Context()); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain")
	_, err := w.Write([]byte("ok"))
	return err
}

// brokerInfo is pulsaradmin's BrokerInfo.
type brokerInfo struct {
	BrokerID   string `json:"brokerId"`
	ServiceURL string `json:"serviceUrl"`
}
