package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Admin is what a drill asks of the admin REST API. Every call but the
// per-region ones (region != "") goes to the admin URL the drill was given,
// which may be any region's: the configuration they read and write is
// global.
type Admin interface {
	// Clusters lists the regions of the cluster registry.
	Clusters(ctx context.Context) ([]string, error)
	// Cluster reads one region's record.
	Cluster(ctx context.Context, name string) (ClusterRecord, error)
	// Namespace reads what a drill needs of a namespace's policies;
	// ErrNotFound when it does not exist.
	Namespace(ctx context.Context, namespace string) (NamespaceRecord, error)
	// CreateTopic creates a non-partitioned topic (in region's brokers).
	CreateTopic(ctx context.Context, region, topic string) error
	// DeleteTopic deletes a topic in region, with its subscriptions;
	// ErrNotFound when it is not there.
	DeleteTopic(ctx context.Context, region, topic string) error
	// Topics lists the persistent topics of namespace stored in region.
	Topics(ctx context.Context, region, namespace string) ([]string, error)
	// SetTopicActiveRegion sets the topic-level active region (over the
	// namespace's; switched by hand, it takes no fallbacks);
	// RemoveTopicActiveRegion removes it.
	SetTopicActiveRegion(ctx context.Context, topic, region string) error
	RemoveTopicActiveRegion(ctx context.Context, topic string) error
	// Replication is the state of topic's replication from region to
	// remote, from region's topic stats.
	Replication(ctx context.Context, region, topic, remote string) (ReplicationState, error)
	// SetNamespaceActiveRegion sets the namespace's active region.
	SetNamespaceActiveRegion(ctx context.Context, namespace string, ar ActiveRegion) error
	// CreateFence, RenewFence and DeleteFence hold an isolate fence
	// (ErrNotFound from the last two once it is gone); Fences lists a
	// namespace's.
	CreateFence(ctx context.Context, namespace, name string, f Fence) error
	RenewFence(ctx context.Context, namespace, name string) error
	DeleteFence(ctx context.Context, namespace, name string) error
	Fences(ctx context.Context, namespace string) ([]Fence, error)
}

// ErrNotFound is the admin API's 404.
var ErrNotFound = errors.New("drill: not found")

// ClusterRecord is a region's record in the cluster registry.
type ClusterRecord struct {
	ServiceURL       string `json:"serviceUrl"`
	BrokerServiceURL string `json:"brokerServiceUrl"`
}

// NamespaceRecord is what a drill reads of a namespace.
type NamespaceRecord struct {
	ReplicationClusters []string `json:"replication_clusters"`
	// Active is the namespace's active region, with its fallbacks; empty
	// when none.
	Active ActiveRegion `json:"-"`
	// AutoFailover is whether automatic failover is on.
	AutoFailover bool `json:"-"`
}

// ActiveRegion is the body of the activeRegion endpoints (a topic's takes
// no fallbacks).
type ActiveRegion struct {
	ActiveRegion    string   `json:"activeRegion"`
	FallbackRegions []string `json:"fallbackRegions,omitempty"`
}

// ReplicationState is a topic's replication to one remote region.
type ReplicationState struct {
	// Backlog counts the entries the replicator has yet to pass: to send,
	// or to pass over (those that came from another region).
	Backlog int64
	// Delay is the age of the oldest of them, in whole seconds (Pulsar's
	// replicationDelayInSeconds); zero without a backlog.
	Delay time.Duration
	// Connected: the replicator is connected to the remote region.
	Connected bool
}

// Fence is the body of the fences endpoint.
type Fence struct {
	Name        string `json:"name,omitempty"`
	Region      string `json:"region"`
	TopicPrefix string `json:"topicPrefix"`
	TTLSeconds  int    `json:"ttlSeconds"`
	Holder      string `json:"holder,omitempty"`
}

// HTTPAdmin is Admin over HTTP. Client carries the credentials (its
// Transport adds them, as pulsaradmin's auth providers do).
type HTTPAdmin struct {
	URL    string
	Client *http.Client
	// AdminURLs are the regions' web service URLs, for the per-region
	// calls: from the cluster records, overridden by Config.AdminURLs.
	AdminURLs map[string]string
}

// StatusError is an answer other than 2xx, with Pulsar's reason.
type StatusError struct {
	Method, URL string
	Status      int
	Reason      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, e.Reason)
}

// Unwrap makes a 404 ErrNotFound.
func (e *StatusError) Unwrap() error {
	if e.Status == http.StatusNotFound {
		return ErrNotFound
	}
	return nil
}

// do sends one request to base+path with body (JSON, nil for none) and
// decodes a JSON answer into out (nil to ignore it).
func (a *HTTPAdmin) do(ctx context.Context, method, base, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := strings.TrimSuffix(base, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		var r struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(data, &r) != nil || r.Reason == "" {
			r.Reason = strings.TrimSpace(string(data))
		}
		return &StatusError{Method: method, URL: u, Status: resp.StatusCode, Reason: r.Reason}
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, u, err)
	}
	return nil
}

// regionURL is region's admin URL.
func (a *HTTPAdmin) regionURL(region string) (string, error) {
	if u := a.AdminURLs[region]; u != "" {
		return u, nil
	}
	return "", fmt.Errorf("%w: region %s has no web service URL (give --admin-url-of %s=URL)", ErrInvalidConfig, region, region)
}

// topicPath is the admin path of a persistent topic (tenant/ns/local).
func topicPath(topic string) string {
	return "/admin/v2/persistent/" + strings.TrimPrefix(topic, "persistent://")
}

func (a *HTTPAdmin) Clusters(ctx context.Context) ([]string, error) {
	var out []string
	return out, a.do(ctx, http.MethodGet, a.URL, "/admin/v2/clusters", nil, &out)
}

func (a *HTTPAdmin) Cluster(ctx context.Context, name string) (ClusterRecord, error) {
	var out ClusterRecord
	return out, a.do(ctx, http.MethodGet, a.URL, "/admin/v2/clusters/"+url.PathEscape(name), nil, &out)
}

func (a *HTTPAdmin) Namespace(ctx context.Context, namespace string) (NamespaceRecord, error) {
	var out NamespaceRecord
	if err := a.do(ctx, http.MethodGet, a.URL, "/admin/v2/namespaces/"+namespace, nil, &out); err != nil {
		return out, err
	}
	if err := a.do(ctx, http.MethodGet, a.URL, "/admin/v2/namespaces/"+namespace+"/activeRegion", nil, &out.Active); err != nil {
		return out, err
	}
	var af struct {
		DelaySeconds int `json:"delaySeconds"`
	}
	if err := a.do(ctx, http.MethodGet, a.URL, "/admin/v2/namespaces/"+namespace+"/autoFailover", nil, &af); err != nil && !errors.Is(err, ErrNotFound) {
		return out, err
	}
	out.AutoFailover = af.DelaySeconds > 0
	return out, nil
}

func (a *HTTPAdmin) CreateTopic(ctx context.Context, region, topic string) error {
	base, err := a.regionURL(region)
	if err != nil {
		return err
	}
	return a.do(ctx, http.MethodPut, base, topicPath(topic), nil, nil)
}

func (a *HTTPAdmin) DeleteTopic(ctx context.Context, region, topic string) error {
	base, err := a.regionURL(region)
	if err != nil {
		return err
	}
	return a.do(ctx, http.MethodDelete, base, topicPath(topic)+"?force=true", nil, nil)
}

func (a *HTTPAdmin) Topics(ctx context.Context, region, namespace string) ([]string, error) {
	base, err := a.regionURL(region)
	if err != nil {
		return nil, err
	}
	var out []string
	return out, a.do(ctx, http.MethodGet, base, "/admin/v2/namespaces/"+namespace+"/topics", nil, &out)
}

func (a *HTTPAdmin) SetTopicActiveRegion(ctx context.Context, topic, region string) error {
	return a.do(ctx, http.MethodPost, a.URL, topicPath(topic)+"/activeRegion", ActiveRegion{ActiveRegion: region}, nil)
}

func (a *HTTPAdmin) RemoveTopicActiveRegion(ctx context.Context, topic string) error {
	return a.do(ctx, http.MethodDelete, a.URL, topicPath(topic)+"/activeRegion", nil, nil)
}

func (a *HTTPAdmin) Replication(ctx context.Context, region, topic, remote string) (ReplicationState, error) {
	base, err := a.regionURL(region)
	if err != nil {
		return ReplicationState{}, err
	}
	var stats struct {
		Replication map[string]struct {
			Connected                 bool  `json:"connected"`
			ReplicationBacklog        int64 `json:"replicationBacklog"`
			ReplicationDelayInSeconds int64 `json:"replicationDelayInSeconds"`
		} `json:"replication"`
	}
	if err := a.do(ctx, http.MethodGet, base, topicPath(topic)+"/stats", nil, &stats); err != nil {
		return ReplicationState{}, err
	}
	r := stats.Replication[remote]
	return ReplicationState{Backlog: r.ReplicationBacklog, Delay: time.Duration(r.ReplicationDelayInSeconds) * time.Second,
		Connected: r.Connected}, nil
}

func (a *HTTPAdmin) SetNamespaceActiveRegion(ctx context.Context, namespace string, ar ActiveRegion) error {
	return a.do(ctx, http.MethodPost, a.URL, "/admin/v2/namespaces/"+namespace+"/activeRegion", ar, nil)
}

func (a *HTTPAdmin) CreateFence(ctx context.Context, namespace, name string, f Fence) error {
	return a.do(ctx, http.MethodPost, a.URL, "/admin/v2/namespaces/"+namespace+"/fences/"+url.PathEscape(name), f, nil)
}

func (a *HTTPAdmin) RenewFence(ctx context.Context, namespace, name string) error {
	return a.do(ctx, http.MethodPost, a.URL, "/admin/v2/namespaces/"+namespace+"/fences/"+url.PathEscape(name)+"/renew", nil, nil)
}

func (a *HTTPAdmin) DeleteFence(ctx context.Context, namespace, name string) error {
	return a.do(ctx, http.MethodDelete, a.URL, "/admin/v2/namespaces/"+namespace+"/fences/"+url.PathEscape(name), nil, nil)
}

func (a *HTTPAdmin) Fences(ctx context.Context, namespace string) ([]Fence, error) {
	var out []Fence
	return out, a.do(ctx, http.MethodGet, a.URL, "/admin/v2/namespaces/"+namespace+"/fences", nil, &out)
}
