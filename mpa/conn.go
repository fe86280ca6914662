//go:build !js

package mpa

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// Config configures an MPA connection, either side.
type Config struct {
	// Revision is the MPA revision to start with: 2 (RFC 6581, the
	// default: IRD/ORD and the RTR indication are negotiated) or 1 (RFC
	// 5044 as Linux siw speaks it by default).
	Revision int
	// Markers asks the peer to put Markers in the FPDUs it sends here
	// (the M bit: "the sender REQUIRES Markers in the FPDUs the peer
	// sends to it"). Markers go the other way when the peer asks.
	Markers bool
	// NoCRC clears the C bit. CRCs are used in both directions unless
	// both ends clear it (RFC 5044 §7.1.1).
	NoCRC bool
	// PrivateData goes in the Request or Reply Frame (at most 512 octets,
	// 508 with Revision 2).
	PrivateData []byte
	// ClientServer selects RFC 6581's client-server model instead of
	// peer-to-peer: no RTR indication; the initiator's ULP must send
	// first, since the responder sends nothing before it has received an
	// FPDU (RFC 5044 §7.1.2 rule 4). Revision 1 is always client-server.
	ClientServer bool
	// HandshakeTimeout bounds the startup frames on both sides (RFC 5044
	// §7.1.2 rule 10). Default 10 s.
	HandshakeTimeout time.Duration
	// TLS, if set, runs MPA inside TLS over the TCP connection: a client
	// config for Dial, a server config for Listen. RFC 5042 §5.4.2 finds
	// TLS inappropriate for an RNIC (it is not a datagram protection); in
	// this software stack it protects the stream as IPsec would,
	// docs/security.md says how far.
	TLS *tls.Config
	// Trace, if set, receives a copy of every octet of the MPA stream in
	// each direction (after TLS decryption), from the first octet of the
	// startup frames on: for recording the session as a capture.
	Trace func(fromLocal bool, b []byte)
}

func (c *Config) revision() int {
	if c.Revision == 1 {
		return 1
	}
	return 2
}

func (c *Config) timeout() time.Duration {
	if c.HandshakeTimeout <= 0 {
		return 10 * time.Second
	}
	return c.HandshakeTimeout
}

// RejectedError is returned by Dial when the responder rejected the
// connection: its Reply Frame had the R bit set.
type RejectedError struct {
	PrivateData []byte
	Enhanced    *EnhancedData // the responder's IRD/ORD, if it sent them
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("mpa: the responder rejected the connection (%d octets of private data)", len(e.PrivateData))
}

// Negotiated is what the startup frames settled.
type Negotiated struct {
	Revision    int
	CRC         bool
	MarkersTx   bool // Markers in the FPDUs this end sends
	MarkersRx   bool // Markers in the FPDUs this end receives
	PeerToPeer  bool
	RTR         string // the RTR indication used: "write", "read", "send" or ""
	PeerData    []byte // the peer's Private Data (after any enhanced data)
	PeerIRDORD  *EnhancedData
	LocalIRDORD *EnhancedData
}

// Conn is an MPA connection in Full Operation carrying one RDMAP stream:
// the ddp.LLP of its endpoint (a queue pair), and the reader that feeds
// the endpoint's DDP stream. Its receive goroutine reads each DDP header,
// asks the DDP stream where the payload goes, and reads the payload from
// the socket straight into registered memory, computing the CRC on the
// way.
type Conn struct {
	nc  net.Conn
	ep  ddp.Endpoint
	w   *Writer
	r   *Reader
	neg Negotiated

	// Rule 4 of RFC 5044 §7.1.2: "MPA Responder mode implementations MUST
	// receive and validate at least one FPDU before sending any FPDUs or
	// Markers." firstRx is closed when the first FPDU has been validated.
	firstRx   chan struct{}
	firstOnce sync.Once

	// The send side: wmu is held while a stream sender or the flusher
	// uses the Writer. Between BeginNoWait and EndNoWait the sender holds
	// it throughout and the Writer does not wait (noWait); what the
	// socket did not take then is written by the flusher goroutine, which
	// kick wakes, unless a later send writes it first.
	wmu    sync.Mutex
	noWait bool
	kick   chan struct{}
	// holding: between Hold and Release, whole messages wait in the
	// Writer's gather list too (guarded by wmu).
	holding bool
	// skipNoWait counts down the messages BeginNoWait declines after one
	// that the socket did not take whole: while the peer reads slower
	// than this end writes, copying aside costs more than the hand-off
	// to the send goroutine saves.
	skipNoWait int

	receiveSide

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex // guards err
	err       error
}

// Negotiated returns what the startup settled.
func (c *Conn) Negotiated() Negotiated { return c.neg }

// RemoteAddr and LocalAddr return the TCP addresses.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }
func (c *Conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }

// MULPDU implements ddp.LLP.
func (c *Conn) MULPDU() int { return c.w.MULPDU() }

// Ready implements ddp.Holder: false while a Responder waits for its
// first FPDU (RFC 5044 §7.1.2 rule 4), when WriteSegment would block.
func (c *Conn) Ready() bool {
	select {
	case <-c.firstRx:
		return true
	default:
		return false
	}
}

// WriteSegment implements ddp.LLP: one FPDU, one gather write.
func (c *Conn) WriteSegment(hdr []byte, payload [][]byte) error {
	if !c.noWait {
		select {
		case <-c.firstRx:
		case <-c.closed:
			return net.ErrClosed
		}
		c.wmu.Lock()
		defer c.wmu.Unlock()
	}
	// The FPDUs of one DDP message leave in one gather write: the DDP
	// Sender hands over a message's segments one after the other, from
	// memory that does not change until the last is sent (ddp.LLP). With
	// Markers every FPDU is written on its own, so each starts a TCP
	// segment as RFC 5044 §5.1 and Wireshark's Marker decoding expect.
	if err := c.w.Queue(hdr, payload); err != nil {
		return err
	}
	if c.neg.MarkersTx || len(hdr) == 0 || (ddp.Control(hdr[0]).Last() && !c.holding) {
		return c.w.Flush()
	}
	return nil
}

// Hold implements ddp.Batcher: until Release, the FPDUs of whole messages
// stay in the Writer's gather list as well, and leave together, as many
// as the list holds (maxQueued) per gather write. With Markers every FPDU
// still leaves on its own (WriteSegment).
func (c *Conn) Hold() {
	c.wmu.Lock()
	c.holding = true
	c.wmu.Unlock()
}

// Release implements ddp.Batcher: it writes what Hold kept.
func (c *Conn) Release() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.holding = false
	return c.w.Flush()
}

// BeginNoWait implements ddp.NoWaiter: on a TCP connection (on Linux)
// with nothing left over from an earlier message sent this way, the next
// message is written with writev(2) calls that never wait for room in the
// socket's send buffer; what the socket does not take at once is copied
// and written by the connection's flusher goroutine, or first thing by
// the next send.
func (c *Conn) BeginNoWait() bool {
	if !c.w.CanNoWait() || !c.Ready() || !c.wmu.TryLock() {
		return false
	}
	if c.w.Behind() > 0 || c.skipNoWait > 0 {
		c.skipNoWait = max(c.skipNoWait-1, 0)
		c.wmu.Unlock()
		return false
	}
	c.noWait = true
	c.w.SetNoWait(true)
	return true
}

// EndNoWait implements ddp.NoWaiter.
func (c *Conn) EndNoWait() error {
	err := c.w.Flush()
	c.w.SetNoWait(false)
	c.noWait = false
	behind := c.w.Behind() > 0
	if behind {
		c.skipNoWait = noWaitBackoff
	}
	c.wmu.Unlock()
	if behind {
		signal(c.kick)
	}
	return err
}

// signal wakes the goroutine that waits on ch (of capacity 1), without
// waiting: a signal already pending is enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// noWaitBackoff is how many messages BeginNoWait declines after one that
// the socket did not take whole.
const noWaitBackoff = 64

// flushLoop writes what a message sent without waiting left behind.
func (c *Conn) flushLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.kick:
		case <-c.closed:
			return
		}
		c.wmu.Lock()
		err := c.w.Flush()
		c.wmu.Unlock()
		if err != nil {
			c.fail(c.ep.Stream(), err)
			return
		}
	}
}

// Err returns why the connection ended, if it ended by itself.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection: gracefully (a FIN after what is queued)
// and then the socket. Close implements io.Closer for the queue pair.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		}
		c.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		c.nc.Close()
	})
	c.wg.Wait()
	return nil
}

func newConn(nc net.Conn, ep ddp.Endpoint, neg Negotiated, tx, rx Options, responder bool) *Conn {
	c := &Conn{nc: nc, ep: ep, neg: neg, firstRx: make(chan struct{}), closed: make(chan struct{}), kick: make(chan struct{}, 1)}
	c.w = NewWriter(nc, tx)
	c.r = NewReader(nc, rx)
	c.receiveSide.init()
	if !responder {
		c.firstOnce.Do(func() { close(c.firstRx) })
	}
	return c
}

// run starts the endpoint on the connection and the receive loop.
func (c *Conn) run() error {
	// Counted before the endpoint starts: from then on its Close may
	// close the connection, whose Close waits for these goroutines.
	c.wg.Add(3)
	if err := c.ep.Start(c); err != nil {
		c.wg.Add(-3)
		return err
	}
	go c.readLoop()
	go c.watch()
	go c.flushLoop()
	return nil
}

// watch closes the connection once the endpoint has stopped on an error
// and its Terminate is written: "The peer SHOULD perform a graceful LLP
// teardown to ensure the Terminate Message is successfully Delivered."
// (RFC 5040 §6.2.1)
func (c *Conn) watch() {
	defer c.wg.Done()
	select {
	case <-c.ep.Terminated():
		go c.Close()
	case <-c.closed:
	}
}

// tracedConn copies what crosses the connection to Config.Trace.
type tracedConn struct {
	net.Conn
	trace func(bool, []byte)
}

func (t tracedConn) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		t.trace(false, b[:n])
	}
	return n, err
}

func (t tracedConn) Write(b []byte) (int, error) {
	n, err := t.Conn.Write(b)
	if n > 0 {
		t.trace(true, b[:n])
	}
	return n, err
}

func (t tracedConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// maxSend is the largest ULPDU to send: MULPDU from the TCP EMSS (RFC
// 5044 §4.5), or the field's limit when the EMSS is unknown (TLS).
func maxSend(nc net.Conn, markers bool) int {
	if tc, ok := nc.(*net.TCPConn); ok {
		if emss, err := EMSS(tc); err == nil {
			return MULPDU(emss, markers)
		}
	}
	return MULPDU(MaxULPDU, markers)
}

// enhancedFor is this end's enhanced data for an endpoint.
func enhancedFor(ep ddp.Endpoint) EnhancedData {
	ird, ord := ep.ReadLimits()
	return EnhancedData{IRD: clamp14(ird), ORD: clamp14(ord)}
}

func clamp14(v int) uint16 {
	if v >= IRDORDAuto {
		return IRDORDAuto - 1
	}
	return uint16(v)
}

// deadline applies ctx and the handshake timeout to the startup.
func deadline(ctx context.Context, nc net.Conn, d time.Duration) func() {
	t := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(t) {
		t = dl
	}
	nc.SetDeadline(t)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	return func() {
		stop()
		nc.SetDeadline(time.Time{})
	}
}
