//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"google.golang.org/protobuf/proto"
)

// oneBroker describes a bed of one region, r1, with one etcd, one bookie
// and one broker, and one namespace, <Tenant>/ns.
type oneBroker struct {
	// BrokerConf is the broker's broker.conf.
	BrokerConf string
	// Tenant and Policies are created in the global store; the policies'
	// replication clusters are set to r1.
	Tenant   string
	Policies global.Policies
	// LocalClients and LogLevel are the BedConfig's.
	LocalClients bool
	LogLevel     string
}

// startOneBroker runs the bed cfg describes and returns its broker.
func startOneBroker(ctx context.Context, t *testing.T, cfg oneBroker) *Broker {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte(cfg.BrokerConf), 0o644); err != nil {
		t.Fatal(err)
	}
	bed := StartBed(t, BedConfig{Binary: meridianBin, LocalClients: cfg.LocalClients, LogLevel: cfg.LogLevel, Regions: []RegionConfig{{
		Name: "r1", EtcdMembers: 1, Bookies: 1, Brokers: 1, BrokerArgs: []string{"--config", conf},
	}}})
	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, cfg.Tenant, global.TenantInfo{AllowedClusters: []string{"r1"}}); err != nil {
		t.Fatal(err)
	}
	cfg.Policies.ReplicationClusters = []string{"r1"}
	if _, err := gs.CreateNamespace(ctx, cfg.Tenant, "ns", cfg.Policies); err != nil {
		t.Fatal(err)
	}
	return bed.Region("r1").Brokers[0]
}

// connectCommand and pongCommand are what the tests' hand-made protocol
// clients send.
func connectCommand() *pb.BaseCommand {
	return pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(), Connect: pb.CommandConnect_builder{
		ClientVersion: proto.String("e2e-raw"), ProtocolVersion: proto.Int32(20)}.Build()}.Build()
}

func pongCommand() *pb.BaseCommand {
	return pb.BaseCommand_builder{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}.Build()
}
