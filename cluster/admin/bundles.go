package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-mq/meridian/topology"
)

// unloadBundle hands one bundle of a namespace over:
// PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload
// [?destinationBroker=BROKER], to BROKER (our broker id, or Pulsar's
// host:webPort) or to the broker placement chooses. Any broker answers:
// the request reaches the owner through the bundle's ownership key, and
// the call returns once the bundle has left it. A bundle nobody owns is
// left alone (204), as Pulsar does.
func (h *handler) unloadBundle(w http.ResponseWriter, r *http.Request) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if err := h.namespaceExists(tenant, ns); err != nil {
		return err
	}
	b, err := h.namespaceBundle(tenant, ns, r.PathValue("bundle"))
	if err != nil {
		return err
	}
	var destination string
	if name := r.URL.Query().Get("destinationBroker"); name != "" {
		if destination, err = h.lm.ResolveBroker(r.Context(), name); err != nil {
			return err
		}
	}
	if err := h.lm.UnloadBundle(r.Context(), tenant, ns, b, destination); err != nil {
		return err
	}
	return noContent(w)
}

// namespaceBundle returns the bundle of tenant/ns that rng names
// ("0x00000000_0x40000000"), refused with Pulsar's status (412) and
// reason (its validateNamespaceBundleRange and NamespaceBundles.
// validateBundle) when rng is not one of the namespace's bundles.
func (h *handler) namespaceBundle(tenant, ns, rng string) (topology.Bundle, error) {
	lo, hi, ok := strings.Cut(rng, "_")
	if !ok {
		return topology.Bundle{}, pulsarReason{ErrPrecondition, "Invalid bundle range: " + rng}
	}
	lower, err1 := strconv.ParseUint(lo, 0, 64)
	upper, err2 := strconv.ParseUint(hi, 0, 64)
	if err1 != nil || err2 != nil {
		// Pulsar's reason here is Java's NumberFormatException text.
		return topology.Bundle{}, pulsarReason{ErrPrecondition, "Invalid bundle range: " + rng}
	}
	bundles, err := h.lm.NamespaceBundles(tenant, ns)
	if err != nil {
		return topology.Bundle{}, err
	}
	i := slices.IndexFunc(bundles, func(b topology.Bundle) bool { return uint64(b.Lower) == lower })
	if i < 0 {
		return topology.Bundle{}, pulsarReason{ErrPrecondition, "Cannot find bundle in the bundles list"}
	}
	if uint64(bundles[i].Upper) != upper {
		return topology.Bundle{}, pulsarReason{ErrPrecondition, "Invalid upper boundary for bundle"}
	}
	return bundles[i], nil
}

// unloadNamespace unloads every bundle of the namespace, wherever it is
// served (each owner hands its bundles to another broker, or unloads them
// when there is none), and returns once all have left their owners.
func (h *handler) unloadNamespace(w http.ResponseWriter, r *http.Request) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	if err := h.namespaceExists(tenant, ns); err != nil {
		return err
	}
	if err := h.lm.UnloadNamespace(r.Context(), tenant, ns); err != nil {
		return fmt.Errorf("unload namespace %s/%s: %w", tenant, ns, err)
	}
	return noContent(w)
}
