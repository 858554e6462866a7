package admin

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/meridian-mq/meridian/global"
)

// Broker dynamic configuration (/admin/v2/brokers/configuration/...).
//
// Pulsar keeps dynamic settings in ZooKeeper and applies them to every
// broker. Meridian keeps them in this broker's memory only: a value set
// here is answered back by this broker until it restarts, is not seen by
// other brokers, and changes no behaviour (Meridian's settings come from
// its Config and are not changed at run time). The endpoints exist so that
// tools which set and read dynamic settings work against Meridian; they
// take only the names and values Pulsar would (dynamicConfigs).

// dynamicConfigs are the settings the endpoint takes: Pulsar dynamic
// settings a client is most likely to set, each with a check of its value
// as Pulsar parses it. Any other name is refused as Pulsar refuses a
// setting that is not dynamic, and a value that does not parse as Pulsar's
// refuses it (412 both), so that nothing is stored that a broker would not
// take. A boolean takes any value, as Java's Boolean.parseBoolean does
// ("true" in any case is true, anything else false): pulsaradmin's own
// tests store a JSON document in allowAutoSubscriptionCreation.
var dynamicConfigs = map[string]func(value string, d global.BrokerDefaults) error{
	"allowAutoSubscriptionCreation":     anyBoolean,
	"allowAutoTopicCreation":            anyBoolean,
	"brokerDeleteInactiveTopicsEnabled": anyBoolean,
	"allowAutoTopicCreationType": func(v string, _ global.BrokerDefaults) error {
		if t := global.TopicType(v); t != global.Partitioned && t != global.NonPartitioned {
			return fmt.Errorf("want %s or %s", global.Partitioned, global.NonPartitioned)
		}
		return nil
	},
	"defaultNumPartitions": func(v string, d global.BrokerDefaults) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("want a number of partitions of at least 1")
		}
		return d.PartitionsAllowed(int(n))
	},
	"maxUnackedMessagesPerConsumer":     nonNegativeInt,
	"maxUnackedMessagesPerSubscription": nonNegativeInt,
}

func anyBoolean(string, global.BrokerDefaults) error { return nil }

func nonNegativeInt(v string, _ global.BrokerDefaults) error {
	if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < 0 {
		return fmt.Errorf("want an integer of at least 0 (0: no limit)")
	}
	return nil
}

// checkDynamicConfig refuses a name that is not one of dynamicConfigs,
// or a value it does not take, with Pulsar's reasons.
func (h *handler) checkDynamicConfig(name, value string) error {
	check, ok := dynamicConfigs[name]
	if !ok {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("Can't update non-dynamic configuration %s (Meridian takes %s)",
			name, strings.Join(slices.Sorted(maps.Keys(dynamicConfigs)), ", "))}
	}
	if err := check(value, h.cfg.PolicyDefaults); err != nil {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("Invalid dynamic-config value for %s: %v", name, err)}
	}
	return nil
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
		if err := h.checkDynamicConfig(name, value); err != nil {
			return err
		}
		h.dyn.set(name, value)
		w.WriteHeader(http.StatusOK)
		return nil
	})
	h.handle("DELETE "+p+"/{name}", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		if _, ok := dynamicConfigs[r.PathValue("name")]; !ok {
			return pulsarReason{ErrPrecondition, "Can't delete non-dynamic configuration " + r.PathValue("name")}
		}
		if !h.dyn.remove(r.PathValue("name")) {
			return fmt.Errorf("%w: dynamic configuration %s is not set", ErrNotFound, r.PathValue("name"))
		}
		return noContent(w)
	})
}

func (h *handler) dynamicConfigNames(w http.ResponseWriter, _ *http.Request) error {
	return ok(w, slices.Sorted(maps.Keys(dynamicConfigs)))
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
