package global

import (
	"errors"
	"testing"
)

// TestClusterMigrationValidate: a migration is refused for a URL of the
// wrong scheme, a broker host list with a hole, or, once migrated, a target
// without a broker service URL (clients are sent a broker URL); a record
// that only notes URLs without migrating needs none of them.
func TestClusterMigrationValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    ClusterMigration
		ok   bool
	}{
		{"broker URL", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURL: "pulsar://w1:6650"}}, true},
		{"several hosts", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURL: "pulsar://w1:6650,w2:6650"}}, true},
		{"TLS only", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURLTLS: "pulsar+ssl://w1:6651"}}, true},
		{"not migrated, web URL only", ClusterMigration{MigratedClusterURL: ClusterURL{ServiceURL: "http://w1:8080"}}, true},
		{"migrated, web URL only", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{ServiceURL: "http://w1:8080"}}, false},
		{"wrong scheme", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURL: "http://w1:6650"}}, false},
		{"TLS URL without TLS", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURLTLS: "pulsar://w1:6650"}}, false},
		{"a hole in the hosts", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURL: "pulsar://w1:6650,,w2:6650"}}, false},
		{"a path", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURL: "pulsar://w1:6650/x"}}, false},
		{"no host", ClusterMigration{Migrated: true, MigratedClusterURL: ClusterURL{BrokerServiceURL: "pulsar://"}}, false},
	} {
		err := tc.m.Validate()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidCluster)) {
			t.Errorf("%s: Validate() = %v, want ok %v (else ErrInvalidCluster)", tc.name, err, tc.ok)
		}
	}
}
