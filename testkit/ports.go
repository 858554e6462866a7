package testkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// FreePorts returns n distinct loopback ports that are free now, for a
// process the test starts with explicit listen addresses. They are drawn
// below the kernel's ephemeral range (ip_local_port_range), from which
// every bind to port 0 takes its port: a port reserved with a bind to 0
// and released for the process could be handed, in between, to a
// listener the process itself opens on port 0 first (`meridian
// standalone`'s embedded etcd took its broker's port that way, "bind:
// address already in use"). Another test could still draw the same port in
// between; with more than 20,000 to draw from, that is rare, and the
// process then fails to start and says so.
func FreePorts(n int) ([]int, error) {
	const floor = 10_000
	low := ephemeralLow()
	if low-floor < 100*n {
		return nil, fmt.Errorf("testkit: only ports %d..%d lie below the ephemeral range, too few for %d", floor, low-1, n)
	}
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, errors.New("testkit: no free loopback port below the ephemeral range after many tries")
		}
		p := floor + rand.IntN(low-floor)
		if taken[p] {
			continue
		}
		taken[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue // in use
		}
		held = append(held, l)
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range: Linux's
// ip_local_port_range, or its default 32768 where it cannot be read.
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > 0 {
			low = lo
		}
	}
	return low
}
