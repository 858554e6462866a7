package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startEcho serves an echo on a free loopback port until the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func startLink(t *testing.T, shape Shape) *Link {
	t.Helper()
	cfg := DefaultLinkConfig(t.Name(), "127.0.0.1:0", startEcho(t))
	cfg.Shape, cfg.Seed = shape, 1
	l, err := StartLink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dialLink(t *testing.T, l *Link) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// roundTrip sends msg and reads its echo, returning how long that took.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	began := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo through the link changed the bytes")
	}
	return time.Since(began)
}

// waitBytes waits until the link has counted want, with a deadline: the
// count is added just after a write, so the echo can be read first.
func waitBytes(t *testing.T, l *Link, want Bytes) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.Bytes() != want {
		if time.Now().After(deadline) {
			t.Fatalf("link counted %+v, want %+v", l.Bytes(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLinkForwardsAndCounts(t *testing.T) {
	l := startLink(t, Shape{})
	c := dialLink(t, l)
	msg := bytes.Repeat([]byte("meridian"), 40_000) // 320 kB: several reads
	roundTrip(t, c, msg)
	waitBytes(t, l, Bytes{Up: int64(len(msg)), Down: int64(len(msg))})
}

func TestLinkLatencyChangesWhileRunning(t *testing.T) {
	l := startLink(t, Shape{Latency: 40 * time.Millisecond})
	c := dialLink(t, l)
	// Delays are lower bounds whatever the load: a round trip crosses the
	// link twice.
	if rtt := roundTrip(t, c, []byte("x")); rtt < 80*time.Millisecond {
		t.Errorf("round trip %v through a 40ms link, want at least 80ms", rtt)
	}
	if err := l.SetShape(Shape{Latency: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if rtt := roundTrip(t, c, []byte("y")); rtt < 300*time.Millisecond {
		t.Errorf("round trip %v on the same connection after raising the latency to 150ms, want at least 300ms", rtt)
	}
	if err := l.SetShape(Shape{Latency: -time.Millisecond}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative latency: %v, want ErrBadConfig", err)
	}
}

func TestLinkJitterKeepsOrder(t *testing.T) {
	l := startLink(t, Shape{Latency: time.Millisecond, Jitter: 20 * time.Millisecond})
	c := dialLink(t, l)
	var want bytes.Buffer
	for i := range 300 {
		msg := fmt.Appendf(nil, "%d,", i)
		want.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("jitter reordered bytes:\n got %.80s…\nwant %.80s…", got, want.Bytes())
	}
}

func TestLinkLossDelaysAndKeepsOrder(t *testing.T) {
	l := startLink(t, Shape{Loss: 0.5})
	c := dialLink(t, l)
	// Each 1-byte round trip crosses the link twice, so three in four meet
	// a loss and take at least one retransmission (200ms); a lost read is
	// late, never dropped or reordered.
	slow := 0
	for i := range 20 {
		if rtt := roundTrip(t, c, []byte{byte(i)}); rtt >= retransmitAfter(0) {
			slow++
		}
	}
	if slow < 5 {
		t.Errorf("%d of 20 round trips through a link losing half its reads took a retransmission, want at least 5", slow)
	}
	for _, loss := range []float64{-0.1, 1} {
		if err := l.SetShape(Shape{Loss: loss}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Loss %v: %v, want ErrBadConfig", loss, err)
		}
	}
}

func TestLinkBandwidthCap(t *testing.T) {
	const rate = 400 << 10
	l := startLink(t, Shape{BytesPerSecond: rate})
	c := dialLink(t, l)
	msg := bytes.Repeat([]byte{7}, 200<<10)
	// Half a second of the line's capacity each way; the two directions
	// overlap, so the whole takes at least half a second.
	if took := roundTrip(t, c, msg); took < 500*time.Millisecond {
		t.Errorf("%d kB through a %d kB/s link took %v, want at least 500ms", len(msg)>>10, rate>>10, took)
	}
}

func TestLinkCutAndRestore(t *testing.T) {
	l := startLink(t, Shape{})
	c := dialLink(t, l)
	roundTrip(t, c, []byte("before"))

	l.Cut()
	if !l.IsCut() {
		t.Fatal("IsCut is false after Cut")
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
		t.Fatal("a connection through the link survived the cut")
	}
	refused := dialLink(t, l)
	if n, err := refused.Read(make([]byte, 1)); err == nil {
		t.Fatalf("a connection made while the link is cut read %d bytes", n)
	}

	l.Restore()
	after := dialLink(t, l)
	roundTrip(t, after, []byte("after"))
}

func TestLinkPartitionAndHeal(t *testing.T) {
	l := startLink(t, Shape{})
	c := dialLink(t, l)
	roundTrip(t, c, []byte("before"))

	l.Partition()
	l.Partition() // twice is once
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	// Nothing comes back while partitioned, and the connection stays open.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a partitioned link: %d bytes, %v; want the deadline to pass", n, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))

	l.Heal()
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after Heal: %q, %v; want the held bytes", got, err)
	}
	roundTrip(t, c, []byte("after"))
	l.Heal() // healing a whole link does nothing
}

func TestLinkClose(t *testing.T) {
	l := startLink(t, Shape{Latency: time.Hour})
	c := dialLink(t, l)
	if _, err := c.Write([]byte("held for an hour")); err != nil {
		t.Fatal(err)
	}
	// Close ends the connection whose bytes wait on the latency, and
	// waits for its goroutines.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after Close")
	}
	if err := l.SetShape(Shape{}); !errors.Is(err, ErrLinkClosed) {
		t.Errorf("SetShape after Close: %v, want ErrLinkClosed", err)
	}
	if _, err := net.DialTimeout("tcp", l.Addr(), time.Second); err == nil {
		t.Error("a closed link still accepts connections")
	}
}

func TestLinkConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*LinkConfig)
	}{
		{"no upstream", func(c *LinkConfig) { c.Upstream = "" }},
		{"no listen address", func(c *LinkConfig) { c.Listen = "" }},
		{"tiny dial timeout", func(c *LinkConfig) { c.DialTimeout = time.Millisecond }},
		{"negative jitter", func(c *LinkConfig) { c.Shape.Jitter = -1 }},
		{"negative cap", func(c *LinkConfig) { c.Shape.BytesPerSecond = -1 }},
	} {
		cfg := DefaultLinkConfig("l", "127.0.0.1:0", "127.0.0.1:1")
		if err := cfg.Validate(); err != nil {
			t.Fatalf("default config: %v", err)
		}
		tc.edit(&cfg)
		if _, err := StartLink(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v, want ErrBadConfig", tc.name, err)
		}
	}
}

// TestLinkLocalConnections shows that a connection LinkConfig.Local picks
// bypasses the link: an hour of latency does not hold it, it is not
// counted, and it survives a cut and a partition, while the others are
// cut.
func TestLinkLocalConnections(t *testing.T) {
	const localIP = "127.0.0.3"
	cfg := DefaultLinkConfig(t.Name(), "127.0.0.1:0", startEcho(t))
	cfg.Shape = Shape{Latency: time.Hour}
	cfg.Local = func(peer, _ net.Addr) bool { return peer.(*net.TCPAddr).IP.String() == localIP }
	l, err := StartLink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}}
	local, err := d.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	_ = local.SetDeadline(time.Now().Add(30 * time.Second))
	remote := dialLink(t, l)

	roundTrip(t, local, []byte("local"))
	l.Partition()
	roundTrip(t, local, []byte("partitioned"))
	l.Heal()
	l.Cut()
	roundTrip(t, local, []byte("cut"))
	if _, err := io.ReadFull(remote, make([]byte, 1)); err == nil {
		t.Fatal("a connection Local did not pick survived the cut")
	}
	late, err := d.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	_ = late.SetDeadline(time.Now().Add(30 * time.Second))
	roundTrip(t, late, []byte("dialled while cut"))
	if b := l.Bytes(); b != (Bytes{}) {
		t.Errorf("the link counted %+v of local connections, want nothing", b)
	}
}

// TestLinkCutFrom cuts the connections of one source (told by their
// local address here) and leaves the others alone.
func TestLinkCutFrom(t *testing.T) {
	l, dialFrom := startSourcedLink(t)
	r2, r3 := dialFrom("127.0.0.4"), dialFrom("127.0.0.5")
	roundTrip(t, r2, []byte("r2 before"))
	roundTrip(t, r3, []byte("r3 before"))

	l.CutFrom("r2")
	if _, err := io.ReadFull(r2, make([]byte, 1)); err == nil {
		t.Fatal("a connection from the cut source survived CutFrom")
	}
	if n, err := dialFrom("127.0.0.4").Read(make([]byte, 1)); err == nil {
		t.Fatalf("a connection from the cut source made after CutFrom read %d bytes", n)
	}
	roundTrip(t, r3, []byte("r3 during"))
	roundTrip(t, dialFrom("127.0.0.5"), []byte("r3 dialled during"))

	l.RestoreFrom("r2")
	roundTrip(t, dialFrom("127.0.0.4"), []byte("r2 after"))
}

func TestLinkPartitionFrom(t *testing.T) {
	l, dialFrom := startSourcedLink(t)
	r2, r3 := dialFrom("127.0.0.4"), dialFrom("127.0.0.5")
	roundTrip(t, r2, []byte("r2 before"))

	l.PartitionFrom("r2")
	if _, err := r2.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	_ = r2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := r2.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a link partitioned from its source: %d bytes, %v; want the deadline to pass", n, err)
	}
	_ = r2.SetReadDeadline(time.Now().Add(30 * time.Second))
	roundTrip(t, r3, []byte("r3 during"))

	l.HealFrom("r2")
	got := make([]byte, 4)
	if _, err := io.ReadFull(r2, got); err != nil || string(got) != "held" {
		t.Fatalf("after HealFrom: %q, %v; want the held bytes", got, err)
	}
	roundTrip(t, r2, []byte("r2 after"))
	l.HealFrom("r2") // healing what is not partitioned does nothing
}

// startSourcedLink starts a link in front of an echo server whose
// connections from 127.0.0.4 have the source r2 and from 127.0.0.5 r3,
// and returns it with a dialler from one of those addresses.
func startSourcedLink(t *testing.T) (*Link, func(ip string) net.Conn) {
	t.Helper()
	sources := map[string]string{"127.0.0.4": "r2", "127.0.0.5": "r3"}
	cfg := DefaultLinkConfig(t.Name(), "127.0.0.1:0", startEcho(t))
	cfg.Source = func(peer, _ net.Addr) string { return sources[peer.(*net.TCPAddr).IP.String()] }
	l, err := StartLink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, func(ip string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
}

// TestOwnPeer tells this process's sockets from an address no socket of
// it has.
func TestOwnPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	if !OwnPeer(server.RemoteAddr(), server.LocalAddr()) {
		t.Errorf("OwnPeer(%v) = false for this process's own client socket", server.RemoteAddr())
	}
	// Nothing of this process is bound to 127.0.0.9.
	if other := (&net.TCPAddr{IP: net.ParseIP("127.0.0.9"), Port: 1}); OwnPeer(other, server.LocalAddr()) {
		t.Errorf("OwnPeer(%v) = true for an address no socket has", other)
	}
}

// TestLinkUnlisten: while unlistened, connecting to the link is refused
// (ECONNREFUSED, not accepted and closed) and the connections it carries
// go on; Listen takes new connections again on the same address.
func TestLinkUnlisten(t *testing.T) {
	l := startLink(t, Shape{})
	kept := dialLink(t, l)
	roundTrip(t, kept, []byte("before"))
	addr := l.Addr()
	l.Unlisten()
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial of an unlistened link: %v, want ECONNREFUSED", err)
	}
	roundTrip(t, kept, []byte("while unlistened"))
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(); err != nil {
		t.Fatalf("a second Listen: %v, want nil", err)
	}
	if l.Addr() != addr {
		t.Fatalf("address %s after Listen, was %s", l.Addr(), addr)
	}
	roundTrip(t, dialLink(t, l), []byte("after"))
	l.Close()
	if err := l.Listen(); !errors.Is(err, ErrLinkClosed) {
		t.Fatalf("Listen after Close: %v, want ErrLinkClosed", err)
	}
}

// TestFindSocket picks the socket of a connection by both its ends, past
// the lines that share its local address: a TIME_WAIT entry (inode 0) and
// a live connection from the same ephemeral port to another remote, both
// listed before it, as Linux may list them.
func TestFindSocket(t *testing.T) {
	// 127.0.0.1:40000 -> 127.0.0.2:6650 is the connection asked about.
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 0200007F:1F90 06 00000000:00000000 03:00000B6E 00000000     0        0 0 3 0000000000000000
   1: 0100007F:9C40 0100007F:0929 01 00000000:00000000 02:00000454 00000000     0        0 111 2 0000000000000000
   2: 0100007F:9C40 0200007F:19FA 01 00000000:00000000 02:00000454 00000000     0        0 222 2 0000000000000000
   3: 0200007F:19FA 0100007F:9C40 01 00000000:00000000 02:00000454 00000000     0        0 333 2 0000000000000000
`
	peer := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 40000}
	for _, tc := range []struct {
		far  *net.TCPAddr
		want string
		ok   bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 6650}, "222", true},
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 2345}, "111", true},
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 8080}, "", false}, // in TIME_WAIT only
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.9"), Port: 6650}, "", false},
	} {
		got, ok := findSocket(strings.NewReader(table), peer, tc.far)
		if got != tc.want || ok != tc.ok {
			t.Errorf("findSocket(%v, %v) = %q, %v; want %q, %v", peer, tc.far, got, ok, tc.want, tc.ok)
		}
	}
}
