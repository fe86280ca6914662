//go:build linux

package mpa

import (
	"net"
	"syscall"
)

// EMSS returns the connection's current effective maximum segment size:
// Linux's TCP_MAXSEG, which is the MSS in use after TCP options and path
// MTU discovery, that is, RFC 5044's "smaller of the TCP maximum segment
// size (MSS) ... and the current path Maximum Transmission Unit" less the
// headers. Feed it to MULPDU. "If the TCP implementation allows EMSS to
// be determined by MPA, that value should be used." (RFC 5044 §5.1)
func EMSS(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var mss int
	var serr error
	err = rc.Control(func(fd uintptr) {
		mss, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	})
	if err != nil {
		return 0, err
	}
	return mss, serr
}
