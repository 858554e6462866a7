package admin

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/topology"
)

// lookupData is Pulsar's LookupData, what /lookup/v2 answers (pulsaradmin's
// utils.LookupData and pulsar-client-go's httpLookupData read it).
type lookupData struct {
	BrokerURL    string `json:"brokerUrl"`
	BrokerURLTLS string `json:"brokerUrlTls"`
	HTTPURL      string `json:"httpUrl"`
	HTTPURLTLS   string `json:"httpUrlTls"`
	NativeURL    string `json:"nativeUrl"`
}

// partitionedMetadata is Pulsar's PartitionedTopicMetadata.
type partitionedMetadata struct {
	Partitions int `json:"partitions"`
}

func (h *handler) routeLookups() {
	// /lookup/v2/destination is the path of old-style (V1) names; a V2 name
	// sent there is answered alike.
	for _, prefix := range []string{"/lookup/v2/topic", "/lookup/v2/destination"} {
		h.handleTopic("GET", prefix, "", opLookup, h.lookup)
		h.handleTopic("GET", prefix, "/bundle", opLookup, h.bundle)
	}
	h.handleTopic("GET", "/admin/v2", "/partitions", opLookup, h.partitions)
}

// listenerNameHeader is the header in which Pulsar's Java client names
// its advertised listener on an HTTP lookup; the listenerName query
// parameter, which wins, does the same.
const listenerNameHeader = "X-Pulsar-ListenerName"

// lookup answers where t is served: the broker URLs of the advertised
// listener the request names, if any (as the binary lookup does), and the
// owner's web URL. A namespace whose active region is another region
// redirects there, as a Pulsar lookup redirects to the cluster that serves
// it; the client follows. It takes one of the broker's lookup permits, the
// binary lookups' bound: none left is 429.
func (h *handler) lookup(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	release, err := h.svc.LookupPermits().Acquire()
	if err != nil {
		return err
	}
	defer release()
	listener := r.URL.Query().Get("listenerName")
	if listener == "" {
		listener = r.Header.Get(listenerNameHeader)
	}
	loc, err := h.svc.Lookup(r.Context(), t, broker.LookupOptions{Listener: listener})
	if err != nil {
		return err
	}
	if loc.Redirect && loc.WebURL != "" && !sameURL(loc.WebURL, h.svc.Self().WebURL) {
		return &redirect{url: strings.TrimSuffix(loc.WebURL, "/") + r.URL.RequestURI()}
	}
	return ok(w, lookupData{BrokerURL: loc.ServiceURL, BrokerURLTLS: loc.ServiceURLTLS, HTTPURL: loc.WebURL,
		NativeURL: loc.ServiceURL})
}

// bundle answers the range of the bundle t falls in, as plain text
// ("0x00000000_0x40000000"), as Pulsar does.
func (h *handler) bundle(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	b, err := h.svc.Bundle(t)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain")
	_, err = fmt.Fprint(w, b.String())
	return err
}

// partitions answers t's partitioned metadata. With
// checkAllowAutoCreation=true (the HTTP lookup of a client about to
// produce or consume) a partitioned topic is created when the namespace's
// auto-creation policy says so, as the binary protocol's
// PARTITIONED_METADATA does, and under a lookup permit as it is; otherwise
// only the stored metadata is read.
func (h *handler) partitions(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	check, err := queryBool(r, "checkAllowAutoCreation")
	if err != nil {
		return err
	}
	if check {
		release, err := h.svc.LookupPermits().Acquire()
		if err != nil {
			return err
		}
		defer release()
		n, err := h.svc.Partitions(r.Context(), t)
		if err != nil {
			return err
		}
		return ok(w, partitionedMetadata{Partitions: n})
	}
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	return ok(w, partitionedMetadata{Partitions: n})
}

// partitionCount is t's partition count from the cache, 0 for a topic that
// is not partitioned; a namespace that does not exist is ErrNotFound.
func (h *handler) partitionCount(t topology.TopicName) (int, error) {
	if t.IsPartition() {
		return 0, nil
	}
	if err := h.namespaceExists(t.Tenant, t.Namespace); err != nil {
		return 0, err
	}
	tp, _ := h.svc.Policies().Topic(t)
	return tp.Partitions, nil
}

func (h *handler) namespaceExists(tenant, ns string) error {
	if _, ok := h.svc.Policies().Namespace(tenant, ns); !ok {
		return fmt.Errorf("%w: namespace %s/%s does not exist", ErrNotFound, tenant, ns)
	}
	return nil
}

// sameURL compares two base URLs, ignoring a trailing slash and case.
func sameURL(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/"))
}

// owner reports whether this broker serves t, and the web URL of the
// broker that does when it is another. A namespace whose active region is
// elsewhere is still administered where its topics are stored: the topic
// is tried here.
func (h *handler) owner(r *http.Request, t topology.TopicName) (local bool, webURL string, err error) {
	loc, err := h.svc.Lookup(r.Context(), t, broker.LookupOptions{})
	if err != nil {
		return false, "", err
	}
	if loc.Redirect || loc.WebURL == "" || sameURL(loc.WebURL, h.svc.Self().WebURL) {
		return true, "", nil
	}
	return false, loc.WebURL, nil
}

// localOrRedirect returns nil when this broker serves t, else a redirect of
// the request to the broker that does.
func (h *handler) localOrRedirect(r *http.Request, t topology.TopicName) error {
	local, url, err := h.owner(r, t)
	if err != nil || local {
		return err
	}
	return &redirect{url: strings.TrimSuffix(url, "/") + r.URL.RequestURI()}
}
