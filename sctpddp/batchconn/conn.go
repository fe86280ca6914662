package batchconn

import (
	"errors"
	"net"
	"syscall"
)

var _ net.PacketConn = (*Conn)(nil)

// checkPeer reports whether WriteTo on a Conn whose socket is connected
// to peer (nil for an unconnected one) may send to addr: on a connected
// socket every datagram goes to its peer, so addr is nil or the peer.
// It returns the *net.UDPAddr to encode, nil for the peer.
func checkPeer(peer *net.UDPAddr, addr net.Addr) (*net.UDPAddr, error) {
	ua, ok := addr.(*net.UDPAddr)
	if peer == nil {
		if !ok || ua == nil {
			return nil, syscall.EINVAL
		}
		return ua, nil
	}
	if addr == nil || ok && ua == nil {
		return nil, nil
	}
	if !ok || ua.Port != peer.Port || !ua.IP.Equal(peer.IP) {
		return nil, errNotPeer
	}
	return nil, nil
}

// errNotPeer refuses a WriteTo on a connected socket to an address other
// than its peer, as net.ErrWriteToConnected does for a *net.UDPConn.
var errNotPeer = errors.New("batchconn: the socket is connected to another address")
