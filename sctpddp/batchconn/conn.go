package batchconn

import "net"

var _ net.PacketConn = (*Conn)(nil)
