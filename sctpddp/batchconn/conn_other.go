//go:build !linux

package batchconn

import (
	"net"
	"time"
)

// Conn is a net.PacketConn over a *net.UDPConn. On this system it passes
// every call through: one system call a datagram, Cork and Flush doing
// nothing.
type Conn struct {
	uc   *net.UDPConn
	peer *net.UDPAddr // of a connected socket; nil if unconnected
	buf  []byte       // where Next reads
}

// New makes a Conn of uc, connected or not, which it owns from then on:
// Close closes uc. cfg is accepted for the API's sake and unused here.
func New(uc *net.UDPConn, cfg *Config) (*Conn, error) {
	s := cfg.withDefaults()
	c := &Conn{uc: uc, buf: make([]byte, s.MaxDatagram)}
	if ra, ok := uc.RemoteAddr().(*net.UDPAddr); ok && ra != nil {
		c.peer = ra
	}
	return c, nil
}

// ReadFrom reads one datagram, as uc.ReadFrom.
func (c *Conn) ReadFrom(p []byte) (int, net.Addr, error) { return c.uc.ReadFrom(p) }

// Next reads one datagram into the Conn's buffer, truncated to
// Config.MaxDatagram, and returns it and its source; it is valid until
// the next call to Next.
func (c *Conn) Next() ([]byte, net.Addr, error) {
	n, addr, err := c.uc.ReadFrom(c.buf)
	return c.buf[:n], addr, err
}

// WriteTo sends p at once, as uc.WriteTo; on a connected socket addr is
// nil or the peer's address, and p goes as uc.Write sends it.
func (c *Conn) WriteTo(p []byte, addr net.Addr) (int, error) {
	ua, err := checkPeer(c.peer, addr)
	if err != nil {
		return 0, &net.OpError{Op: "write", Net: "udp", Source: c.uc.LocalAddr(), Addr: addr, Err: err}
	}
	if ua == nil {
		return c.uc.Write(p)
	}
	return c.uc.WriteTo(p, ua)
}

// Cork does nothing on this system: WriteTo sends at once.
func (c *Conn) Cork() {}

// Flush does nothing on this system and returns nil.
func (c *Conn) Flush() error { return nil }

// Close closes the socket.
func (c *Conn) Close() error { return c.uc.Close() }

// LocalAddr returns the socket's address.
func (c *Conn) LocalAddr() net.Addr { return c.uc.LocalAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.uc.SetDeadline(t) }

// SetReadDeadline sets the read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.uc.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.uc.SetWriteDeadline(t) }

// Features reports that no batching is in use.
func (c *Conn) Features() Features { return Features{} }

// Stats returns zero counts: nothing is counted on this system.
func (c *Conn) Stats() Stats { return Stats{} }
