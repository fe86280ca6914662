//go:build !linux

package mpa

import (
	"errors"
	"net"
)

// EMSS returns the connection's effective maximum segment size. On this
// system it is not known: "If the transmit side TCP implementation is not
// able to report the EMSS, MPA SHOULD use the current MTU value to
// establish a likely FPDU size" (RFC 5044 §5.1).
func EMSS(c *net.TCPConn) (int, error) {
	return 0, errors.New("mpa: EMSS not available on this system; use the MTU less the IP and TCP headers")
}
