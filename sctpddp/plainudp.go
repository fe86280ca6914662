//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// SCTP straight over UDP, RFC 6951's encapsulation, for
// Config.InsecurePlainUDP: one SCTP packet is one UDP datagram, whose
// ports are the encapsulation ports (§5.3), and each association is the
// flow of one remote UDP address. No DTLS protects it.

// SCTPTunnelingPort is the UDP port IANA registered for SCTP over UDP
// (RFC 6951 §5.1: "UDP-encapsulated SCTP is normally communicated between
// SCTP stacks using the IANA-assigned UDP port number 9899
// (sctp-tunneling) on both ends"). Listen on it to meet the Linux
// kernel's SCTP with its default encapsulation port.
const SCTPTunnelingPort = 9899

// errPortUnreachable ends a plain-UDP Dial's handshake at the ICMP Port
// Unreachable of the peer's address: nothing listens there.
var errPortUnreachable = errors.New("sctpddp: ICMP port unreachable")

// plainDialConn is a Dial's connected UDP socket under SCTP. Before the
// association is established, an ICMP Port Unreachable (ECONNREFUSED)
// ends the handshake at once, as over DTLS; afterwards package sctp takes
// it for a lost packet (RFC 6951 §5.5: "the SCTP stack MUST NOT rely on
// receiving ICMP or ICMPv6 messages").
type plainDialConn struct {
	*net.UDPConn
	answered    atomic.Bool // a datagram came back
	refused     atomic.Bool // ECONNREFUSED during the handshake
	established atomic.Bool
}

func (c *plainDialConn) Read(p []byte) (int, error) {
	n, err := c.UDPConn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	}
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) && !c.established.Load() {
		c.refused.Store(true)
		return 0, errPortUnreachable
	}
	return n, err
}

func (c *plainDialConn) Write(p []byte) (int, error) {
	n, err := c.UDPConn.Write(p)
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) && !c.established.Load() {
		// The reader would not hear of it: end the handshake here.
		c.refused.Store(true)
		_ = c.UDPConn.Close()
	}
	return n, err
}

// dialPlain is Dial under Config.InsecurePlainUDP: SCTP's handshake
// straight over a connected UDP socket.
func (s *settings) dialPlain(ctx context.Context, network, addr string, raddr *net.UDPAddr) (*Association, error) {
	uc, err := s.connectUDP(ctx, network, raddr)
	if err != nil {
		return nil, err
	}
	dc := &plainDialConn{UDPConn: uc}
	a, err := newAssociation(ctx, s, dc, false, nil)
	if err != nil {
		_ = dc.Close()
		switch {
		case dc.refused.Load():
			return nil, fmt.Errorf("%w: nothing listens at %s (ICMP port unreachable): start the listener, or check the port: %w", ErrUnreachable, addr, syscall.ECONNREFUSED)
		case errors.Is(ctx.Err(), context.Canceled):
			return nil, fmt.Errorf("sctpddp: dialing %s: %w", addr, ctx.Err())
		case !dc.answered.Load():
			return nil, fmt.Errorf("%w from %s within %v: nothing listens there, or the path drops UDP: %w", ErrUnreachable, addr, s.HandshakeTimeout.Round(time.Millisecond), err)
		}
		return nil, err
	}
	dc.established.Store(true)
	return a, nil
}
