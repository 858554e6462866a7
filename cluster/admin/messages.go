package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/topology"
)

// peek answers the n-th (from 1) entry a subscription has not consumed,
// without moving it: pulsar-admin's peek-messages asks for positions 1, 2,
// … until it has enough messages (a batch entry holds several).
func (h *handler) peek(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 || n > 10000 {
		return fmt.Errorf("%w: position %q is not a number in 1..10000", ErrBadRequest, r.PathValue("n"))
	}
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	es, err := tp.Peek(r.Context(), r.PathValue("sub"), n)
	if err != nil {
		return err
	}
	if len(es) < n {
		return fmt.Errorf("%w: the subscription has no message at position %d", ErrNotFound, n)
	}
	return writeEntry(w, es[n-1], h.svc.Region())
}

// messageByID answers the entry at ledger/entry.
func (h *handler) messageByID(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	l, err1 := strconv.ParseInt(r.PathValue("ledger"), 10, 64)
	e, err2 := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if err1 != nil || err2 != nil || l < 0 || e < 0 {
		return fmt.Errorf("%w: ledger %q and entry %q must be non-negative numbers", ErrBadRequest, r.PathValue("ledger"), r.PathValue("entry"))
	}
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	entry, err := tp.Message(r.Context(), mledger.Position{Ledger: l, Entry: e})
	if err != nil {
		return err
	}
	return writeEntry(w, entry, h.svc.Region())
}

// messageIDByTime answers the id of the first message published (broker
// time) at or after timestamp, Unix ms; 404 when every message is older.
func (h *handler) messageIDByTime(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	ts, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil || ts < 0 {
		return fmt.Errorf("%w: timestamp %q is not a Unix time in milliseconds", ErrBadRequest, r.PathValue("timestamp"))
	}
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	p, found, err := tp.FindByTime(r.Context(), ts)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: no message of %s was published at or after %d", ErrNotFound, t, ts)
	}
	return ok(w, positionID(p, t.Partition))
}

// writeEntry answers a stored entry as Pulsar's admin does: the payload
// (uncompressed; a batch entry's payload is its batch, which pulsaradmin
// splits) as the body, and the message metadata in X-Pulsar-* headers,
// with the BrokerEntryMetadata and the hop trail of the entry stored in
// region (setTrailHeaders).
func writeEntry(w http.ResponseWriter, e mledger.Entry, region string) error {
	bem, msg, err := e.Split()
	if err != nil {
		return fmt.Errorf("%w: entry %v: %v", wire.ErrPersistence, e.Position, err)
	}
	mdBytes, payload, err := wire.SplitMessage(msg)
	if err != nil {
		return fmt.Errorf("%w: entry %v: %v", wire.ErrPersistence, e.Position, err)
	}
	md := new(pb.MessageMetadata)
	if err := proto.Unmarshal(mdBytes, md); err != nil {
		return fmt.Errorf("%w: entry %v: metadata: %v", wire.ErrPersistence, e.Position, err)
	}
	payload, err = wire.Uncompress(md, payload)
	if err != nil {
		return fmt.Errorf("%w: entry %v: %v", wire.ErrPersistence, e.Position, err)
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("X-Pulsar-Message-ID", e.Position.String())
	hd.Set("X-Pulsar-Publish-Time", time.UnixMilli(int64(md.GetPublishTime())).UTC().Format("2006-01-02T15:04:05.000Z"))
	hd.Set("X-Pulsar-Producer-Name", md.GetProducerName())
	hd.Set("X-Pulsar-Sequence-Id", strconv.FormatUint(md.GetSequenceId(), 10))
	if md.HasNumMessagesInBatch() {
		hd.Set("X-Pulsar-Num-Batch-Message", strconv.Itoa(int(md.GetNumMessagesInBatch())))
		hd.Set("X-Pulsar-Batch-Size", strconv.Itoa(len(payload)))
	}
	if md.GetEventTime() != 0 {
		hd.Set("X-Pulsar-Event-Time", time.UnixMilli(int64(md.GetEventTime())).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if md.HasPartitionKey() {
		hd.Set("X-Pulsar-Partition-Key", md.GetPartitionKey())
	}
	if md.HasReplicatedFrom() {
		hd.Set("X-Pulsar-Replicated-From", md.GetReplicatedFrom())
	}
	if props := md.GetProperties(); len(props) > 0 {
		m := make(map[string]string, len(props))
		for _, kv := range props {
			m[kv.GetKey()] = kv.GetValue()
		}
		b, err := json.Marshal(m)
		if err == nil {
			hd.Set("X-Pulsar-Property", string(b))
		}
	}
	setTrailHeaders(hd, region, bem, md)
	hd.Set("Content-Length", strconv.Itoa(len(payload)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(payload)
	return err
}
