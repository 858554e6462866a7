package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnPeer reports whether peer, the remote end of a TCP connection over
// IPv4 loopback accepted at self, is a socket of this very process: the
// test's own clients, as opposed to the bed's processes. Any failure to
// read /proc answers false.
func OwnPeer(peer, self net.Addr) bool {
	inode, ok := socketInode(peer, self)
	return ok && holdsSocket("self", inode)
}

// socketInode finds the inode of the IPv4 loopback socket bound to peer
// and connected to far: the client's end of a connection accepted at far,
// in /proc/net/tcp (Linux only, like the bed).
func socketInode(peer, far net.Addr) (string, bool) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", false
	}
	defer f.Close()
	return findSocket(f, peer, far)
}

// findSocket reads a table in /proc/net/tcp's format and returns the
// inode of the live socket whose local address is peer and whose remote
// address is far. Both ends are needed: Linux gives one ephemeral port to
// several connections to different remotes, and a closed connection's
// line stays, with inode 0, while it is in TIME_WAIT. Matching the local
// address alone once took the first such line for the socket asked
// about: the bed then named a replicator's connection nobody's, and
// CutRegion left it up.
func findSocket(table io.Reader, peer, far net.Addr) (string, bool) {
	local, ok := procAddr(peer)
	if !ok {
		return "", false
	}
	remote, ok := procAddr(far)
	if !ok {
		return "", false
	}
	sc := bufio.NewScanner(table)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1] == local && fields[2] == remote && fields[9] != "0" {
			return fields[9], true
		}
	}
	return "", false
}

// procAddr is addr as /proc/net/tcp prints an IPv4 address: its 4 bytes
// read as a little-endian word, in hex, then the port; false for an
// address that is not IPv4 TCP.
func procAddr(addr net.Addr) (string, bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.To4() == nil {
		return "", false
	}
	ip := tcp.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], tcp.Port), true
}

// holdsSocket reports whether process pid ("self", or a number) has the
// socket with inode among its open files.
func holdsSocket(pid, inode string) bool {
	fds, err := filepath.Glob(filepath.Join("/proc", pid, "fd", "*"))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}

// HeldBy reports whether process pid holds the socket at peer, the remote
// end of a TCP connection over IPv4 loopback accepted at self: a link's
// Source names where a connection comes from with it. Any failure to read
// /proc answers false.
func HeldBy(peer, self net.Addr, pid int) bool {
	inode, ok := socketInode(peer, self)
	return ok && holdsSocket(strconv.Itoa(pid), inode)
}
