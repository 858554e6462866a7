package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// OwnPeer reports whether peer, the remote end of a TCP connection over
// IPv4 loopback, is a socket of this very process: the test's own clients,
// as opposed to the bed's processes. It finds the socket's inode in
// /proc/net/tcp by its address and looks for that inode among this
// process's open files (Linux only, like the bed). Any failure to read
// /proc answers false.
func OwnPeer(peer net.Addr) bool {
	tcp, ok := peer.(*net.TCPAddr)
	if !ok || tcp.IP.To4() == nil {
		return false
	}
	ip := tcp.IP.To4()
	// /proc/net/tcp prints an IPv4 address as its 4 bytes read as a
	// little-endian word, in hex, then the port.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], tcp.Port)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1] == want {
			inode = fields[9]
			break
		}
	}
	if inode == "" || inode == "0" {
		return false
	}
	fds, err := filepath.Glob("/proc/self/fd/*")
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
