package batchconn

import (
	"errors"
	"net"
)

var _ net.PacketConn = (*Conn)(nil)

// errConnected refuses a connected socket: WriteTo names the destination
// of every datagram.
var errConnected = errors.New("batchconn: the socket is connected; New takes an unconnected one")
