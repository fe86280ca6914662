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
	"github.com/iwarpgo/iwarp/sctpddp/batchconn"
	"github.com/iwarpgo/iwarp/sctpddp/sctp"
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
//     handshake answers when pion sends the ServerHello, which it does
//     only once the client has echoed the cookie of pion's
//     HelloVerifyRequest: a spoofed source never receives that cookie.
//     At the per-peer cap, that peer's oldest unanswered handshake is
//     evicted (closed) to make room, or the ClientHello is dropped if all
//     of them have answered. At the total cap, a ClientHello from a peer
//     that holds fewer handshakes than the peer holding the most evicts
//     one of the latter's (if several peers hold the most, one of
//     theirs): the oldest unanswered one, or if all have answered, the
//     oldest; from a peer that holds as many as any, it is dropped
//     (victim). So peers share the handshakes out evenly, and one holding
//     fewer than another never loses a handshake to make room: a client
//     whose peer holds no other handshake is admitted whatever the others
//     hold, and keeps its handshake unless every handshake belongs to a
//     peer holding just one (MaxHandshakes distinct peers). A flood from
//     spoofed sources thus makes room at the expense of the peers holding
//     the most, its own unless it comes from that many peers, and the
//     stalled handshakes of a few addresses that answered the cookie
//     exchange give way to newcomers.
//   - Datagrams queued for a connection, between the socket and pion's
//     reader, are bounded in bytes (muxConn.limit): more are dropped, as
//     a full socket buffer would.
//
// The socket closes once the Listener and every connection are closed, so
// that associations outlive their Listener.
type udpMux struct {
	conn  *net.UDPConn
	onNew func(*muxConn) // called under mu for a new handshake
	// unknown, on a plain-UDP Listener, takes every datagram from an
	// address without a conn instead of admit, outside mu
	// (plainListener.handle).
	unknown func(*udpMux, netip.AddrPort, []byte)

	// bc is conn, batching its reads and the writes of its muxConns
	// (batching.go); nil where it could not be made.
	bc *batchconn.Conn

	maxHandshakes, maxPerPeer int
	handshakeQueue            int // bytes queued for a handshaking conn
	establishedQueue          int // for an established one

	mu          sync.Mutex
	conns       map[netip.AddrPort]*muxConn
	peers       map[netip.Addr]*peerHandshakes // those with handshakes (netpeer.Of)
	handshaking int
	evicted     int    // conns evicted whose pion connection has not closed yet
	seq         uint64 // of the last conn admitted
	accepting   bool
	refs        int // the listener (until close) and each open conn

	// Counters, for tests and the soak: datagrams from unknown addresses
	// that were not ClientHellos, handshakes evicted (of which answered),
	// ClientHellos dropped at the caps, conns created.
	notHello, evictions, evictedAnswered, dropped, created atomic.Uint64

	readDone chan struct{}
}

// peerHandshakes are the handshakes in progress of one peer.
type peerHandshakes struct {
	n, fresh int     // handshakes, and those unanswered (connFresh)
	list     muxList // the handshakes, oldest first
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
	return newUDPMuxWith(conn, s, onNew, nil)
}

func newUDPMuxWith(conn *net.UDPConn, s *settings, onNew func(*muxConn), unknown func(*udpMux, netip.AddrPort, []byte)) *udpMux {
	m := &udpMux{
		conn:          conn,
		bc:            muxBatchConn(conn),
		onNew:         onNew,
		unknown:       unknown,
		maxHandshakes: s.MaxHandshakes,
		maxPerPeer:    s.MaxHandshakesPerPeer,
		// A handshake flight is a few datagrams; 64 KiB holds a
		// certificate chain's worth several times over.
		handshakeQueue: 64 << 10,
		// A well-behaved peer has at most the receive window in flight.
		establishedQueue: 2 * int(s.MaxReceiveBufferSize),
		conns:            make(map[netip.AddrPort]*muxConn),
		peers:            make(map[netip.Addr]*peerHandshakes),
		accepting:        true,
		refs:             1,
		readDone:         make(chan struct{}),
	}
	go m.readLoop()
	return m
}

func (m *udpMux) readLoop() {
	defer close(m.readDone)
	var buf []byte
	if m.bc == nil {
		buf = make([]byte, muxReadSize)
	}
	for {
		d, raddr, err := m.read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (an ICMP-reported unreachable port, on
			// some systems): keep reading.
			continue
		}
		raddr = netip.AddrPortFrom(raddr.Addr().Unmap(), raddr.Port())
		m.deliver(raddr, d)
	}
}

// muxBatchConn makes the batching reader and writer of a Listener's
// socket, or returns nil where that fails: the mux then reads and writes
// conn itself.
func muxBatchConn(conn *net.UDPConn) *batchconn.Conn {
	bc, err := batchconn.New(conn, nil)
	if err != nil {
		return nil
	}
	return bc
}

// read returns the next datagram: from bc, in its own buffer, or else
// read into buf. It is valid until the next read.
func (m *udpMux) read(buf []byte) ([]byte, netip.AddrPort, error) {
	if m.bc == nil {
		n, raddr, err := m.conn.ReadFromUDPAddrPort(buf)
		return buf[:n], raddr, err
	}
	d, addr, err := m.bc.Next()
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	return d[:min(len(d), muxReadSize)], addr.(*net.UDPAddr).AddrPort(), nil
}

// batcher returns the socket's batching writer, or nil.
func (m *udpMux) batcher() sctp.Batcher {
	if m.bc == nil {
		return nil
	}
	return m.bc
}

// deliver routes one datagram.
func (m *udpMux) deliver(raddr netip.AddrPort, d []byte) {
	m.mu.Lock()
	c := m.conns[raddr]
	if c == nil && m.unknown != nil {
		// A closed Listener answers nothing: it has no association to
		// offer.
		accepting := m.accepting
		m.mu.Unlock()
		if accepting {
			m.unknown(m, raddr, d)
		}
		return
	}
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
	// Evicted handshakes hold their goroutines until pion has noticed:
	// when the machine is too busy to wind them down as fast as a flood
	// evicts them, new ClientHellos wait (are dropped; clients
	// retransmit). An eviction leaves this sum as it is, so none is made
	// for a ClientHello dropped here.
	if m.handshaking+m.evicted >= 2*m.maxHandshakes {
		m.dropped.Add(1)
		return nil
	}
	peer := netpeer.Of(raddr.Addr())
	held := 0
	if p := m.peers[peer]; p != nil {
		held = p.n
	}
	if held >= m.maxPerPeer || m.handshaking >= m.maxHandshakes {
		v := m.victim(peer, held)
		if v == nil {
			m.dropped.Add(1)
			return nil
		}
		m.evictLocked(v)
	}
	c := m.newConnLocked(raddr, m.handshakeQueue, connFresh)
	p := m.peers[peer]
	if p == nil {
		p = &peerHandshakes{}
		m.peers[peer] = p
	}
	p.n++
	p.fresh++
	p.list.pushBack(c)
	m.conns[raddr] = c
	m.handshaking++
	m.refs++
	m.created.Add(1)
	m.onNew(c)
	return c
}

// newConnLocked makes the conn of a new peer at raddr, in state, holding
// at most limit datagrams; m.mu is held.
func (m *udpMux) newConnLocked(raddr netip.AddrPort, limit int, state connState) *muxConn {
	m.seq++
	return &muxConn{
		m:      m,
		raddr:  raddr,
		peer:   netpeer.Of(raddr.Addr()),
		seq:    m.seq,
		addr:   net.UDPAddrFromAddrPort(raddr),
		limit:  limit,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		rd:     deadline.New(),
		wd:     deadline.New(),
		state:  state,
	}
}

// victim returns the handshake to evict for a ClientHello from peer, which
// holds held handshakes, at a cap, or nil if the ClientHello is to be
// dropped. At the per-peer cap it is the peer's own oldest unanswered
// handshake. At the total cap it is one of the peers holding the most, if
// that is more than held: of their handshakes, the oldest unanswered, or
// if all have answered, the oldest. A handshake is thus evicted only for
// a peer that holds fewer than its own, which holds the most: a peer's
// last handshake only when every peer holds one. The caller holds mu.
func (m *udpMux) victim(peer netip.Addr, held int) *muxConn {
	if held >= m.maxPerPeer {
		return m.peers[peer].oldestFresh()
	}
	most := 0
	for _, p := range m.peers {
		most = max(most, p.n)
	}
	if most <= held {
		return nil
	}
	var fresh, answered *muxConn
	for _, p := range m.peers {
		if p.n < most {
			continue
		}
		if c := p.oldestFresh(); c != nil && (fresh == nil || c.seq < fresh.seq) {
			fresh = c
		}
		if c := p.list.head; answered == nil || c.seq < answered.seq {
			answered = c
		}
	}
	if fresh != nil {
		return fresh
	}
	return answered
}

// oldestFresh returns p's oldest unanswered handshake, or nil.
func (p *peerHandshakes) oldestFresh() *muxConn {
	if p == nil || p.fresh == 0 {
		return nil
	}
	c := p.list.head
	for c != nil && c.state != connFresh {
		c = c.next
	}
	return c
}

// evictLocked closes the handshake c to make room for another: it leaves
// the counts at once, and its pion connection fails on its next read or
// write. The caller holds mu.
func (m *udpMux) evictLocked(c *muxConn) {
	m.evictions.Add(1)
	if c.state == connProgressed {
		m.evictedAnswered.Add(1)
	}
	c.evictedOut.Store(true)
	m.removeLocked(c)
	c.state = connEvicted
	m.evicted++
	c.closeQueue()
}

// leave takes the handshaking c out of its peer's handshakes and the
// handshake count. The caller holds mu.
func (m *udpMux) leave(c *muxConn) {
	p := m.peers[c.peer]
	p.list.remove(c)
	p.n--
	if c.state == connFresh {
		p.fresh--
	}
	if p.n == 0 {
		delete(m.peers, c.peer)
	}
	m.handshaking--
}

// removeLocked takes c out of the tables and the handshake counts; the
// reference it holds on the socket stays until Close. The caller holds
// mu.
func (m *udpMux) removeLocked(c *muxConn) {
	switch c.state {
	case connClosed:
		return
	case connFresh, connProgressed:
		m.leave(c)
	}
	if m.conns[c.raddr] == c {
		delete(m.conns, c.raddr)
	}
	c.state = connClosed
}

// unrefLocked drops one reference; the last closes the socket. The caller
// holds mu.
func (m *udpMux) unrefLocked() {
	m.refs--
	if m.refs == 0 {
		_ = m.conn.Close()
	}
}

// progress marks c's handshake as past the cookie exchange (answered).
func (m *udpMux) progress(c *muxConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.state == connFresh {
		m.peers[c.peer].fresh--
		c.state = connProgressed
	}
}

// established takes c out of the handshake limits, once its DTLS
// handshake has completed, and lets more datagrams queue for it. It
// reports false if c was evicted (or closed) meanwhile: its connection
// no longer reads.
func (m *udpMux) established(c *muxConn) bool {
	m.mu.Lock()
	ok := c.state == connFresh || c.state == connProgressed
	if ok {
		m.leave(c)
		c.state = connEstablished
	}
	m.mu.Unlock()
	if !ok {
		return false
	}
	c.progressed.Store(true) // no more looking for a ServerHello
	c.qmu.Lock()
	c.limit = m.establishedQueue
	c.qmu.Unlock()
	return true
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
	connFresh       connState = iota // handshaking, unanswered: no cookie echoed yet
	connProgressed                   // handshaking, answered: past the cookie exchange
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
	seq   uint64     // admission order
	addr  *net.UDPAddr

	// Guarded by m.mu.
	state      connState
	prev, next *muxConn // in m.peers[peer].list, while handshaking

	progressed atomic.Bool // pion sent a ServerHello
	evictedOut atomic.Bool // evicted to make room for another handshake

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
	if c.m.bc != nil {
		return c.m.bc.WriteTo(p, c.addr)
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
// record (epoch 0): one of its whole records is a handshake record whose
// fragment begins with a whole handshake header of type server_hello.
func hasServerHello(d []byte) bool {
	for len(d) >= dtlsRecordHeaderLen {
		rlen := int(binary.BigEndian.Uint16(d[11:13]))
		if dtlsRecordHeaderLen+rlen > len(d) {
			return false
		}
		if d[0] == dtlsContentHandshake && d[3] == 0 && d[4] == 0 && rlen >= dtlsHandshakeHeaderLen && d[dtlsRecordHeaderLen] == dtlsServerHello {
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
	uc, err := listenUDP(network, laddr, s)
	if err != nil {
		return nil, err
	}
	return newUDPMux(uc, s, onNew), nil
}

// listenUDP opens a Listener's UDP socket.
func listenUDP(network string, laddr *net.UDPAddr, s *settings) (*net.UDPConn, error) {
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
	return uc, nil
}
