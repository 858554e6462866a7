package admin

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
)

// Broker dynamic configuration (/admin/v2/brokers/configuration/...).
//
// Pulsar keeps dynamic settings in ZooKeeper and applies them to every
// broker. Meridian keeps them in this broker's memory only: a value set
// here is answered back by this broker until it restarts, is not seen by
// other brokers, and changes no behaviour (Meridian's settings come from
// its Config and are not changed at run time). The endpoints exist so that
// tools which set and read dynamic settings work against Meridian.

// dynamicConfigNames are the names GET /brokers/configuration lists: the
// Pulsar dynamic settings a client is most likely to set. Any other name
// is accepted too, as Meridian enforces none of them.
var dynamicConfigNames = []string{
	"allowAutoSubscriptionCreation",
	"allowAutoTopicCreation",
	"allowAutoTopicCreationType",
	"brokerDeleteInactiveTopicsEnabled",
	"defaultNumPartitions",
	"maxUnackedMessagesPerConsumer",
	"maxUnackedMessagesPerSubscription",
}

// dynamicConfig is the in-memory store of one broker's dynamic settings.
type dynamicConfig struct {
	mu struct {
		sync.Mutex
		values map[string]string
	}
}

func (h *handler) routeBrokerConfig() {
	const p = "/admin/v2/brokers/configuration"
	h.handle("GET "+p, opSuperUser, h.dynamicConfigNames)
	h.handle("GET "+p+"/", opSuperUser, h.dynamicConfigNames)
	h.handle("GET "+p+"/values", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		return ok(w, h.dyn.values())
	})
	h.handle("GET "+p+"/runtime", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		return ok(w, h.dyn.values())
	})
	// The value is the rest of the path: Pulsar's values may hold '/'.
	h.handle("POST "+p+"/{name}/{value...}", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		name, value := r.PathValue("name"), r.PathValue("value")
		if name == "" {
			return fmt.Errorf("%w: a configuration name is required", ErrBadRequest)
		}
		h.dyn.set(name, value)
		w.WriteHeader(http.StatusOK)
		return nil
	})
	h.handle("DELETE "+p+"/{name}", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		if !h.dyn.remove(r.PathValue("name")) {
			return fmt.Errorf("%w: dynamic configuration %s is not set", ErrNotFound, r.PathValue("name"))
		}
		return noContent(w)
	})
}

func (h *handler) dynamicConfigNames(w http.ResponseWriter, _ *http.Request) error {
	names := slices.Clone(dynamicConfigNames)
	for k := range h.dyn.values() {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return ok(w, names)
}

func (d *dynamicConfig) values() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := maps.Clone(d.mu.values)
	if out == nil {
		out = map[string]string{}
	}
	return out
}

func (d *dynamicConfig) set(name, value string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.values == nil {
		d.mu.values = map[string]string{}
	}
	d.mu.values[name] = value
}

func (d *dynamicConfig) remove(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, found := d.mu.values[name]
	delete(d.mu.values, name)
	return found
}
