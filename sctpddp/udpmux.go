//go:build !js

package sctpddp

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/transport/v5/deadline"

	"github.com/iwarpgo/iwarp/internal/netpeer"
)

// A Listener's UDP socket is demultiplexed per remote address by a udpMux,
// in place of pion/dtls's own listener, so that what an unauthenticated
// source can make the Listener hold is bounded:
//
//   - A datagram from an unknown address creates state only if it is the
//     first record of a DTLS ClientHello (isClientHello); anything else is
//     dropped at the cost of reading it.
//   - Handshaking addresses are capped in all (MaxHandshakes) and per peer
//     (MaxHandshakesPerPeer; a peer is an IPv4 address or an IPv6 /64). A
//     handshake makes progress when pion sends the ServerHello, which it
//     does only once the client has echoed the cookie of pion's
//     HelloVerifyRequest: a spoofed source never receives that cookie. At
//     the per-peer cap, that peer's oldest handshake without progress is
//     evicted (closed) to make room; at the total cap, the oldest of the
//     peer with the most handshakes without progress. Only when every
//     handshake has progressed is the new ClientHello dropped. A flood from
//     spoofed sources thus evicts its own handshakes first: a genuine
//     client is evicted only by a flood from more distinct peers than
//     MaxHandshakes, and only if it does not answer the HelloVerifyRequest
//     before that many newer ClientHellos arrive; it then retransmits, and
//     starts again.
//   - Datagrams queued for a connection, between the socket and pion's
//     reader, are bounded in bytes (muxConn.limit): more are dropped, as
//     a full socket buffer would.
//
// The socket closes once the Listener and every connection are closed, so
// that associations outlive their Listener.
type udpMux struct {
	conn  *net.UDPConn
	onNew func(*muxConn) // called under mu for a new handshake

	maxHandshakes, maxPerPeer int
	handshakeQueue            int // bytes queued for a handshaking conn
	establishedQueue          int // for an established one

	mu          sync.Mutex
	conns       map[netip.AddrPort]*muxConn
	perPeer     map[netip.Addr]int // handshaking conns per peer (netpeer.Of)
	freshPeer   map[netip.Addr]int // those without progress
	handshaking int
	evicted     int     // conns evicted whose pion connection has not closed yet
	fresh       muxList // handshaking without progress, oldest first
	accepting   bool
	refs        int // the listener (until close) and each open conn

	// Counters, for tests and the soak.
	notHello, evictions, dropped, created atomic.Uint64

	readDone chan struct{}
}

// muxReadSize is the largest datagram read: pion/dtls's own receive MTU.
const muxReadSize = 8192

// Buffers of two sizes hold queued datagrams: small ones for datagrams of
// the usual path MTU, large ones for loopback and jumbo frames.
const muxSmall = 2048

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, muxSmall); return &b }}
	largeBufs = sync.Pool{New: func() any { b := make([]byte, muxReadSize); return &b }}
)

func getBuf(n int) *[]byte {
	if n <= muxSmall {
		return smallBufs.Get().(*[]byte)
	}
	return largeBufs.Get().(*[]byte)
}

func putBuf(b *[]byte) {
	if cap(*b) == muxSmall {
		smallBufs.Put(b)
	} else {
		largeBufs.Put(b)
	}
}

func newUDPMux(conn *net.UDPConn, s *settings, onNew func(*muxConn)) *udpMux {
	m := &udpMux{
		conn:          conn,
		onNew:         onNew,
		maxHandshakes: s.MaxHandshakes,
		maxPerPeer:    s.MaxHandshakesPerPeer,
		// A handshake flight is a few datagrams; 64 KiB holds a
		// certificate chain's worth several times over.
		handshakeQueue: 64 << 10,
		// A well-behaved peer has at most the receive window in flight.
		establishedQueue: 2 * int(s.MaxReceiveBufferSize),
		conns:            make(map[netip.AddrPort]*muxConn),
		perPeer:          make(map[netip.Addr]int),
		freshPeer:        make(map[netip.Addr]int),
		accepting:        true,
		refs:             1,
		readDone:         make(chan struct{}),
	}
	go m.readLoop()
	return m
}

func (m *udpMux) readLoop() {
	defer close(m.readDone)
	buf := make([]byte, muxReadSize)
	for {
		n, raddr, err := m.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (an ICMP-reported unreachable port, on
			// some systems): keep reading.
			continue
		}
		raddr = netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
		m.deliver(raddr, buf[:n])
	}
}

// deliver routes one datagram.
func (m *udpMux) deliver(raddr netip.AddrPort, d []byte) {
	m.mu.Lock()
	c := m.conns[raddr]
	if c == nil {
		c = m.admit(raddr, d)
	}
	m.mu.Unlock()
	if c != nil {
		c.push(d)
	}
}

// admit creates the conn for a new address whose datagram is a
// ClientHello, within the handshake limits. The caller holds mu.
func (m *udpMux) admit(raddr netip.AddrPort, d []byte) *muxConn {
	if !m.accepting {
		return nil
	}
	if !isClientHello(d) {
		m.notHello.Add(1)
		return nil
	}
	peer := netpeer.Of(raddr.Addr())
	if m.perPeer[peer] >= m.maxPerPeer && !m.evict(peer, true) {
		m.dropped.Add(1)
		return nil
	}
	if m.handshaking >= m.maxHandshakes && !m.evict(peer, false) {
		m.dropped.Add(1)
		return nil
	}
	// Evicted handshakes hold their goroutines until pion has noticed:
	// when the machine is too busy to wind them down as fast as a flood
	// evicts them, new ClientHellos wait (are dropped; clients
	// retransmit).
	if m.handshaking+m.evicted >= 2*m.maxHandshakes {
		m.dropped.Add(1)
		return nil
	}
	c := &muxConn{
		m:      m,
		raddr:  raddr,
		peer:   peer,
		addr:   net.UDPAddrFromAddrPort(raddr),
		limit:  m.handshakeQueue,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		rd:     deadline.New(),
		wd:     deadline.New(),
		state:  connFresh,
	}
	m.conns[raddr] = c
	m.perPeer[peer]++
	m.freshPeer[peer]++
	m.handshaking++
	m.fresh.pushBack(c)
	m.refs++
	m.created.Add(1)
	m.onNew(c)
	return c
}

// evict closes a handshake without progress and reports whether there was
// one: with samePeer, the oldest of peer; otherwise the oldest of the
// peer that has the most of them, so that a flood from some addresses
// makes room at their own expense rather than at a genuine client's. The
// caller holds mu.
func (m *udpMux) evict(peer netip.Addr, samePeer bool) bool {
	if !samePeer {
		most := 0
		for p, n := range m.freshPeer {
			if n > most {
				peer, most = p, n
			}
		}
		if most == 0 {
			return false
		}
	}
	for c := m.fresh.head; c != nil; c = c.next {
		if c.peer != peer {
			continue
		}
		m.evictions.Add(1)
		m.removeLocked(c)
		c.state = connEvicted
		m.evicted++
		c.closeQueue()
		return true
	}
	return false
}

// leaveFresh takes c off the list of handshakes without progress. The
// caller holds mu.
func (m *udpMux) leaveFresh(c *muxConn) {
	m.fresh.remove(c)
	decrement(m.freshPeer, c.peer)
}

// removeLocked takes c out of the tables and the handshake counts; the
// reference it holds on the socket stays until Close. The caller holds
// mu.
func (m *udpMux) removeLocked(c *muxConn) {
	if c.state == connClosed {
		return
	}
	if c.state == connFresh {
		m.leaveFresh(c)
	}
	if c.state != connEstablished {
		decrement(m.perPeer, c.peer)
		m.handshaking--
	}
	if m.conns[c.raddr] == c {
		delete(m.conns, c.raddr)
	}
	c.state = connClosed
}

// decrement counts one less for k, forgetting it at zero.
func decrement(counts map[netip.Addr]int, k netip.Addr) {
	if n := counts[k]; n > 1 {
		counts[k] = n - 1
	} else {
		delete(counts, k)
	}
}

// unrefLocked drops one reference; the last closes the socket. The caller
// holds mu.
func (m *udpMux) unrefLocked() {
	m.refs--
	if m.refs == 0 {
		_ = m.conn.Close()
	}
}

// progress marks c's handshake as past the cookie exchange.
func (m *udpMux) progress(c *muxConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.state == connFresh {
		m.leaveFresh(c)
		c.state = connProgressed
	}
}

// established takes c out of the handshake limits, once its DTLS
// handshake has completed, and lets more datagrams queue for it.
func (m *udpMux) established(c *muxConn) {
	m.mu.Lock()
	if c.state == connFresh || c.state == connProgressed {
		if c.state == connFresh {
			m.leaveFresh(c)
		}
		decrement(m.perPeer, c.peer)
		m.handshaking--
		c.state = connEstablished
	}
	m.mu.Unlock()
	c.progressed.Store(true) // no more looking for a ServerHello
	c.qmu.Lock()
	c.limit = m.establishedQueue
	c.qmu.Unlock()
}

// close stops creating conns; the socket closes when the last conn does.
// It returns once no conn is being created (onNew is not called after).
func (m *udpMux) close() error {
	m.mu.Lock()
	if !m.accepting {
		m.mu.Unlock()
		return nil
	}
	m.accepting = false
	m.unrefLocked()
	m.mu.Unlock()
	return nil
}

// counts returns the handshakes in progress and the conns open.
func (m *udpMux) counts() (handshaking, conns int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handshaking, len(m.conns)
}

type connState uint8

const (
	connFresh       connState = iota // handshaking, no cookie echoed yet
	connProgressed                   // handshaking, past the cookie exchange
	connEstablished                  // DTLS handshake done
	connEvicted                      // closed by the mux; pion has yet to Close
	connClosed
)

// muxConn is the net.PacketConn of one remote address that pion/dtls
// runs a server connection on. Reads take queued datagrams; writes go
// straight to the socket.
type muxConn struct {
	m     *udpMux
	raddr netip.AddrPort
	peer  netip.Addr // netpeer.Of
	addr  *net.UDPAddr

	// Guarded by m.mu.
	state      connState
	prev, next *muxConn // in m.fresh

	progressed atomic.Bool // pion sent a ServerHello

	qmu    sync.Mutex
	queue  []*[]byte // datagrams not yet read, oldest first
	qhead  int
	lens   []int
	queued int // bytes held by the queue's buffers
	limit  int
	closed bool
	notify chan struct{} // signalled when a datagram is queued
	done   chan struct{} // closed by Close or eviction

	rd, wd *deadline.Deadline
}

// push queues a copy of d, or drops it if the queue is full.
func (c *muxConn) push(d []byte) {
	b := getBuf(len(d))
	n := copy(*b, d)
	c.qmu.Lock()
	if c.closed || c.queued+cap(*b) > c.limit {
		c.qmu.Unlock()
		putBuf(b)
		return
	}
	c.queue = append(c.queue, b)
	c.lens = append(c.lens, n)
	c.queued += cap(*b)
	c.qmu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// pop takes the oldest datagram, copying it into p.
func (c *muxConn) pop(p []byte) (int, bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qhead == len(c.queue) {
		return 0, false
	}
	b, n := c.queue[c.qhead], c.lens[c.qhead]
	c.queue[c.qhead] = nil
	c.qhead++
	if c.qhead == len(c.queue) {
		c.queue, c.lens, c.qhead = c.queue[:0], c.lens[:0], 0
	} else if c.qhead >= 64 && c.qhead*2 >= len(c.queue) {
		// Compact, so that a queue that never empties does not grow.
		k := copy(c.queue, c.queue[c.qhead:])
		copy(c.lens, c.lens[c.qhead:])
		clear(c.queue[k:])
		c.queue, c.lens, c.qhead = c.queue[:k], c.lens[:k], 0
	}
	c.queued -= cap(*b)
	n = copy(p, (*b)[:n])
	putBuf(b)
	return n, true
}

// closeQueue ends reads and frees the queued datagrams.
func (c *muxConn) closeQueue() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.done)
	for i := c.qhead; i < len(c.queue); i++ {
		putBuf(c.queue[i])
	}
	c.queue, c.lens, c.qhead, c.queued = nil, nil, 0, 0
}

// ReadFrom returns the next datagram from the remote address.
func (c *muxConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		if n, ok := c.pop(p); ok {
			return n, c.addr, nil
		}
		select {
		case <-c.done:
			return 0, nil, net.ErrClosed
		default:
		}
		select {
		case <-c.notify:
		case <-c.done:
			return 0, nil, net.ErrClosed
		case <-c.rd.Done():
			return 0, nil, os.ErrDeadlineExceeded
		}
	}
}

// WriteTo sends p to the remote address (addr is ignored: a muxConn has
// one peer). It watches pion's outbound handshake for the ServerHello,
// which shows that the peer answered the cookie exchange.
func (c *muxConn) WriteTo(p []byte, _ net.Addr) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	case <-c.wd.Done():
		return 0, os.ErrDeadlineExceeded
	default:
	}
	if !c.progressed.Load() && hasServerHello(p) {
		c.progressed.Store(true)
		c.m.progress(c)
	}
	return c.m.conn.WriteToUDPAddrPort(p, c.raddr)
}

// Close releases the address: a later ClientHello from it starts anew.
func (c *muxConn) Close() error {
	m := c.m
	m.mu.Lock()
	switch c.state {
	case connEvicted:
		m.evicted--
	case connClosed:
		m.mu.Unlock()
		return nil
	default:
		m.removeLocked(c)
	}
	c.state = connClosed
	m.unrefLocked()
	m.mu.Unlock()
	c.closeQueue()
	return nil
}

func (c *muxConn) LocalAddr() net.Addr  { return c.m.conn.LocalAddr() }
func (c *muxConn) RemoteAddr() net.Addr { return c.addr }

func (c *muxConn) SetDeadline(t time.Time) error {
	c.rd.Set(t)
	c.wd.Set(t)
	return nil
}

func (c *muxConn) SetReadDeadline(t time.Time) error  { c.rd.Set(t); return nil }
func (c *muxConn) SetWriteDeadline(t time.Time) error { c.wd.Set(t); return nil }

// muxList is a doubly linked list of conns through their prev and next.
type muxList struct{ head, tail *muxConn }

func (l *muxList) pushBack(c *muxConn) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *muxList) remove(c *muxConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if l.head == c {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else if l.tail == c {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

// DTLS record and handshake layout (RFC 6347 §4.1, §4.2.2).
const (
	dtlsRecordHeaderLen    = 13
	dtlsHandshakeHeaderLen = 12
	dtlsContentHandshake   = 22
	dtlsClientHello        = 1
	dtlsServerHello        = 2
	// A ClientHello body holds at least a version, the random, empty
	// session id and cookie, one cipher suite and one compression method.
	minClientHelloLen = 2 + 32 + 1 + 1 + 2 + 2 + 1 + 1
)

// isClientHello reports whether datagram d starts with a DTLS record that
// carries a whole ClientHello, or its first fragment, as a client's first
// datagram does: content type handshake, a DTLS version, epoch 0, a
// length within the datagram, then a handshake header of type
// client_hello with fragment offset 0 and a fragment length that fills
// the record, and a DTLS client version. Random bytes behind a handshake
// record header almost never pass.
func isClientHello(d []byte) bool {
	if len(d) < dtlsRecordHeaderLen+dtlsHandshakeHeaderLen+minClientHelloLen {
		return false
	}
	if d[0] != dtlsContentHandshake || !dtlsVersion(d[1], d[2]) || d[3] != 0 || d[4] != 0 {
		return false
	}
	rlen := int(binary.BigEndian.Uint16(d[11:13]))
	if rlen < dtlsHandshakeHeaderLen+minClientHelloLen || dtlsRecordHeaderLen+rlen > len(d) {
		return false
	}
	h := d[dtlsRecordHeaderLen : dtlsRecordHeaderLen+rlen]
	msgLen, fragOff, fragLen := uint24(h[1:4]), uint24(h[6:9]), uint24(h[9:12])
	return h[0] == dtlsClientHello &&
		fragOff == 0 && fragLen == rlen-dtlsHandshakeHeaderLen && fragLen <= msgLen &&
		msgLen >= minClientHelloLen && dtlsVersion(h[12], h[13])
}

// hasServerHello reports whether an outbound datagram holds a ServerHello
// record (epoch 0).
func hasServerHello(d []byte) bool {
	for len(d) >= dtlsRecordHeaderLen {
		rlen := int(binary.BigEndian.Uint16(d[11:13]))
		if dtlsRecordHeaderLen+rlen > len(d) {
			return false
		}
		if d[0] == dtlsContentHandshake && d[3] == 0 && d[4] == 0 && rlen > 0 && d[dtlsRecordHeaderLen] == dtlsServerHello {
			return true
		}
		d = d[dtlsRecordHeaderLen+rlen:]
	}
	return false
}

// dtlsVersion reports whether a, b is DTLS 1.0 (0xfeff) or 1.2 (0xfefd).
func dtlsVersion(a, b byte) bool { return a == 0xfe && (b == 0xff || b == 0xfd) }

func uint24(b []byte) int { return int(b[0])<<16 | int(b[1])<<8 | int(b[2]) }

// listenMux opens the Listener's UDP socket.
func listenMux(network string, laddr *net.UDPAddr, s *settings, onNew func(*muxConn)) (*udpMux, error) {
	lc := s.listenConfig()
	pc, err := lc.ListenPacket(context.Background(), network, laddr.String())
	if err != nil {
		return nil, err
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		_ = pc.Close()
		return nil, errors.New("sctpddp: not a UDP socket")
	}
	return newUDPMux(uc, s, onNew), nil
}
