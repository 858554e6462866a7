package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// dedupCursor is the cursor whose properties hold a topic's deduplication
// snapshot, named as Pulsar names it. It is not a subscription.
const dedupCursor = "pulsar.dedup"

// dedup is a topic's message deduplication state: per producer name, the
// highest sequence id stored (persisted) and the highest handed to the
// managed ledger (pushed, which runs ahead by the appends in flight).
//
// The rule (DESIGN §5): a SEND whose sequence ids (a batch's run from its
// first to its highest, batchHighest) are none above the persisted highest
// of its producer is a duplicate. It is not stored and still gets a
// receipt, after the receipts of everything sent before it. One whose
// first id is above the persisted highest but not above the pushed one is
// in doubt: an earlier copy is on its way to storage and may still fail,
// so it gets a SEND_ERROR and the client sends it again (see push). A
// batch that runs from at or below the persisted highest to above it is
// stored without its messages at or below it (sendOverlap).
//
// A failure never lets a producer's messages be stored out of order or
// twice: once one of a producer's appends fails, its later SENDs fail too
// (producer.publish), and what was pushed falls back to what is persisted,
// but not below the appends still pending (failedLocked).
//
// Recording: a tracked append's future goes to the state's recorder in the
// managed ledger's order (Topic.append holds appendMu across the append
// and the queueing), and the recorder, one goroutine of the topic, marks
// each entry stored or failed as its future completes. So the state
// records entries in the order they are stored, whatever becomes of the
// producer or the connection that sent them, and the last entry recorded
// is one before which every entry is recorded: what a snapshot may cover.
// (Recorded by each producer's receipt goroutine, as before, a snapshot
// for one producer could cover another's entry not yet recorded, or one
// whose connection closed before its receipt, and the next owner stored
// that producer's resend a second time.)
//
// Durability: every SnapshotInterval stored entries, and when entries
// were stored since a snapshot older than the topic's snapshot time
// (snapshotIfOlder: a quiet topic's), the persisted map is
// written into the properties of the pulsar.dedup cursor and the cursor is
// acked up to the entry the snapshot covers, properties first: a snapshot
// is never newer than its properties. The cursor is durable, so it holds
// the topic's ledgers back from retention until a snapshot moves it. A reload restores the properties and
// replays the entries after the cursor's mark-delete position, reading each
// entry's producer_name and sequence ids from its metadata. So the state
// survives restarts and ownership moves, and a reload replays at most
// SnapshotInterval entries (plus those of the last cursor persist interval).
//
// The state is tracked for every topic, since it costs a map update per
// entry, so that turning deduplication on needs no history; the rule is
// applied only to producers that deduplicate (the namespace's policy, or a
// replication producer).
type dedup struct {
	cursor   *mledger.Cursor
	interval int
	clock    clockwork.Clock

	mu        sync.Mutex
	pushed    map[string]int64
	persisted map[string]int64
	// pending counts, per producer name, the appends queued for the
	// recorder and not yet recorded, with the highest of them: what a
	// failure must not forget, since those may yet be stored.
	pending map[string]pendingAppends
	changed map[string]struct{} // persisted entries not yet in a snapshot
	since   int                 // entries stored since the last snapshot
	// snapshotAt is when the last snapshot was written, or the state
	// opened.
	snapshotAt time.Time
	// recorded is the position of the last entry the recorder marked
	// stored (valid when hasRecorded): what a snapshot may cover.
	recorded    mledger.Position
	hasRecorded bool

	// appends feeds the recorder; recorderDone is closed when it has
	// recorded everything queued before stopRecording.
	appends      chan trackedAppend
	recorderDone chan struct{}
	// stopping is closed as stopRecording begins, so that a queueAppend
	// waiting for room (the recorder is behind a slow store) gives up
	// rather than hold queue's lock against it.
	stopping chan struct{}
	stopOnce sync.Once
	// queue serialises the queueing (its caller holds Topic.appendMu, so
	// appends queue in the managed ledger's order) against the end of the
	// queue. stopped is set, and appends closed, under it.
	queue struct {
		sync.Mutex
		stopped bool
	}
}

// appendResult is what the recorder needs of an append:
// *mledger.AppendFuture.
type appendResult interface {
	Done() <-chan struct{}
	Result() (mledger.Position, error)
}

// pendingAppends are one producer name's appends that the recorder has not
// recorded yet. highest is the highest id of them: appends complete in the
// order they were queued, and a name's new appends only ever raise its
// ids, so the last one queued, which has the highest, is pending as long as
// any is.
type pendingAppends struct {
	n       int
	highest int64
}

// trackedAppend is an append deduplication tracks, for the recorder.
type trackedAppend struct {
	name    string
	highest int64
	fut     appendResult
}

// recorderQueue bounds the appends queued for the recorder. The managed
// ledger's in-flight budget bounds the appends not yet complete well
// below it, so queueing waits only while the recorder catches up.
const recorderQueue = 4096

// newDedup is an empty state, snapshotting every interval entries.
func newDedup(interval int, clock clockwork.Clock) *dedup {
	return &dedup{interval: interval, clock: clock, snapshotAt: clock.Now(), pushed: map[string]int64{}, persisted: map[string]int64{},
		pending: map[string]pendingAppends{}, changed: map[string]struct{}{}}
}

// openDedup opens the snapshot cursor and rebuilds the state.
func openDedup(ctx context.Context, ml *mledger.ManagedLedger, interval int, clock clockwork.Clock) (*dedup, error) {
	c, err := ml.OpenCursor(ctx, dedupCursor, mledger.Earliest)
	if err != nil {
		return nil, fmt.Errorf("open deduplication cursor: %w", err)
	}
	d := newDedup(interval, clock)
	d.cursor = c
	for name, v := range c.Properties() {
		seq, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("deduplication snapshot: producer %q has sequence id %q", name, v)
		}
		d.persisted[name] = seq
	}
	for {
		es, err := c.Read(ctx, 256)
		if err != nil {
			return nil, fmt.Errorf("replay for deduplication: %w", err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			name, seq, ok := entrySequence(e)
			if ok && seq > d.persisted[name] {
				d.persisted[name] = seq
				d.changed[name] = struct{}{}
			}
			d.since++
			d.recorded, d.hasRecorded = e.Position, true // stored, and its state is in persisted
		}
	}
	for name, seq := range d.persisted {
		d.pushed[name] = seq
	}
	d.startRecording(recorderQueue)
	return d, nil
}

// startRecording starts the recorder, with a queue of n appends.
func (d *dedup) startRecording(n int) {
	d.appends = make(chan trackedAppend, n)
	d.recorderDone = make(chan struct{})
	d.stopping = make(chan struct{})
	go d.record()
}

// record marks each queued append stored or failed as its future
// completes, in the order they were queued, until stopRecording.
func (d *dedup) record() {
	defer close(d.recorderDone)
	for a := range d.appends {
		<-a.fut.Done()
		pos, err := a.fut.Result()
		d.mu.Lock()
		d.settlePendingLocked(a.name)
		if err == nil {
			d.storedLocked(a.name, a.highest, pos)
		} else {
			d.failedLocked(a.name)
		}
		d.mu.Unlock()
	}
}

// queueAppend hands a tracked append to the recorder; the caller holds
// Topic.appendMu across the append and this call. While the queue is full
// it waits for room, the SEND path's backpressure, until stopRecording
// begins. From then on it drops the append, and every later one: the
// entry, if stored, is past every snapshot, and a reload replays it. Every
// append queued is thus queued before every append dropped, so a snapshot,
// which covers the last entry recorded, never covers one that was dropped.
//
// It never gives up on a SEND's context: the append is in the managed
// ledger already, and one left out of the queue while a later one goes in
// would let a snapshot cover it unrecorded.
func (d *dedup) queueAppend(name string, highest int64, fut appendResult) {
	d.queue.Lock()
	defer d.queue.Unlock()
	if d.queue.stopped {
		return
	}
	a := trackedAppend{name: name, highest: highest, fut: fut}
	d.mu.Lock()
	pa := d.pending[name]
	pa.n, pa.highest = pa.n+1, max(pa.highest, highest)
	d.pending[name] = pa
	d.mu.Unlock()
	select {
	case d.appends <- a:
	case <-d.stopping:
		d.endQueue()
	}
}

// endQueue ends the queue. The caller holds queue's lock.
func (d *dedup) endQueue() {
	if !d.queue.stopped {
		d.queue.stopped = true
		close(d.appends)
	}
}

// stopRecording ends the queue (the topic takes no more SENDs) and waits,
// within ctx, until the recorder has recorded every append queued, so
// that a snapshot then covers all that was stored and recorded. The
// recorder ends once the futures still open complete, at the latest when
// the managed ledger closes.
func (d *dedup) stopRecording(ctx context.Context) error {
	d.stopOnce.Do(func() { close(d.stopping) })
	d.queue.Lock()
	d.endQueue()
	d.queue.Unlock()
	select {
	case <-d.recorderDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("deduplication: appends still unconfirmed: %w", ctx.Err())
	}
}

// entrySequence reads the deduplication identity of a stored entry.
// Entries that fail to decode are skipped: they were checked when stored,
// and a replay that stopped on one would stop the topic.
func entrySequence(e mledger.Entry) (string, int64, bool) {
	_, msg, err := e.Split()
	if err != nil {
		return "", 0, false
	}
	metadata, payload, err := wire.SplitMessage(msg)
	if err != nil {
		return "", 0, false
	}
	md, err := (&wire.Frame{Metadata: metadata}).DecodeMetadata()
	if err != nil || md.GetProducerName() == "" {
		return "", 0, false
	}
	name, seq, highest, ok, err := dedupIdentity(md)
	if md.GetReplicatedFrom() == "" {
		highest = batchHighest(metadata, payload, seq, highest)
	}
	return name, highest, ok && err == nil
}

// batchHighest is the highest sequence id of a producer's message, given
// its first id (seq) and the highest its SEND or metadata declares: for a
// batch that declares none above seq (pulsar-client-go's), the highest id
// among its messages (wire.BatchHighestSequenceID). The SEND and the
// replay of a stored entry both take it so, from the same bytes, so that a
// reload restores what the SENDs recorded. Recorded as its first id, a
// batch's later ids were unknown to deduplication: a resend of the batch
// from one of them was stored a second time, and a resend from its first
// id in a larger batch (resends and new messages) was answered as a
// duplicate whole, the new messages never stored (TestDedupBatchOverlapsStored).
// A batch whose messages cannot be read (encrypted) keeps the declared id.
func batchHighest(metadata, payload []byte, seq, highest int64) int64 {
	if highest > seq {
		return highest // the Java client's highest_sequence_id
	}
	if h, ok := wire.BatchHighestSequenceID(metadata, payload); ok && h > highest {
		return h
	}
	return highest
}

// dedupIdentity is the deduplication identity of a message from its
// metadata, and whether it counts (a chunk before the last does not: every
// chunk of a message carries its sequence id).
//
// A replicated entry (replicated_from set) is identified by where it came
// from (DESIGN §6): its origin region and source topic incarnation, with its
// source offsets as the sequence ids, which the replicator stores with the
// entry (wire.PropReplicationSource) so that a replay reads them back. Never
// by the original producer's name and sequence ids: those restart at 0 when
// a producer with a fixed name restarts without deduplication, and the
// destination would drop its new messages as duplicates. Each replicated
// entry, a chunk too, has offsets of its own, so every one counts. One
// without a source is an error.
func dedupIdentity(md *pb.MessageMetadata) (name string, seq, highest int64, track bool, err error) {
	if from := md.GetReplicatedFrom(); from != "" {
		src, ok, err := wire.ReplicationSourceOf(md)
		if err == nil && !ok {
			err = fmt.Errorf("replicated entry from %s without its %s property", from, wire.PropReplicationSource)
		}
		return ReplicationProducerPrefix + from + "/" + strconv.FormatInt(src.Incarnation, 10), src.First, src.Last, true, err
	}
	seq = int64(md.GetSequenceId())
	return md.GetProducerName(), seq, max(seq, int64(md.GetHighestSequenceId())), isLastChunk(md), nil
}

// isLastChunk is true for an unchunked message and for the last chunk of a
// chunked one.
func isLastChunk(md *pb.MessageMetadata) bool {
	return !md.HasChunkId() || md.GetChunkId() == md.GetNumChunksFromMsg()-1
}

// lastSequence is the highest sequence id stored for producer name, or -1.
func (d *dedup) lastSequence(name string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if seq, ok := d.persisted[name]; ok {
		return seq
	}
	return -1
}

// dedupStatus is what push found of a SEND.
type dedupStatus int

const (
	// sendNew: above everything pushed for its producer name: store it.
	sendNew dedupStatus = iota
	// sendDuplicate: not above the highest persisted id: stored already,
	// it gets a receipt only.
	sendDuplicate
	// sendInDoubt: above the highest persisted id but not above the
	// highest pushed: an earlier copy is on its way to storage and may
	// still fail. It is neither stored nor receipted: a SEND_ERROR makes
	// the client send it again, by when the copy's fate is known (Pulsar's
	// MessageDupStatus.Unknown). Answered as a duplicate, it would be lost
	// if the copy failed.
	sendInDoubt
	// sendOverlap: a batch whose first ids are at or below the highest
	// persisted and whose last are above it, with nothing of its producer
	// name on its way to storage: pulsar-client-go's batch of resends and
	// new messages. Its messages above the persisted id (push's second
	// result) are new and stored; the others are stored already.
	// Answered as a duplicate, the new ones would be lost; stored whole,
	// the others would be stored twice.
	sendOverlap
)

// push records a SEND about to be appended and says what it is; with
// apply unset (a producer that does not deduplicate) it is always new.
// For sendOverlap it also returns the highest id persisted, at and below
// which the batch's messages are not to be stored again.
//
// seq and highest are the SEND's first and last ids (batchHighest).
func (d *dedup) push(name string, seq, highest int64, apply bool) (dedupStatus, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	last, seen := d.pushed[name]
	if apply && seen && seq <= last {
		persisted, ok := d.persisted[name]
		switch {
		case ok && highest <= persisted:
			return sendDuplicate, 0
		case ok && seq <= persisted && last <= persisted:
			// Every id pushed is persisted, so none above persisted is in
			// doubt: the batch's ids above it are new.
			d.pushed[name] = highest
			return sendOverlap, persisted
		}
		return sendInDoubt, 0
	}
	if !seen || highest > last {
		d.pushed[name] = highest
	}
	return sendNew, 0
}

// settlePendingLocked counts one of name's pending appends recorded.
func (d *dedup) settlePendingLocked(name string) {
	pa := d.pending[name]
	if pa.n <= 1 {
		delete(d.pending, name)
		return
	}
	pa.n--
	d.pending[name] = pa
}

// storedLocked records that an entry of producer name up to highest is
// stored at p, snapshotting when the interval is reached.
func (d *dedup) storedLocked(name string, highest int64, p mledger.Position) {
	if last, ok := d.persisted[name]; !ok || highest > last {
		d.persisted[name] = highest
		d.changed[name] = struct{}{}
	}
	if !d.hasRecorded || d.recorded.Less(p) {
		d.recorded, d.hasRecorded = p, true
	}
	d.since++
	if d.since >= d.interval {
		d.snapshotLocked(p)
	}
}

// failed forgets what was pushed but not stored for name: the client
// resends it, and it must not be taken for a duplicate then.
func (d *dedup) failed(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failedLocked(name)
}

// failedLocked is failed with d.mu held. What was pushed goes back to what
// is persisted, but never below the appends of name still pending: they
// were handed to the managed ledger before the one that failed and may
// yet be stored, so that a resend of one of them is in doubt (push), not
// new. (Lowered to the persisted id alone, the state let a resend of an
// entry whose store was still under way be stored a second time.)
func (d *dedup) failedLocked(name string) {
	seq, ok := d.persisted[name]
	if pa, pending := d.pending[name]; pending && (!ok || pa.highest > seq) {
		seq, ok = pa.highest, true
	}
	if ok {
		d.pushed[name] = seq
	} else {
		delete(d.pushed, name)
	}
}

// snapshotRecorded stops the recorder (stopRecording, within ctx) and
// writes the state as of the last entry recorded: the snapshot of a
// closing topic. If appends are still unconfirmed at ctx's end, the
// snapshot covers what is recorded, and the next load replays the rest.
func (d *dedup) snapshotRecorded(ctx context.Context) {
	_ = d.stopRecording(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	p := mledger.Position{Entry: -1} // nothing recorded: properties only
	if d.hasRecorded {
		p = d.recorded
	}
	d.snapshotLocked(p)
}

func (d *dedup) snapshotLocked(p mledger.Position) {
	for name := range d.changed {
		if err := d.cursor.SetProperty(name, strconv.FormatInt(d.persisted[name], 10)); err != nil {
			return // the topic is closing or lost; the next owner replays
		}
	}
	clear(d.changed)
	if p.Entry >= 0 {
		if err := d.cursor.AckCumulative(p); err != nil {
			return
		}
	}
	d.since, d.snapshotAt = 0, d.clock.Now()
}

// snapshotIfOlder writes a snapshot of what is recorded when entries were
// stored since the last snapshot and it is older than age: a quiet
// topic's state is persisted, and its snapshot cursor moves on, without
// waiting for SnapshotInterval entries (Pulsar's
// brokerDeduplicationSnapshotIntervalSeconds).
func (d *dedup) snapshotIfOlder(age time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.since == 0 || !d.hasRecorded || d.clock.Since(d.snapshotAt) < age {
		return
	}
	d.snapshotLocked(d.recorded)
}

// ReplicationProducerPrefix marks the producers of the replicator
// (DESIGN §6): their entries keep the metadata as sent, and they are always
// deduplicated.
const ReplicationProducerPrefix = "meridian.repl."

// snapshotDedupIfOlder snapshots the topic's deduplication state when the
// topic's snapshot time (its deduplicationSnapshotInterval, else the
// broker's DedupSnapshotTime) has passed since the last snapshot and
// entries were stored since (dedup.snapshotIfOlder).
func (t *Topic) snapshotDedupIfOlder() {
	age := t.svc.cfg.DedupSnapshotTime
	if eff, err := t.svc.resolve(t.name); err == nil && eff.DedupSnapshotIntervalSeconds != nil {
		age = time.Duration(*eff.DedupSnapshotIntervalSeconds) * time.Second
	}
	if age > 0 {
		t.dd.snapshotIfOlder(age)
	}
}
