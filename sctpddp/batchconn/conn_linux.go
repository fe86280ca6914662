//go:build linux

package batchconn

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// groSlot is the receive slot of a GRO socket: the kernel coalesces
	// up to 64 KiB of one flow into a super-datagram.
	groSlot = 1 << 16
	// gsoMaxSegments is the most segments one GSO message carries: the
	// kernel's UDP_MAX_SEGMENTS, which no kernel with GSO sets lower.
	gsoMaxSegments = 64
	// gsoMaxBytes is the most payload one GSO message carries: a 64 KiB
	// IP packet less a 40-octet IP header and the UDP header, below the
	// 65,507 octets IPv4 takes and the 65,527 IPv6 takes.
	gsoMaxBytes = 0xffff - 40 - 8
)

// Conn is a net.PacketConn over a *net.UDPConn that reads and writes in
// batches. It is safe for concurrent use: reads are serialised among
// themselves, and so are writes.
type Conn struct {
	uc     *net.UDPConn
	rc     syscall.RawConn
	family int // of the socket: AF_INET or AF_INET6
	laddr  net.Addr
	peer   *net.UDPAddr // of a connected socket; nil if unconnected

	closed    atomic.Bool
	rdeadline atomic.Int64 // SetReadDeadline's time in Unix ns; 0 for none
	gso       atomic.Bool  // in use: turned off for good on a refusal
	gro       bool         // UDP_GRO is on
	stats     counters

	rmu sync.Mutex // guards r
	r   reader

	wmu sync.Mutex // guards w
	w   writer
}

// reader is the read side. Messages msgs[ri:rn] of the last receive
// are not yet handed out in full; roff is the offset of the next GRO
// segment in msgs[ri].
type reader struct {
	slot   int    // octets of each message's buffer
	buf    []byte // the messages' buffers, slot octets each
	msgs   []mmsghdr
	iovs   []unix.Iovec
	names  []sockaddr
	oob    []byte // GRO control data, groCmsgSpace octets a message
	ri, rn int
	roff   int
	rseg   int   // GRO segment size of msgs[ri], or 0 for a whole datagram
	err    error // of the last receive call
	recv   func(fd uintptr) bool
	addrs  addrCache
}

// writer is the write side. Between Cork and Flush, datagrams are copied
// one after the other into arena and noted in pend; Flush groups them
// into messages (a GSO run is one) and sends them with sendmmsg.
type writer struct {
	depth int // Corks not yet matched by a Flush

	slot  int    // longest datagram held
	arena []byte // allocated at the first datagram held
	used  int
	pend  []pending

	msgs  []mmsghdr
	iovs  []unix.Iovec
	names []sockaddr
	oob   []byte    // UDP_SEGMENT control data, gsoCmsgSpace octets a message
	runs  []msgSpan // the datagrams of each message
	nmsg  int
	sent  int   // messages of msgs[:nmsg] sent or given up
	err   error // first send error of the Flush in progress
	send  func(fd uintptr) bool
}

// pending is a datagram held between Cork and Flush.
type pending struct {
	off, n int
	sa     sockaddr // zero on a connected socket
}

// msgSpan is the run of pending datagrams a message carries.
type msgSpan struct{ first, n int }

// New makes a Conn of uc, which it owns from then on: Close closes uc,
// and uc is not to be read or written directly. cfg may be nil. uc may
// be unconnected (as net.ListenUDP makes it) or connected (net.DialUDP):
// a connected socket's datagrams all go to its peer, with no destination
// in the messages sent, and the kernel reports an ICMP error about that
// peer (ECONNREFUSED for a port where nothing listens) to the next read
// or write.
func New(uc *net.UDPConn, cfg *Config) (*Conn, error) {
	s := cfg.withDefaults()
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	family, err := socketFamily(rc)
	if err != nil {
		return nil, err
	}
	c := &Conn{uc: uc, rc: rc, family: family, laddr: uc.LocalAddr()}
	if ra, ok := uc.RemoteAddr().(*net.UDPAddr); ok && ra != nil {
		c.peer = ra
	}
	c.gso.Store(!s.DisableGSO && gsoSupported(rc))
	c.gro = !s.DisableGRO && enableGRO(rc)
	c.initReader(&s)
	c.initWriter(&s)
	return c, nil
}

func (c *Conn) initReader(s *Config) {
	r := &c.r
	r.slot = s.MaxDatagram
	batch := s.ReadBatch
	if c.gro {
		r.slot = groSlot
		if batch <= 0 {
			batch = defaultGROReadBatch
		}
		r.oob = make([]byte, batch*groCmsgSpace)
	} else if batch <= 0 {
		batch = defaultReadBatch
	}
	r.buf = make([]byte, batch*r.slot)
	r.msgs = make([]mmsghdr, batch)
	r.iovs = make([]unix.Iovec, batch)
	r.names = make([]sockaddr, batch)
	for i := range r.msgs {
		r.iovs[i].Base = &r.buf[i*r.slot]
		r.iovs[i].SetLen(r.slot)
		h := &r.msgs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
		if c.gro {
			h.Control = &r.oob[i*groCmsgSpace]
		}
	}
	r.recv = c.recvBatch
}

func (c *Conn) initWriter(s *Config) {
	w := &c.w
	w.slot = s.MaxDatagram
	n := s.WriteBatch
	w.pend = make([]pending, 0, n)
	w.msgs = make([]mmsghdr, n)
	w.iovs = make([]unix.Iovec, n)
	w.names = make([]sockaddr, n)
	w.oob = make([]byte, n*gsoCmsgSpace)
	w.runs = make([]msgSpan, n)
	for i := range w.msgs {
		h := &w.msgs[i].hdr
		if c.peer == nil {
			h.Name = (*byte)(unsafe.Pointer(&w.names[i]))
		}
		h.Iov = &w.iovs[i]
		h.SetIovlen(1)
		h.Control = &w.oob[i*gsoCmsgSpace]
	}
	w.send = c.sendBatch
}

// ReadFrom copies the next datagram into p and returns its length and
// source, truncating a datagram longer than p as a plain ReadFrom does.
// It receives a new batch only once the last is handed out. The address
// returned may be shared with other calls: do not modify it.
func (c *Conn) ReadFrom(p []byte) (int, net.Addr, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	d, addr, err := c.next()
	return copy(p, d), addr, err
}

// Next returns the next datagram where the Conn received it, without a
// copy, and its source, as ReadFrom would. The datagram is valid until
// the next call to Next or ReadFrom, which reuse its buffer; only one
// goroutine is to call them.
func (c *Conn) Next() ([]byte, net.Addr, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.next()
}

// next hands out the next datagram. The caller holds rmu.
func (c *Conn) next() ([]byte, net.Addr, error) {
	r := &c.r
	if r.ri < r.rn {
		// Datagrams received earlier: answer as the socket would,
		// which refuses to read once closed or past the deadline.
		if err := c.readable(); err != nil {
			return nil, nil, err
		}
	}
	for {
		for r.ri >= r.rn {
			if err := c.fill(); err != nil {
				return nil, nil, err
			}
		}
		i := r.ri
		m := &r.msgs[i]
		total := int(m.n)
		if r.roff == 0 && c.gro {
			r.rseg = groSegment(r.oob[i*groCmsgSpace : i*groCmsgSpace+int(m.hdr.Controllen)])
		}
		seg := total - r.roff
		if r.rseg > 0 && r.rseg < seg {
			seg = r.rseg
		}
		base := i*r.slot + r.roff
		r.roff += seg
		if r.roff >= total {
			r.ri++
			r.roff, r.rseg = 0, 0
		}
		k, ok := keyOf(&r.names[i])
		if !ok {
			continue // not an IP source: nothing to answer
		}
		c.stats.recvDatagrams.Add(1)
		return r.buf[base : base+seg : base+seg], r.addrs.get(k), nil
	}
}

// readable reports why a socket would refuse a read now, if it would.
func (c *Conn) readable() error {
	if c.closed.Load() {
		return c.opError("read", nil, net.ErrClosed)
	}
	if d := c.rdeadline.Load(); d != 0 && time.Now().UnixNano() >= d {
		return c.opError("read", nil, os.ErrDeadlineExceeded)
	}
	return nil
}

// fill receives a batch, waiting for the first datagram as a plain read
// waits: until one comes, the read deadline or Close.
func (c *Conn) fill() error {
	r := &c.r
	if c.closed.Load() {
		return c.opError("read", nil, net.ErrClosed)
	}
	r.ri, r.rn, r.roff, r.rseg = 0, 0, 0, 0
	for i := range r.msgs {
		h := &r.msgs[i].hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.Flags = 0
		if c.gro {
			h.SetControllen(groCmsgSpace)
		}
		r.msgs[i].n = 0
	}
	if err := c.rc.Read(r.recv); err != nil {
		return c.opError("read", nil, unwrapOp(err))
	}
	if err := r.err; err != nil {
		r.err = nil
		return c.opError("read", nil, err)
	}
	c.stats.recvCalls.Add(1)
	c.stats.recvMessages.Add(uint64(r.rn))
	return nil
}

// recvBatch is the receive step of RawConn.Read: false to wait until the
// socket is readable.
func (c *Conn) recvBatch(fd uintptr) bool {
	for {
		n, errno := recvmmsg(fd, c.r.msgs)
		switch errno {
		case 0:
			c.r.rn = n
			return true
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			c.r.err = os.NewSyscallError("recvmmsg", errno)
			return true
		}
	}
}

// WriteTo sends p to addr, a *net.UDPAddr; on a connected socket addr
// is nil or the peer's address. Outside Cork and Flush it sends at once. Between them it copies p to be sent by Flush, or by a
// later WriteTo that finds the batch full; an error such a WriteTo
// returns may be of a datagram held before, and p is then not held
// (the count returned is 0). A datagram longer than Config.MaxDatagram
// is sent at once, after those held.
func (c *Conn) WriteTo(p []byte, addr net.Addr) (int, error) {
	ua, err := checkPeer(c.peer, addr)
	if err != nil {
		return 0, c.opError("write", addr, err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	w := &c.w
	if w.depth == 0 || len(p) > w.slot {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		var n int
		if ua == nil {
			n, err = c.uc.Write(p)
		} else {
			n, err = c.uc.WriteTo(p, ua)
		}
		if err == nil {
			c.stats.sent(1, 1)
		}
		return n, err
	}
	if c.closed.Load() {
		return 0, c.opError("write", addr, net.ErrClosed)
	}
	if w.arena == nil {
		w.arena = make([]byte, cap(w.pend)*w.slot)
	}
	if len(w.pend) == cap(w.pend) || w.used+len(p) > len(w.arena) {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	w.pend = w.pend[:len(w.pend)+1]
	q := &w.pend[len(w.pend)-1]
	q.sa = sockaddr{}
	if ua != nil {
		if err := encodeSockaddr(&q.sa, c.family, ua); err != nil {
			w.pend = w.pend[:len(w.pend)-1]
			return 0, c.opError("write", addr, err)
		}
	}
	q.off, q.n = w.used, len(p)
	w.used += copy(w.arena[w.used:], p)
	return len(p), nil
}

// Cork starts holding datagrams: WriteTo copies them, whichever
// goroutine calls it, for Flush to send together. Corks nest (or come
// from several goroutines): holding goes on until as many Flushes as
// Corks. Every Cork is to be followed by a Flush: datagrams held wait
// for it.
func (c *Conn) Cork() {
	c.wmu.Lock()
	c.w.depth++
	c.wmu.Unlock()
}

// Flush sends the datagrams held, in order, in as few system calls as it
// can, and ends the latest Cork. It waits, as a plain WriteTo does, while
// the socket's send buffer is full, until the write deadline; on reaching
// it or Close, the datagrams not yet sent are dropped. A datagram the
// kernel refuses otherwise is dropped too and the rest are sent; Flush
// returns the first such error.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := c.flushLocked()
	if c.w.depth > 0 {
		c.w.depth--
	}
	return err
}

// flushLocked sends the datagrams held. The caller holds wmu.
func (c *Conn) flushLocked() error {
	w := &c.w
	if len(w.pend) == 0 {
		return nil
	}
	w.err = nil
	c.buildMsgs(0)
	err := c.rc.Write(w.send)
	w.pend = w.pend[:0]
	w.used = 0
	if err != nil {
		return c.opError("write", nil, unwrapOp(err))
	}
	if err := w.err; err != nil {
		w.err = nil
		return c.opError("write", nil, err)
	}
	return nil
}

// buildMsgs lays out the messages of pend[from:] and makes them the ones
// to send. With GSO, a run of datagrams to one address of one size (the
// last may be shorter) becomes one message with a UDP_SEGMENT control
// message, within the kernel's limits on segments and octets.
func (c *Conn) buildMsgs(from int) {
	w := &c.w
	gso := c.gso.Load()
	w.nmsg, w.sent = 0, 0
	for i := from; i < len(w.pend); {
		first := &w.pend[i]
		j, total := i+1, first.n
		if gso && first.n > 0 {
			for j < len(w.pend) && j-i < gsoMaxSegments {
				q := &w.pend[j]
				if q.n == 0 || q.n > first.n || total+q.n > gsoMaxBytes || q.sa != first.sa {
					break
				}
				total += q.n
				j++
				if q.n < first.n {
					break // a shorter segment ends a run
				}
			}
		}
		k := w.nmsg
		h := &w.msgs[k].hdr
		if c.peer == nil {
			w.names[k] = first.sa
			h.Namelen = sockaddrLen(&first.sa)
		}
		// An empty datagram may sit at the arena's end; its base is
		// never read.
		w.iovs[k].Base = &w.arena[min(first.off, len(w.arena)-1)]
		w.iovs[k].SetLen(total)
		if j-i > 1 {
			putSegmentCmsg(w.oob[k*gsoCmsgSpace:], first.n)
			h.SetControllen(gsoCmsgSpace)
		} else {
			h.SetControllen(0)
		}
		w.runs[k] = msgSpan{first: i, n: j - i}
		w.nmsg++
		i = j
	}
}

// sendBatch is the send step of RawConn.Write: false to wait until the
// socket is writable.
func (c *Conn) sendBatch(fd uintptr) bool {
	w := &c.w
	for w.sent < w.nmsg {
		n, errno := sendmmsgCall(fd, w.msgs[w.sent:w.nmsg])
		switch {
		case errno == 0:
			d := 0
			for _, r := range w.runs[w.sent : w.sent+n] {
				d += r.n
			}
			c.stats.sent(n, d)
			w.sent += n
		case errno == unix.EINTR:
		case errno == unix.EAGAIN:
			return false
		case (errno == unix.EIO || errno == unix.EINVAL) && w.runs[w.sent].n > 1:
			// The route cannot segment for us (EIO: its device does
			// not checksum; EINVAL: a segment beyond its MTU, or a
			// kernel refusing GSO here): send without GSO from now on.
			c.gso.Store(false)
			c.buildMsgs(w.runs[w.sent].first)
		default:
			// Refused as a plain send would be: drop it, go on.
			if w.err == nil {
				w.err = os.NewSyscallError("sendmmsg", errno)
			}
			w.sent++
		}
	}
	return true
}

// Close closes the socket. A ReadFrom or Flush waiting returns
// net.ErrClosed; datagrams held since Cork are dropped, and the Conn's
// buffers are let go once no call is using them, so that a closed Conn
// still referenced holds none.
func (c *Conn) Close() error {
	c.closed.Store(true)
	err := c.uc.Close()
	c.rmu.Lock()
	c.r.buf, c.r.ri, c.r.rn = nil, 0, 0
	for i := range c.r.iovs {
		c.r.iovs[i] = unix.Iovec{}
	}
	c.rmu.Unlock()
	c.wmu.Lock()
	c.w.arena, c.w.pend, c.w.used = nil, c.w.pend[:0], 0
	c.wmu.Unlock()
	return err
}

// LocalAddr returns the socket's address.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rdeadline.Store(deadlineNanos(t))
	return c.uc.SetDeadline(t)
}

// SetReadDeadline sets the time after which ReadFrom fails with
// os.ErrDeadlineExceeded, even with datagrams received but not yet
// handed out (they stay for a later ReadFrom).
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdeadline.Store(deadlineNanos(t))
	return c.uc.SetReadDeadline(t)
}

// SetWriteDeadline sets the time after which a WriteTo or Flush waiting
// for the socket fails with os.ErrDeadlineExceeded.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.uc.SetWriteDeadline(t) }

// Features reports the kernel facilities in use.
func (c *Conn) Features() Features {
	return Features{Batch: true, GSO: c.gso.Load(), GRO: c.gro}
}

// Stats returns the counts of system calls and datagrams so far.
func (c *Conn) Stats() Stats {
	s := &c.stats
	return Stats{
		RecvCalls:     s.recvCalls.Load(),
		RecvMessages:  s.recvMessages.Load(),
		RecvDatagrams: s.recvDatagrams.Load(),
		SendCalls:     s.sendCalls.Load(),
		SendMessages:  s.sendMessages.Load(),
		SendDatagrams: s.sendDatagrams.Load(),
	}
}

// counters are the figures of Stats, atomic so that Stats needs neither
// lock (a reader waiting for datagrams holds rmu).
type counters struct {
	recvCalls, recvMessages, recvDatagrams atomic.Uint64
	sendCalls, sendMessages, sendDatagrams atomic.Uint64
}

// sent counts one send call that sent msgs messages of datagrams in all.
func (s *counters) sent(msgs, datagrams int) {
	s.sendCalls.Add(1)
	s.sendMessages.Add(uint64(msgs))
	s.sendDatagrams.Add(uint64(datagrams))
}

// deadlineNanos returns t as Conn.rdeadline holds it.
func deadlineNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case !t.After(time.Unix(0, 0)):
		return 1 // past already
	}
	return t.UnixNano()
}

func (c *Conn) opError(op string, addr net.Addr, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: c.laddr, Addr: addr, Err: err}
}

// unwrapOp takes the cause out of the *net.OpError of a RawConn call, to
// be wrapped again under the name of the Conn's operation.
func unwrapOp(err error) error {
	if oe, ok := err.(*net.OpError); ok {
		return oe.Err
	}
	return err
}

// addrCache keeps the addresses ReadFrom returned lately, so that
// datagrams from a known source return the same *net.UDPAddr rather than
// a new one each.
type addrCache struct {
	keys  [8]addrKey
	addrs [8]*net.UDPAddr
	next  int
}

func (a *addrCache) get(k addrKey) *net.UDPAddr {
	for i := range a.keys {
		if a.addrs[i] != nil && a.keys[i] == k {
			return a.addrs[i]
		}
	}
	u := k.udpAddr()
	a.keys[a.next], a.addrs[a.next] = k, u
	a.next = (a.next + 1) % len(a.keys)
	return u
}
