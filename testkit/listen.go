package testkit

import (
	"net"
	"sync"
	"testing"
)

// ListenLoopback accepts connections on a loopback port and hands each to
// serve, which must return once stop is closed, at the end of the test. It
// returns the port's pulsar:// URL: a stand-in for a broker that answers a
// probe in serve's way (silent, closing, or answering).
func ListenLoopback(t testing.TB, serve func(nc net.Conn, stop <-chan struct{})) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer nc.Close(); serve(nc, stop) })
		}
	})
	return "pulsar://" + ln.Addr().String()
}
