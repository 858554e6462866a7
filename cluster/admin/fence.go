package admin

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// Fences (global/fence.go, cluster/broker/fence.go): one region cut off
// for the topics of a namespace whose names start with a prefix, held
// under a TTL. `meridian drill --cut isolate` holds one for the length of
// its outage. Meridian's own endpoint, a superuser's, as it takes a
// region's service away from clients:
//
//	GET    /admin/v2/namespaces/{tenant}/{namespace}/fences               [{"name","region","topicPrefix","ttlSeconds","holder","createdMillis"}]
//	POST   /admin/v2/namespaces/{tenant}/{namespace}/fences/{name}        {"region":"r","topicPrefix":"p","ttlSeconds":15,"holder":"who"}: the fence, or 409 when one of that name is there
//	POST   /admin/v2/namespaces/{tenant}/{namespace}/fences/{name}/renew  a whole TTL again: the fence, or 404 once it has lapsed
//	DELETE /admin/v2/namespaces/{tenant}/{namespace}/fences/{name}        204, or 404
//
// A namespace that does not exist is 404; a region that is not in the
// registry or not one of the namespace's replication clusters, an empty
// prefix and a TTL out of [global.MinFenceTTL, global.MaxFenceTTL] are 412
// with the reason; a malformed body is 400. Nothing is stored then.

func (h *handler) routeFences() {
	const path = "/admin/v2/namespaces/{tenant}/{namespace}/fences"
	h.handle("GET "+path, opSuperUser, h.listFences)
	h.handle("POST "+path+"/{name}", opSuperUser, h.createFence)
	h.handle("POST "+path+"/{name}/renew", opSuperUser, h.renewFence)
	h.handle("DELETE "+path+"/{name}", opSuperUser, h.deleteFence)
}

// fenceBody is the endpoint's body and answer.
type fenceBody struct {
	Name          string `json:"name,omitempty"`
	Region        string `json:"region"`
	TopicPrefix   string `json:"topicPrefix"`
	TTLSeconds    int    `json:"ttlSeconds"`
	Holder        string `json:"holder,omitempty"`
	CreatedMillis int64  `json:"createdMillis,omitempty"`
}

func fenceAnswer(f global.Fence) fenceBody {
	return fenceBody{Name: f.Name, Region: f.Region, TopicPrefix: f.TopicPrefix, TTLSeconds: f.TTLSeconds,
		Holder: f.Holder, CreatedMillis: f.CreatedMillis}
}

// fenceNamespace returns the namespace's policies, or 404.
func (h *handler) fenceNamespace(r *http.Request) (tenant, ns string, p global.Policies, err error) {
	tenant, ns = r.PathValue("tenant"), r.PathValue("namespace")
	p, found := h.svc.Policies().Namespace(tenant, ns)
	if !found {
		return tenant, ns, p, pulsarReason{ErrNotFound, "Namespace does not exist"}
	}
	return tenant, ns, p, nil
}

func (h *handler) listFences(w http.ResponseWriter, r *http.Request) error {
	tenant, ns, _, err := h.fenceNamespace(r)
	if err != nil {
		return err
	}
	list, _, err := h.svc.Global().Fences(r.Context(), tenant, ns)
	if err != nil {
		return err
	}
	out := make([]fenceBody, len(list))
	for i, f := range list {
		out[i] = fenceAnswer(f)
	}
	return ok(w, out)
}

func (h *handler) createFence(w http.ResponseWriter, r *http.Request) error {
	tenant, ns, p, err := h.fenceNamespace(r)
	if err != nil {
		return err
	}
	var body fenceBody
	if err := h.mustReadJSON(r, &body); err != nil {
		return err
	}
	if _, found := h.svc.Policies().Cluster(body.Region); !found {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("Region %q does not exist", body.Region)}
	}
	if !slices.Contains(p.ReplicationClusters, body.Region) {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("Region %s is not one of the namespace's replication clusters %v",
			body.Region, p.ReplicationClusters)}
	}
	holder := body.Holder
	if role := roleOf(r.Context()); role != "" {
		holder = role + ": " + holder
	}
	f, err := h.svc.Global().CreateFence(r.Context(), global.Fence{Tenant: tenant, Namespace: ns, Name: r.PathValue("name"),
		Region: body.Region, TopicPrefix: body.TopicPrefix, TTLSeconds: body.TTLSeconds, Holder: holder}, time.Now())
	if errors.Is(err, global.ErrExists) {
		return pulsarReason{ErrConflict, fmt.Sprintf("Fence %s already exists", r.PathValue("name"))}
	}
	if err != nil {
		return err
	}
	return ok(w, fenceAnswer(f))
}

func (h *handler) renewFence(w http.ResponseWriter, r *http.Request) error {
	tenant, ns, _, err := h.fenceNamespace(r)
	if err != nil {
		return err
	}
	f, err := h.svc.Global().RenewFence(r.Context(), tenant, ns, r.PathValue("name"))
	if errors.Is(err, global.ErrNotFound) {
		return pulsarReason{ErrNotFound, fmt.Sprintf("Fence %s does not exist (it lapsed, or was removed)", r.PathValue("name"))}
	}
	if err != nil {
		return err
	}
	return ok(w, fenceAnswer(f))
}

func (h *handler) deleteFence(w http.ResponseWriter, r *http.Request) error {
	tenant, ns, _, err := h.fenceNamespace(r)
	if err != nil {
		return err
	}
	err = h.svc.Global().DeleteFence(r.Context(), tenant, ns, r.PathValue("name"))
	if errors.Is(err, global.ErrNotFound) {
		return pulsarReason{ErrNotFound, fmt.Sprintf("Fence %s does not exist", r.PathValue("name"))}
	}
	if err != nil {
		return err
	}
	return noContent(w)
}
