package drill

import (
	"slices"
	"sync"
	"time"
)

// Message names one message: its producer and its sequence number in that
// producer's stream, both carried in its properties, so every copy of it
// in any region says which it is.
type Message struct {
	Producer string `json:"producer"`
	Seq      int64  `json:"seq"`
}

// Send is one message a producer sent, and what came of it.
type Send struct {
	Message
	Topic  string    `json:"topic"`
	Key    string    `json:"key"`
	SentAt time.Time `json:"sentAt"`
	// ReceiptAt is when the receipt came (zero for none), Region the
	// region of the broker that gave it.
	ReceiptAt time.Time `json:"receiptAt,omitzero"`
	Region    string    `json:"region,omitempty"`
	Err       string    `json:"err,omitempty"`
}

// Receipted reports whether the broker acknowledged the send.
func (s Send) Receipted() bool { return !s.ReceiptAt.IsZero() && s.Err == "" }

// Delivery is one message a consumer received, and its ack.
type Delivery struct {
	Message
	Topic        string    `json:"topic"`
	Subscription string    `json:"subscription"`
	Consumer     string    `json:"consumer"`
	Key          string    `json:"key"`
	At           time.Time `json:"at"`
	Region       string    `json:"region"`
	// AckAt is when the consumer acked it (zero: not acked, e.g. the
	// drill ended first).
	AckAt time.Time `json:"ackAt,omitzero"`
	// StoredAt is when the delivering region stored this copy: its
	// broker's BrokerEntryMetadata timestamp, for a replicated copy its
	// arrival there. Zero when the broker did not send it.
	StoredAt time.Time `json:"storedAt,omitzero"`
}

// History is everything the workload's clients saw.
type History struct {
	Sends      []Send     `json:"sends"`
	Deliveries []Delivery `json:"deliveries"`
}

// Recorder collects a History from every producer and consumer; it is
// safe for concurrent use. Counts per region feed the live display.
type Recorder struct {
	mu struct {
		sync.Mutex
		h History
		// receipts and deliveries count per region, for rates.
		receipts, deliveries map[string]int
		errors               int
	}
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.mu.receipts, r.mu.deliveries = map[string]int{}, map[string]int{}
	return r
}

// send records a finished send.
func (r *Recorder) send(s Send) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.h.Sends = append(r.mu.h.Sends, s)
	if s.Receipted() {
		r.mu.receipts[s.Region]++
	} else {
		r.mu.errors++
	}
}

// deliver records a delivery, its ack settled.
func (r *Recorder) deliver(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.h.Deliveries = append(r.mu.h.Deliveries, d)
	r.mu.deliveries[d.Region]++
}

// Counts are the running totals the display shows.
type Counts struct {
	Receipts, Deliveries map[string]int
	SendErrors           int
}

// Counts returns a copy of the running totals.
func (r *Recorder) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Counts{Receipts: map[string]int{}, Deliveries: map[string]int{}, SendErrors: r.mu.errors}
	for k, v := range r.mu.receipts {
		c.Receipts[k] = v
	}
	for k, v := range r.mu.deliveries {
		c.Deliveries[k] = v
	}
	return c
}

// History returns a copy of what was recorded, sends by send time and
// deliveries by arrival.
func (r *Recorder) History() History {
	r.mu.Lock()
	h := History{Sends: slices.Clone(r.mu.h.Sends), Deliveries: slices.Clone(r.mu.h.Deliveries)}
	r.mu.Unlock()
	slices.SortStableFunc(h.Sends, func(a, b Send) int { return a.SentAt.Compare(b.SentAt) })
	slices.SortStableFunc(h.Deliveries, func(a, b Delivery) int { return a.At.Compare(b.At) })
	return h
}
