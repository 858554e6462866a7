package broker

import (
	"testing"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
)

// TestAssignedURLsFollowTheConnectionsListener: a hand-off's CLOSE_PRODUCER
// and CLOSE_CONSUMER send the client to the new owner's URLs of the
// listener the connection's lookups named; where that is not known, or the
// owner has no such listener, they send no URL and the client looks the
// topic up. A broker without listeners sends its URLs, as always.
func TestAssignedURLsFollowTheConnectionsListener(t *testing.T) {
	plain := loadmgr.Owner{BrokerID: "b2", ServiceURL: "pulsar://10.0.0.6:6650", ServiceURLTLS: "pulsar+ssl://10.0.0.6:6651"}
	listening := plain
	listening.Listeners = map[string]loadmgr.Listener{
		"internal": {ServiceURL: "pulsar://10.0.0.6:6650", ServiceURLTLS: "pulsar+ssl://10.0.0.6:6651"},
		"external": {ServiceURL: "pulsar://b2.example.com:16650"},
	}
	lookedUp := func(name string) *string { return &name }
	for _, tc := range []struct {
		name               string
		lookup             *string // the last lookup's listener; nil for none
		dest               loadmgr.Owner
		wantPlain, wantTLS string // "" is no URL
	}{
		{"no listeners, no lookup", nil, plain, "pulsar://10.0.0.6:6650", "pulsar+ssl://10.0.0.6:6651"},
		{"no listeners, a lookup", lookedUp(""), plain, "pulsar://10.0.0.6:6650", "pulsar+ssl://10.0.0.6:6651"},
		{"listeners, no lookup", nil, listening, "", ""},
		{"listeners, a lookup naming none", lookedUp(""), listening, "pulsar://10.0.0.6:6650", "pulsar+ssl://10.0.0.6:6651"},
		{"listeners, a lookup naming external", lookedUp("external"), listening, "pulsar://b2.example.com:16650", ""},
		{"listeners, a lookup naming one the owner lacks", lookedUp("vpn"), listening, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{}
			if tc.lookup != nil {
				c.lookupListener.Store(tc.lookup)
			}
			p, s := c.assignedURLs(tc.dest)
			if got := deref(p); got != tc.wantPlain {
				t.Errorf("assignedBrokerServiceUrl %q, want %q", got, tc.wantPlain)
			}
			if got := deref(s); got != tc.wantTLS {
				t.Errorf("assignedBrokerServiceUrlTls %q, want %q", got, tc.wantTLS)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
