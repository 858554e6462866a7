package broker

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/topology"
)

// consumer is one client consumer on one connection, attached to a
// subscription. Its counters are guarded by the subscription's mu.
type consumer struct {
	c          *conn
	sub        *subscription
	id         uint64
	name       string
	priority   int32
	maxUnacked int
	since      time.Time
	metadata   map[string]string
	out        counters // delivered messages and bytes

	permits  int64       // messages the client can take; a batch may drive it below 0
	flowed   bool        // a FLOW has come: the client knows the consumer
	unacked  int         // messages delivered and not acked
	attached atomic.Bool // set once SUBSCRIBE succeeded
	// joinedAfter is, for a Key_Shared consumer that joined a running
	// subscription, the read position at its joining (see subscription).
	joinedAfter *mledger.Position
	// When it last acked, was sent a message, and sent FLOW, in unix
	// milliseconds (0: never): Pulsar's lastAckedTimestamp,
	// lastConsumedTimestamp and lastConsumedFlowTimestamp.
	lastAck, lastConsumed, lastFlow atomic.Int64
}

// disconnect is the broker closing the consumer (topic unloaded, or a
// seek): CLOSE_CONSUMER tells the client to subscribe again. It only
// queues that frame, so a peer that does not read holds up nothing.
func (c *consumer) disconnect(ctx context.Context) { c.disconnectTo(ctx, nil) }

// disconnectTo closes the consumer with CLOSE_CONSUMER, carrying the new
// owner's URLs when the topic moved to a known broker (dest).
func (c *consumer) disconnectTo(ctx context.Context, dest *loadmgr.Owner) {
	if !c.c.forgetConsumer(c) {
		return
	}
	c.detach(ctx)
	b := pb.CommandCloseConsumer_builder{ConsumerId: ptr(c.id), RequestId: ptr(uint64(0))}
	if dest != nil {
		b.AssignedBrokerServiceUrl, b.AssignedBrokerServiceUrlTls = c.c.assignedURLs(*dest)
	}
	c.c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: b.Build()}.Build())
}

// detach removes the consumer from its subscription; a reader's
// subscription ends with its last consumer, closed by ctx's deadline.
func (c *consumer) detach(ctx context.Context) {
	if c.sub.removeConsumer(c) {
		c.sub.lastActive.Store(c.sub.clock.Now().UnixMilli())
		c.sub.endIfUnused(ctx)
	}
}

// endIfUnused ends a reader's (non-durable) subscription that has no
// consumer left (detach), or never had one: a SUBSCRIBE created it and
// then could not attach its consumer, and nothing else would end it.
// A SUBSCRIBE of the same name that found it meanwhile either fails to
// attach (the subscription is closing) or is told to go (CLOSE_CONSUMER);
// either way the client subscribes again, to a new subscription, rather
// than wait on one that delivers nothing.
func (s *subscription) endIfUnused(ctx context.Context) {
	if s.cursor.Durable() || s.seeking.Load() || s.consumerCount() > 0 {
		return
	}
	s.topic.forgetSubscription(s)
	s.close(ctx, true)
}

// closeContext bounds a close that the connection starts (its
// Config.CloseTimeout).
func (c *conn) closeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.srv.cfg.CloseTimeout)
}

// keyValues turns the wire's key-value list into a map.
func keyValues(kvs []*pb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// initialPosition maps SUBSCRIBE's initial position.
func initialPosition(p pb.CommandSubscribe_InitialPosition) mledger.InitialPosition {
	if p == pb.CommandSubscribe_Earliest {
		return mledger.Earliest
	}
	return mledger.Latest
}

func (c *conn) handleSubscribe(req *pb.CommandSubscribe) {
	reqID := req.GetRequestId()
	t, err := parseTopic(req.GetTopic())
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if req.GetSubscription() == "" {
		c.sendError(reqID, fmt.Errorf("%w: empty subscription name", wire.ErrNotAllowed))
		return
	}
	if err := c.authorize(auth.ActionConsume, t); err != nil {
		c.sendError(reqID, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.OperationTimeout)
	defer cancel()
	topic, err := c.srv.topics.Topic(ctx, t, req.GetForceTopicCreation())
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if _, err := c.consumerFor(req.GetConsumerId()); err != nil {
		// Not a consumer the connection holds, asked for again: a new
		// subscribe, or a reconnect, which the rate counts.
		if err := c.admitSubscribe(topic, req.GetConsumerName(), req.GetConsumerId()); err != nil {
			c.sendError(reqID, err)
			return
		}
	}
	eff, err := topic.svc.resolve(t)
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	if err := topic.svc.consumerSchema(ctx, topic, eff, req.GetSchema()); err != nil {
		c.sendError(reqID, err)
		return
	}
	if err := topic.admitConsumer(eff.MaxConsumersPerTopic); err != nil {
		c.sendError(reqID, err)
		return
	}
	if err := topic.admitSubscription(req.GetSubscription(), eff.MaxSubscriptionsPerTopic); err != nil {
		c.sendError(reqID, err)
		return
	}
	durable := !req.HasDurable() || req.GetDurable()
	if durable && !topic.mayCreateOnSubscribe(req.GetSubscription(), eff) {
		c.sendError(reqID, fmt.Errorf("%w: Subscription does not exist", wire.ErrSubscriptionNotFound))
		return
	}
	var start *pb.MessageIdData
	if !durable {
		start = req.GetStartMessageId()
	}
	sub, err := topic.subscription(ctx, req.GetSubscription(), req.GetSubType(), durable, initialPosition(req.GetInitialPosition()), start)
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	// As Pulsar: the flag turns replication on, and its absence never turns
	// it off (that is the admin API's).
	if req.GetReplicateSubscriptionState() && durable {
		if err := sub.setReplicated(true); err != nil {
			c.sendError(reqID, fmt.Errorf("%w: replicate subscription %s: %v", wire.ErrServiceNotReady, sub.name, err))
			return
		}
	}
	maxUnacked := topic.svc.cfg.Dispatch.MaxUnackedPerConsumer
	if n := eff.MaxUnackedMessagesOnConsumer; n != nil {
		maxUnacked = *n
		if maxUnacked == 0 {
			maxUnacked = math.MaxInt // Pulsar's 0: no limit
		}
	}
	cons := &consumer{c: c, sub: sub, id: req.GetConsumerId(), name: req.GetConsumerName(), priority: req.GetPriorityLevel(),
		maxUnacked: maxUnacked, since: c.srv.clock.Now(), metadata: keyValues(req.GetMetadata())}
	// A reader's subscription this SUBSCRIBE created, and then could not
	// attach cons to, would otherwise stay without a consumer.
	abandon := func() {
		cctx, cancel := c.closeContext()
		defer cancel()
		sub.endIfUnused(cctx)
	}
	taken, full := c.addConsumer(cons)
	if full != nil {
		abandon()
		c.sendError(reqID, full)
		return
	}
	if taken {
		// The client asks again for a consumer it holds here: its request
		// timed out, or one disconnect made it reconnect twice. Answered
		// as the first was, once that one is attached, as Pulsar does; but
		// what the consumer was sent goes back for redelivery (see
		// resubscribed).
		if held, err := c.consumerFor(cons.id); err == nil && held.sub == sub && held.attached.Load() {
			sub.resubscribed(held)
			c.sendSuccess(reqID)
			return
		}
		abandon()
		c.sendError(reqID, fmt.Errorf("%w: consumer %d is already present on the connection", wire.ErrServiceNotReady, cons.id))
		return
	}
	if rs := topic.rs; rs != nil && sub.replicated() && sub.consumerCount() == 0 {
		// The first consumer may have come from another region: start it
		// from what that region last wrote (replicatedSubs.catchUp).
		cctx, cancel := context.WithTimeout(ctx, replicatedCatchUpTimeout)
		if err := rs.catchUp(cctx); err != nil {
			topic.svc.log.Warn("replicated subscription: the other regions' states not read before a consumer attached; it may get messages acked there",
				"topic", topic.Name(), "subscription", sub.name, "err", err)
		}
		cancel()
	}
	if err := sub.addConsumer(cons, req.GetSubType(), req.GetKeySharedMeta(), eff.MaxConsumersPerSubscription); err != nil {
		c.forgetConsumer(cons)
		abandon()
		c.sendError(reqID, err)
		return
	}
	if held, _ := c.consumerFor(cons.id); held != cons {
		// The connection closed meanwhile, and its release may have missed
		// this consumer: detach it here.
		ctx, cancel := c.closeContext()
		defer cancel()
		cons.detach(ctx)
		return
	}
	cons.attached.Store(true)
	c.sendSuccess(reqID)
}

// consumerFor returns the consumer id names on this connection.
func (c *conn) consumerFor(id uint64) (*consumer, error) {
	if cons, ok := registered(c, c.mu.consumers, id); ok {
		return cons, nil
	}
	return nil, fmt.Errorf("%w: consumer %d not found on this connection", wire.ErrConsumerNotFound, id)
}

func (c *conn) addConsumer(cons *consumer) (taken bool, full error) {
	return register(c, c.mu.consumers, cons.id, cons, c.srv.cfg.MaxConsumersPerConnection, "consumers")
}

func (c *conn) forgetConsumer(cons *consumer) bool {
	return unregister(c, c.mu.consumers, cons.id, cons)
}

func (c *conn) handleFlow(req *pb.CommandFlow) {
	cons, err := c.consumerFor(req.GetConsumerId())
	if err != nil {
		c.log.Debug("FLOW for an unknown consumer", "consumer", req.GetConsumerId())
		return
	}
	cons.sub.flow(cons, req.GetMessagePermits())
}

func (c *conn) handleAck(req *pb.CommandAck) {
	cons, err := c.consumerFor(req.GetConsumerId())
	if err == nil {
		err = cons.sub.ack(cons, req.GetAckType() == pb.CommandAck_Cumulative, req.GetMessageId())
	}
	if err != nil {
		c.log.Debug("ack refused", "consumer", req.GetConsumerId(), "err", err)
	}
	if !req.HasRequestId() {
		return
	}
	resp := pb.CommandAckResponse_builder{ConsumerId: ptr(req.GetConsumerId()), RequestId: ptr(req.GetRequestId())}
	if err != nil {
		code, msg := wire.ToWire(err)
		resp.Error, resp.Message = &code, &msg
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: resp.Build()}.Build())
}

func (c *conn) handleRedeliver(req *pb.CommandRedeliverUnacknowledgedMessages) {
	cons, err := c.consumerFor(req.GetConsumerId())
	if err != nil {
		c.log.Debug("REDELIVER for an unknown consumer", "consumer", req.GetConsumerId())
		return
	}
	cons.sub.redeliver(cons, req.GetMessageIds())
}

func (c *conn) handleCloseConsumer(req *pb.CommandCloseConsumer) {
	if cons, err := c.consumerFor(req.GetConsumerId()); err == nil && c.forgetConsumer(cons) {
		ctx, cancel := c.closeContext()
		defer cancel()
		cons.detach(ctx)
	}
	c.sendSuccess(req.GetRequestId())
}

func (c *conn) handleUnsubscribe(req *pb.CommandUnsubscribe) {
	cons, err := c.consumerFor(req.GetConsumerId())
	if err == nil {
		err = cons.sub.unsubscribe(c.ctx, cons)
	}
	if err != nil {
		c.sendError(req.GetRequestId(), err)
		return
	}
	c.forgetConsumer(cons)
	c.sendSuccess(req.GetRequestId())
}

func (c *conn) handleSeek(req *pb.CommandSeek) {
	cons, err := c.consumerFor(req.GetConsumerId())
	if err == nil {
		var ts *uint64
		if req.HasMessagePublishTime() {
			ts = ptr(req.GetMessagePublishTime())
		} else if !req.HasMessageId() {
			err = fmt.Errorf("%w: SEEK needs a message id or a publish time", wire.ErrNotAllowed)
		}
		if err == nil {
			err = cons.sub.seek(c.ctx, req.GetMessageId(), ts)
		}
	}
	if err != nil {
		c.sendError(req.GetRequestId(), err)
		return
	}
	c.sendSuccess(req.GetRequestId())
}

func (c *conn) handleGetLastMessageID(req *pb.CommandGetLastMessageId) {
	reqID := req.GetRequestId()
	cons, err := c.consumerFor(req.GetConsumerId())
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	topic := cons.sub.topic
	last := topic.ml.LastConfirmed()
	id := pb.MessageIdData_builder{LedgerId: ptr(uint64(last.Ledger)), EntryId: ptr(uint64(last.Entry))}
	if last.Entry >= 0 {
		es, err := topic.ml.ReadAt(c.ctx, last, 1)
		if err != nil {
			c.sendError(reqID, fmt.Errorf("%w: read last entry: %v", wire.ErrPersistence, err))
			return
		}
		if e, err := newDispatchEntry(es[0]); err == nil && e.md.HasNumMessagesInBatch() {
			id.BatchIndex = ptr(int32(e.size - 1))
		}
	}
	md := cons.sub.cursor.MarkDeletePosition()
	if part := topic.name.Partition; part >= 0 {
		id.Partition = ptr(int32(part))
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE.Enum(),
		GetLastMessageIdResponse: pb.CommandGetLastMessageIdResponse_builder{
			RequestId:     ptr(reqID),
			LastMessageId: id.Build(),
			ConsumerMarkDeletePosition: pb.MessageIdData_builder{
				LedgerId: ptr(uint64(md.Ledger)), EntryId: ptr(uint64(md.Entry)),
			}.Build(),
		}.Build()}.Build())
}

func (c *conn) handleGetTopicsOfNamespace(req *pb.CommandGetTopicsOfNamespace) {
	reqID := req.GetRequestId()
	ns, err := topology.ParseTopicName(req.GetNamespace() + "/x")
	var names []string
	if err == nil {
		if err = c.authorizeListTopics(ns.Tenant, ns.Namespace); err == nil {
			names, err = c.srv.topics.TopicsOfNamespace(c.ctx, ns.Tenant, ns.Namespace)
		}
	} else {
		err = fmt.Errorf("%w: bad namespace %q", wire.ErrNotAllowed, req.GetNamespace())
	}
	if err != nil {
		c.sendError(reqID, err)
		return
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE.Enum(),
		GetTopicsOfNamespaceResponse: pb.CommandGetTopicsOfNamespaceResponse_builder{
			RequestId: ptr(reqID), Topics: names, Filtered: ptr(false), Changed: ptr(true),
		}.Build()}.Build())
}

// sendMessage queues one entry for a consumer, prefixed with its
// BrokerEntryMetadata when the client announced support. It never waits:
// it reports false when the connection's message queue is full, and the
// dispatcher keeps the entry for later or for another consumer.
func (c *conn) sendMessage(consumerID uint64, e *dispatchEntry, redelivered uint32, ackSet []int64) bool {
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_MESSAGE.Enum(), Message: pb.CommandMessage_builder{
		ConsumerId:      ptr(consumerID),
		MessageId:       pb.MessageIdData_builder{LedgerId: ptr(uint64(e.pos.Ledger)), EntryId: ptr(uint64(e.pos.Entry))}.Build(),
		RedeliveryCount: ptr(redelivered),
		AckSet:          ackSet,
	}.Build()}.Build()
	m := outbound{cmd: cmd, msg: e.msg}
	if c.brokerEntryMetadata {
		m.bem = e.bem
	}
	return c.msgs.push(m)
}

func (c *conn) sendSuccess(reqID uint64) {
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUCCESS.Enum(),
		Success: pb.CommandSuccess_builder{RequestId: ptr(reqID)}.Build()}.Build())
}

// sendError answers a request with ERROR. Errors not from the wire table
// are unknown to the client and become UnknownError with their text.
func (c *conn) sendError(reqID uint64, err error) {
	code, msg := wire.ToWire(err)
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ERROR.Enum(),
		Error: pb.CommandError_builder{RequestId: ptr(reqID), Error: &code, Message: &msg}.Build()}.Build())
}
