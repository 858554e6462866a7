package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnPeer reports whether peer, the remote end of a TCP connection over
// IPv4 loopback, is a socket of this very process: the test's own clients,
// as opposed to the bed's processes. Any failure to read /proc answers
// false.
func OwnPeer(peer net.Addr) bool {
	inode, ok := socketInode(peer)
	return ok && holdsSocket("self", inode)
}

// socketInode finds the inode of the IPv4 loopback socket bound to addr
// (the far end of an accepted connection) in /proc/net/tcp (Linux only,
// like the bed).
func socketInode(addr net.Addr) (string, bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.To4() == nil {
		return "", false
	}
	ip := tcp.IP.To4()
	// /proc/net/tcp prints an IPv4 address as its 4 bytes read as a
	// little-endian word, in hex, then the port.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], tcp.Port)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1] == want {
			return fields[9], fields[9] != "0"
		}
	}
	return "", false
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
// end of a TCP connection over IPv4 loopback: a link's Source names where
// a connection comes from with it. Any failure to read /proc answers
// false.
func HeldBy(peer net.Addr, pid int) bool {
	inode, ok := socketInode(peer)
	return ok && holdsSocket(strconv.Itoa(pid), inode)
}
