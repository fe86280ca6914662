package mpa

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// Config configures an MPA connection, either side. The zero value (and a
// nil *Config) is revision 2 with CRCs, no Markers, the peer-to-peer
// model with every RTR indication offered, and the default timeouts.
type Config struct {
	// Revision is the MPA revision to start with: 2 (RFC 6581, the
	// default: IRD/ORD and the RTR indication are negotiated, as Linux
	// siw starts by default) or 1 (RFC 5044 alone).
	Revision int
	// Markers asks the peer to put Markers in the FPDUs it sends here
	// (the M bit: "the sender REQUIRES Markers in the FPDUs the peer
	// sends to it"). Markers go the other way when the peer asks.
	Markers bool
	// NoCRC clears the C bit. CRCs are used in both directions unless
	// both ends clear it (RFC 5044 §7.1.1), so a Reply repeats a
	// Request's C bit of 1 whatever NoCRC says: it then declares the CRC
	// usage that will be (Linux siw's mpa_crc_required refuses a Reply
	// with C 0).
	NoCRC bool
	// PrivateData goes in the Request or Reply Frame (at most 512 octets,
	// 508 with Revision 2).
	PrivateData []byte
	// ClientServer selects RFC 6581's client-server model instead of
	// peer-to-peer: no RTR indication; the initiator's ULP must send
	// first, since the responder sends nothing before it has received an
	// FPDU (RFC 5044 §7.1.2 rule 4). Revision 1 is always client-server.
	ClientServer bool
	// RTR lists the RTR indications an initiator offers in the
	// peer-to-peer model, in the order it prefers them (RFC 6581 §9.2);
	// default write, read, send. A responder takes a zero-length RDMA
	// Write or Read whatever this says.
	RTR []ddp.RTR
	// HandshakeTimeout bounds the startup on both sides, from the TCP
	// connection to the first FPDU (RFC 5044 §7.1.2 rule 10). Default
	// 10 s.
	HandshakeTimeout time.Duration
	// PartialFPDUTimeout bounds how long an FPDU may take to arrive whole
	// once its first octet is in: a peer that announces a long ULPDU and
	// stops sending is cut off then. Time between FPDUs is never bounded.
	// Default 30 s; negative turns it off.
	PartialFPDUTimeout time.Duration
	// TerminateTimeout bounds the last writes once the stream has stopped
	// (the Terminate, what was queued before it) and the graceful close
	// after them, so that a peer that stops reading cannot hold the
	// connection. Default 5 s.
	TerminateTimeout time.Duration
	// FirstFPDUDelay makes an initiator wait this long after the Reply
	// Frame before it sends its first FPDU. It exists for one quirk:
	// Linux siw's responder sends its Reply before it listens to the
	// socket for FPDUs, and an FPDU that arrives in between is not read
	// until more data comes (docs/transports.md). 0, the default, sends
	// at once.
	FirstFPDUDelay time.Duration
	// MaxStartups bounds a Listener's connections in their startup: as
	// many run at once, as many more wait parked, shared among peers as
	// Listener says; MaxPerPeer the connections of one peer (an IPv4
	// address or an IPv6 /64, where one host may hold every address), from
	// the TCP connection until its Conn closes; Backlog the Requests
	// waiting for Accept. Defaults DefaultMaxStartups, DefaultMaxPerPeer,
	// DefaultBacklog. Refused, if set, hears of every connection a
	// Listener refused and why (ErrPeerLimit, ErrStartupEvicted,
	// ErrStartupTimeout, ErrBacklog), before the peer is closed or
	// rejected.
	MaxStartups int
	MaxPerPeer  int
	Backlog     int
	Refused     func(remote net.Addr, why error)
	// TLS, if set, runs MPA inside TLS over the TCP connection: a client
	// config for Dial, a server config for Listen. RFC 5042 §5.4.2 finds
	// TLS inappropriate for an RNIC (it is not a datagram protection); in
	// this software stack it protects the stream as IPsec would,
	// docs/security.md says how far.
	TLS *tls.Config
	// Trace, if set, is called for each connection once its TCP (and
	// TLS) connection is up, before the first octet of the MPA startup,
	// with the connection's addresses. The Tracer it returns (nil for
	// none) receives a copy of every octet of that connection's MPA
	// stream in each direction, after TLS decryption, and is told when
	// the connection closes: for recording sessions as a capture, each
	// connection apart, on a Listener as on Dial.
	Trace func(local, remote net.Addr) Tracer
}

// A Tracer receives the MPA stream of one connection (Config.Trace).
// Octets is called with the octets handed to the connection to send
// (fromLocal), before they leave, and with those received, from the
// goroutines that send and receive, so the two directions may overlap; b
// is valid only during the call. Close is called once, when the
// connection closes.
type Tracer interface {
	Octets(fromLocal bool, b []byte)
	Close()
}

// TraceFunc is a Tracer of a function, for a connection whose end
// needs no word: TraceFunc(f) traces one connection to f.
type TraceFunc func(fromLocal bool, b []byte)

// Octets calls f.
func (f TraceFunc) Octets(fromLocal bool, b []byte) { f(fromLocal, b) }

// Close does nothing.
func (TraceFunc) Close() {}

func (c *Config) revision() int {
	if c.Revision == 1 {
		return 1
	}
	return 2
}

func (c *Config) handshakeTimeout() time.Duration {
	if c.HandshakeTimeout <= 0 {
		return 10 * time.Second
	}
	return c.HandshakeTimeout
}

func (c *Config) partialTimeout() time.Duration {
	switch {
	case c.PartialFPDUTimeout < 0:
		return 0
	case c.PartialFPDUTimeout == 0:
		return 30 * time.Second
	}
	return c.PartialFPDUTimeout
}

func (c *Config) terminateTimeout() time.Duration {
	if c.TerminateTimeout <= 0 {
		return 5 * time.Second
	}
	return c.TerminateTimeout
}

func (c *Config) rtrs() []ddp.RTR {
	if c.revision() < 2 || c.ClientServer {
		return nil
	}
	if len(c.RTR) == 0 {
		return []ddp.RTR{ddp.RTRWrite, ddp.RTRRead, ddp.RTRSend}
	}
	return c.RTR
}

// responderRTRs are the RTR indications a Responder takes: both are
// ordinary RDMAP messages to its queue pair (a zero-length Send would
// take a receive buffer of the application's).
var responderRTRs = []ddp.RTR{ddp.RTRWrite, ddp.RTRRead}

// Negotiated is what the startup frames settled.
type Negotiated struct {
	Revision   int
	CRC        bool
	MarkersTx  bool // Markers in the FPDUs this end sends
	MarkersRx  bool // Markers in the FPDUs this end receives
	PeerToPeer bool // RFC 6581's peer-to-peer model
	// RTR is the RTR indication this end sent as the initiator
	// (RTRNone in client-server, and on the responder, where the
	// initiator chooses among the flags of LocalIRDORD and its
	// indication arrives as an ordinary message).
	RTR      ddp.RTR
	PeerData []byte // the peer's Private Data (after any enhanced data)
	// PeerIRDORD and LocalIRDORD are the enhanced data each end sent
	// (revision 2): "The responder and initiator MUST pass the peer's
	// provided IRD and ORD values to the ULP" (RFC 6581 §9.1). The
	// endpoint's ReadLimits give the values in use.
	PeerIRDORD  *ddp.EnhancedData
	LocalIRDORD *ddp.EnhancedData
}

// Conn is an MPA connection in Full Operation carrying one RDMAP stream:
// the ddp.LLP of its endpoint (a queue pair), and the reader that feeds
// the endpoint's DDP stream. Its receive goroutine reads each FPDU
// whole, verifies it and hands its DDP segment to the stream; the
// endpoint's send goroutine writes through WriteSegment and Flush.
type Conn struct {
	nc  net.Conn
	ep  ddp.Endpoint
	cfg *Config
	w   *Writer
	r   *Reader
	neg Negotiated

	// Rule 4 of RFC 5044 §7.1.2: "MPA Responder mode implementations MUST
	// receive and validate at least one FPDU before sending any FPDUs or
	// Markers." firstRx is closed when the first FPDU has been validated.
	firstRx   chan struct{}
	firstOnce sync.Once
	// delay is the initiator's FirstFPDUDelay, until its first write.
	delay     time.Duration
	responder bool

	// The send side: the Writer, used under wmu (WriteSegment and Flush
	// by the one sending goroutine, WriteNow, and writeLoop, which
	// finishes what WriteNow's write left when left signals); tryNow
	// makes WriteNow's write (nil where it cannot: writev_other.go, TLS,
	// a traced connection).
	wmu    sync.Mutex
	tryNow func([][]byte) (int, error)
	left   chan struct{} // 1-buffered
	// mulpdu is what MULPDU reports: RFC 5044 §4.5's MULPDU for the EMSS
	// the TCP connection reported last (tcp; nil over TLS, where the
	// Options' value stays). The send side looks again every emssEvery
	// octets (emssAt, under wmu): "If the TCP implementation needs to
	// adjust EMSS to support MTU changes or changing TCP options, the
	// MULPDU value is changed accordingly."
	mulpdu atomic.Int32
	tcp    *net.TCPConn
	emssAt uint64

	// The receive side (poll.go): the holder of tok owns the Reader and
	// seq.
	tok     receiveToken
	seq     uint32      // the sequence number of the next segment on the stream
	rxEnded atomic.Bool // the receive side has ended: nobody reads any more

	onClose    func() // the Listener's count of the peer's connections
	closeOnce  sync.Once
	closed     chan struct{}
	rxDone     chan struct{} // the receive goroutine has ended
	firstTimer *time.Timer   // awaitFirst's
	wg         sync.WaitGroup
	mu         sync.Mutex // guards err
	err        error
}

// Negotiated returns what the startup settled.
func (c *Conn) Negotiated() Negotiated { return c.neg }

// RemoteAddr and LocalAddr return the TCP addresses.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }
func (c *Conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }

// MULPDU implements ddp.LLP: the MULPDU of the EMSS the TCP connection
// reported last (RFC 5044 §4.5), looked at again every emssEvery octets
// sent. Linux, for one, starts a connection with an MSS bounded by half
// the peer's first window and raises it as the window opens: on loopback
// from 32741 octets to 65483 within the first MiB.
func (c *Conn) MULPDU() int { return int(c.mulpdu.Load()) }

// emssEvery is how many octets a Conn sends between two looks at the
// EMSS: a system call per MiB.
const emssEvery = 1 << 20

// checkEMSS sets the MULPDU from the connection's EMSS. The caller holds
// wmu. The Writer keeps accepting the largest ULPDU ever reported, so
// that a segment DDP sized before the EMSS shrank still goes out.
func (c *Conn) checkEMSS() {
	c.emssAt = c.w.Offset()
	emss, err := EMSS(c.tcp)
	if err != nil {
		return
	}
	m := MULPDU(emss, c.w.opts.Markers)
	c.mulpdu.Store(int32(m))
	c.w.accept(m)
}

// WriteSegment implements ddp.LLP: the segment becomes an FPDU in the
// Writer's gather list, and leaves with the others at Flush (or when the
// list is full). A Responder waits here until it has received its first
// FPDU (RFC 5044 §7.1.2 rule 4).
func (c *Conn) WriteSegment(hdr []byte, payload [][]byte) error {
	select {
	case <-c.firstRx:
	case <-c.closed:
		return ddp.Lost(net.ErrClosed)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.delay > 0 {
		time.Sleep(c.delay)
		c.delay = 0
	}
	if err := c.w.Queue(hdr, payload); err != nil {
		return err
	}
	if c.tcp != nil && c.w.Offset()-c.emssAt >= emssEvery {
		c.checkEMSS()
	}
	if c.neg.MarkersTx {
		// With Markers every FPDU is written on its own, so that each
		// starts a TCP segment as RFC 5044 §5.1 and Wireshark's Marker
		// decoding expect.
		return c.w.Flush()
	}
	return nil
}

// Flush implements ddp.LLP: one gather write of what WriteSegment queued.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Flush()
}

// Err returns why the connection ended, if it ended by itself.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection gracefully: a FIN after what was written,
// then, once the peer has closed its side too (or the TerminateTimeout
// has passed), the socket. Close implements io.Closer for the queue pair.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		// A waiter reading the socket stops (Poll), and the receive
		// goroutine reads on until the peer's FIN.
		c.tok.kickIfDone(c.nc, true)
		if c.firstTimer != nil {
			c.firstTimer.Stop()
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.cfg.terminateTimeout()))
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			// Reading on until the peer's FIN keeps the kernel from
			// answering the peer's last octets with a reset, which could
			// discard what was written last (a Terminate) before the peer
			// read it.
			t := time.NewTimer(c.cfg.terminateTimeout())
			select {
			case <-c.rxDone:
			case <-t.C:
			}
			t.Stop()
		}
		c.nc.Close()
		if c.onClose != nil {
			c.onClose()
		}
	})
	c.wg.Wait()
	return nil
}

func newConn(nc net.Conn, ep ddp.Endpoint, cfg *Config, neg Negotiated, tx, rx Options, responder bool) *Conn {
	c := &Conn{nc: nc, ep: ep, cfg: cfg, neg: neg, firstRx: make(chan struct{}), closed: make(chan struct{}), rxDone: make(chan struct{}), left: make(chan struct{}, 1)}
	c.tok.init()
	c.w = NewWriter(nc, tx)
	c.mulpdu.Store(int32(c.w.MULPDU()))
	c.tcp = tcpConn(nc)
	c.tryNow = newTryNow(nc)
	c.r = NewReader(nc, rx)
	c.r.SetPartialTimeout(cfg.partialTimeout())
	c.r.interrupted = c.tok.kicked.Load
	c.responder = responder
	if !responder {
		c.delay = cfg.FirstFPDUDelay
		c.firstOnce.Do(func() { close(c.firstRx) })
	}
	return c
}

// run starts the endpoint on the connection and the receive goroutine.
func (c *Conn) run(rtr ddp.RTR) error {
	// Counted before the endpoint starts: from then on its Close may
	// close the connection, whose Close waits for these goroutines.
	c.wg.Add(3)
	if err := c.ep.Start(c, ddp.Start{RTR: rtr, ReceiveFirst: c.responder}); err != nil {
		c.wg.Add(-3)
		return err
	}
	go c.readLoop()
	go c.watch()
	go c.writeLoop()
	return nil
}

// watch bounds the last writes once the endpoint's stream stops, and
// closes the connection once the endpoint has nothing more to send (its
// Terminate, if any, is written): "The peer SHOULD perform a graceful LLP
// teardown to ensure the Terminate Message is successfully Delivered."
// (RFC 5040 §6.2.1)
func (c *Conn) watch() {
	defer c.wg.Done()
	select {
	case <-c.ep.Stream().Done():
		c.nc.SetWriteDeadline(time.Now().Add(c.cfg.terminateTimeout()))
	case <-c.closed:
		return
	}
	select {
	case <-c.ep.Terminated():
		go c.Close()
	case <-c.closed:
	}
}

// fail reports the end of the receive side to the endpoint: an MPA error
// (CRC, Marker, framing) is answered with a Terminate by the endpoint,
// after which the connection is closed ("For Error codes 2 and 3, MPA
// MUST NOT close the TCP connection following a reported error. Closing
// the connection is the responsibility of DDP's ULP.", RFC 5044 §8); a
// FIN between FPDUs is the peer's disconnect; anything else is the LLP
// stream's loss.
func (c *Conn) fail(ds *ddp.Stream, err error) {
	c.mu.Lock()
	switch {
	case errors.Is(c.err, errNoFirstFPDU):
		err = ddp.Lost(c.err)
	case c.isClosed():
		err = ddp.ErrDisconnected
	}
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	var te *term.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, ddp.ErrDisconnected):
		ds.Close(ddp.ErrDisconnected)
	case errors.As(err, &te):
		ds.Fail(te)
	default:
		ds.Close(ddp.Lost(err))
	}
	// The peer cannot be waiting for our first FPDU any more.
	c.firstOnce.Do(func() { close(c.firstRx) })
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// errNoFirstFPDU ends a peer-to-peer connection whose initiator sent no
// RTR indication in time.
var errNoFirstFPDU = errors.New("mpa: no FPDU (RTR indication) from the initiator within the handshake timeout")

// awaitFirst ends the connection if no FPDU has arrived within d.
func (c *Conn) awaitFirst(d time.Duration) {
	c.firstTimer = time.AfterFunc(d, func() {
		select {
		case <-c.firstRx:
		default:
			c.mu.Lock()
			if c.err == nil {
				c.err = errNoFirstFPDU
			}
			c.mu.Unlock()
			c.nc.Close()
		}
	})
}

// deadline applies ctx and the timeout d to the startup on nc, until the
// function it returns is called.
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

// traced wraps nc in a tracedConn when cfg traces connections.
func traced(cfg *Config, nc net.Conn) net.Conn {
	if cfg.Trace == nil {
		return nc
	}
	t := cfg.Trace(nc.LocalAddr(), nc.RemoteAddr())
	if t == nil {
		return nc
	}
	return &tracedConn{Conn: nc, t: t}
}

// endTrace ends nc's trace when its startup failed: the caller closes
// the connection beneath it.
func endTrace(nc net.Conn, err error) {
	if t, ok := nc.(*tracedConn); ok && err != nil {
		t.once.Do(t.t.Close)
	}
}

// tracedConn copies what crosses the connection to its Tracer.
type tracedConn struct {
	net.Conn
	t    Tracer
	once sync.Once
}

func (t *tracedConn) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		t.t.Octets(false, b[:n])
	}
	return n, err
}

// Write traces b as it is handed to the connection, before the peer can
// have answered it, so that the answer, read on another goroutine, is
// never traced first. On a failed Write the trace holds octets that did
// not leave: the connection is over then.
func (t *tracedConn) Write(b []byte) (int, error) {
	t.t.Octets(true, b)
	return t.Conn.Write(b)
}

func (t *tracedConn) Close() error {
	err := t.Conn.Close()
	t.once.Do(t.t.Close)
	return err
}

func (t *tracedConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// maxSend is the largest ULPDU to send: MULPDU from the TCP EMSS (RFC
// 5044 §4.5), or MaxMULPDU when the EMSS is unknown (TLS).
func maxSend(nc net.Conn, markers bool) int {
	if tc := tcpConn(nc); tc != nil {
		if emss, err := EMSS(tc); err == nil {
			return MULPDU(emss, markers)
		}
	}
	return MULPDU(MaxULPDU, markers)
}

// tcpConn returns the TCP connection whose EMSS bounds nc's FPDUs: nc
// itself, or what a tracedConn wraps; nil over TLS.
func tcpConn(nc net.Conn) *net.TCPConn {
	if t, ok := nc.(*tracedConn); ok {
		nc = t.Conn
	}
	tc, _ := nc.(*net.TCPConn)
	return tc
}
