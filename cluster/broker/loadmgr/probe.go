package loadmgr

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// liveness is what a probe learnt about a broker.
type liveness int

const (
	// brokerUnknown: no answer within the probe's timeout, or an error that
	// proves nothing (the broker may be paused, or its host slow).
	brokerUnknown liveness = iota
	// brokerAlive: something answered CONNECT (CONNECTED, or an ERROR such
	// as an authentication failure: a process is serving the port).
	brokerAlive
	// brokerDead: the connection was refused: no process listens on the
	// port.
	brokerDead
)

func (l liveness) String() string {
	switch l {
	case brokerAlive:
		return "alive"
	case brokerDead:
		return "dead"
	}
	return "unknown"
}

// probeState is ownership's memory of probes: when each broker last
// answered, and the probes under way, which lookups of the same broker
// share rather than dial again.
type probeState struct {
	mu       sync.Mutex
	aliveAt  map[string]time.Time  // by broker id: its last answer
	inFlight map[string]*probeCall // by broker id
	dialer   net.Dialer            // the probes' connections
}

// probeCall is one probe under way; result is set before done is closed.
type probeCall struct {
	done   chan struct{}
	result liveness
}

func (p *probeState) init() {
	p.aliveAt = make(map[string]time.Time)
	p.inFlight = make(map[string]*probeCall)
}

// probe reports whether owner's process is serving its advertised service
// URL. A broker that answered within ProbeAliveFor is alive without a
// dial; concurrent probes of one broker share one dial.
func (o *ownership) probe(ctx context.Context, owner Owner) liveness {
	p := &o.probes
	now := o.clock.Now()
	p.mu.Lock()
	if at, ok := p.aliveAt[owner.BrokerID]; ok && now.Sub(at) < o.cfg.ProbeAliveFor {
		p.mu.Unlock()
		return brokerAlive
	}
	call, shared := p.inFlight[owner.BrokerID]
	if !shared {
		call = &probeCall{done: make(chan struct{})}
		p.inFlight[owner.BrokerID] = call
	}
	p.mu.Unlock()
	if shared {
		select {
		case <-call.done:
			return call.result
		case <-ctx.Done():
			return brokerUnknown
		}
	}
	// The dial is bounded by ProbeTimeout alone, not by the first caller's
	// ctx, so that the lookups sharing it get a real answer.
	call.result = o.dialProbe(owner.ServiceURL)
	p.mu.Lock()
	delete(p.inFlight, owner.BrokerID)
	if call.result == brokerAlive {
		p.aliveAt[owner.BrokerID] = o.clock.Now()
	} else {
		delete(p.aliveAt, owner.BrokerID)
	}
	p.mu.Unlock()
	close(call.done)
	if call.result != brokerAlive {
		o.log.Info("probed an owner", "owner", owner.BrokerID, "result", call.result.String())
	}
	return call.result
}

// dialProbe dials serviceURL and sends CONNECT, within ProbeTimeout, and
// tells what the answer proves. Only a pulsar:// URL is probed: any other
// is unknown, so that nothing is taken over on a guess.
func (o *ownership) dialProbe(serviceURL string) liveness {
	u, err := url.Parse(serviceURL)
	if err != nil || u.Scheme != "pulsar" || u.Host == "" {
		return brokerUnknown
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.ProbeTimeout)
	defer cancel()
	nc, err := o.probes.dialer.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return deadIfRefused(err)
	}
	defer nc.Close()
	deadline, _ := ctx.Deadline()
	if err := nc.SetDeadline(deadline); err != nil {
		return brokerUnknown
	}
	connect, err := wire.AppendCommand(nil, pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(),
		Connect: pb.CommandConnect_builder{
			ClientVersion:   proto.String("meridian-owner-probe"),
			ProtocolVersion: proto.Int32(int32(pb.ProtocolVersion_v21)),
		}.Build()}.Build())
	if err != nil {
		return brokerUnknown
	}
	if _, err := nc.Write(connect); err != nil {
		return brokerUnknown
	}
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		// Closed or reset with no reply. A live broker does that too: at
		// its connection bounds, past maxRefusing refusals, and while its
		// server closes (a write after its close draws a reset). Taking
		// that for death would revoke a busy broker's session in the middle
		// of a connection storm.
		return brokerUnknown
	}
	return brokerAlive // a reply began: CONNECTED, or ERROR
}

// deadIfRefused is dead for a refused connection (no process listens on
// the port), unknown for anything else: a timeout or an unreachable
// network proves nothing.
func deadIfRefused(err error) liveness {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return brokerDead
	}
	return brokerUnknown
}
