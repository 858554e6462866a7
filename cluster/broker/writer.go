package broker

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/meridian-mq/meridian/cluster/linger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// flushBytes is how much the writer buffers before it writes to the socket.
const flushBytes = 256 << 10

// errFlushedClose stops the writer after a closeAfter marker.
var errFlushedClose = errors.New("connection closed after flushing")

// writeLoop writes queued commands and messages, coalescing what is queued
// into flushes of up to flushBytes. Every flush has a write deadline
// (Config.WriteTimeout): a peer that does not take its bytes within it is
// disconnected, and the release of its consumers hands what they held
// back to their subscriptions.
func (c *conn) writeLoop() {
	defer c.wg.Done()
	defer close(c.writerDone)
	w := wire.NewWriter(c.nc)
	for {
		var err error
		select {
		case <-c.ctx.Done():
			return
		case o := <-c.out:
			o = c.took(o)
			err = c.writeQueued(w, &o)
		case <-c.msgs.ready:
			err = c.writeQueued(w, nil)
		}
		if err != nil {
			if errors.Is(err, errFlushedClose) && linger.CloseWrite(c.nc) {
				return // the reader closes it once the client has read the end (lingerClose)
			}
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				c.log.Info("closing connection: peer is not reading (write deadline passed)", "timeout", c.srv.cfg.writeTimeout())
			case !errors.Is(err, errFlushedClose):
				c.log.Debug("write failed", "err", err)
			}
			c.close()
			return
		}
	}
}

// writeQueued writes first (if any) and everything queued, replies before
// messages, until both queues are empty.
func (c *conn) writeQueued(w *wire.Writer, first *outbound) error {
	if first != nil {
		if err := c.write(w, *first); err != nil {
			return err
		}
	}
	for {
		o, ok := c.nextQueued()
		if ok {
			if err := c.write(w, o); err != nil {
				return err
			}
		}
		if !ok || w.Buffered() >= flushBytes {
			if err := c.flush(w); err != nil {
				return err
			}
		}
		if !ok {
			return nil
		}
	}
}

// nextQueued takes the next reply, or else the next message. A message
// taken from a queue that had refused frames wakes the dispatchers of the
// connection's consumers.
func (c *conn) nextQueued() (outbound, bool) {
	select {
	case o := <-c.out:
		return c.took(o), true
	default:
	}
	o, ok, freed := c.msgs.pop()
	if freed {
		c.wakeDispatchers()
	}
	return o, ok
}

// write buffers one frame; a closeAfter marker flushes and stops the writer.
func (c *conn) write(w *wire.Writer, o outbound) error {
	switch {
	case o.closeAfter:
		if err := c.flush(w); err != nil {
			return err
		}
		return errFlushedClose
	case o.flushed != nil:
		err := c.flush(w)
		close(o.flushed)
		return err
	case o.msg != nil:
		return w.WritePayloadCommand(o.cmd, o.bem, o.msg)
	default:
		return w.WriteCommand(o.cmd)
	}
}

// flush writes what is buffered within the write deadline.
func (c *conn) flush(w *wire.Writer) error {
	if w.Buffered() == 0 {
		return nil
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.writeTimeout())); err != nil {
		return err
	}
	return w.Flush()
}

// wakeDispatchers pokes the subscription of every consumer on the
// connection: its message queue has room again.
func (c *conn) wakeDispatchers() {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.mu.consumers))
	for _, cons := range c.mu.consumers {
		subs = append(subs, cons.sub)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.poke()
	}
}

// keepAliveLoop pings the peer every KeepAliveInterval and closes the
// connection when nothing has arrived for two intervals. It only queues
// its PING (a full reply queue closes the connection: the peer is not
// reading), so neither the ping nor the silence check ever waits behind a
// blocked write.
func (c *conn) keepAliveLoop() {
	defer c.wg.Done()
	interval := c.srv.cfg.KeepAliveInterval
	tick := c.srv.clock.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-tick.Chan():
			if idle := now.Sub(time.Unix(0, c.lastReceived.Load())); idle > 2*interval {
				c.log.Info("closing connection: peer silent", "idle", idle)
				c.close()
				return
			}
			c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
		}
	}
}

// awaitFlushed waits, within ctx, until everything queued on the
// connection so far is written (or the connection has ended).
func (c *conn) awaitFlushed(ctx context.Context) {
	flushed := make(chan struct{})
	select {
	case c.out <- outbound{flushed: flushed}:
	case <-c.ctx.Done():
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-flushed:
	case <-c.ctx.Done():
	case <-ctx.Done():
	}
}
