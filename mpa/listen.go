package mpa

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/netpeer"
	"github.com/iwarpgo/iwarp/term"
)

// The defaults of a Listener's limits (Config): they hold on a small
// machine, and a Go program that serves more raises them.
const (
	DefaultMaxStartups = 256
	DefaultMaxPerPeer  = 64
	DefaultBacklog     = 64
)

// Why a Listener refused a connection (Config.Refused).
var (
	// ErrPeerLimit: the peer's address already has MaxPerPeer connections
	// here (starting up, running or parked, waiting for Accept, or
	// accepted and open). The TCP connection is closed before anything is
	// read from it.
	ErrPeerLimit = errors.New("mpa: the peer's connection limit is reached")
	// ErrStartupEvicted: the connection was closed before its MPA Request
	// was read, to share the places for startups among peers (Listener
	// says how): it made room for a peer with fewer startups, or it came
	// when every place was taken and its peer held the most of them.
	ErrStartupEvicted = errors.New("mpa: the startup was closed to make room for other peers'")
	// ErrStartupTimeout: the connection waited, parked, for a place to
	// run its startup until its handshake time ran out; it is closed
	// unread. (A startup that ran, and whose Request did not come in
	// time, is closed unreported, as one with an invalid Request is.)
	ErrStartupTimeout = errors.New("mpa: no place for the startup before the handshake timeout")
	// ErrBacklog: the Request waited for a place in Accept's queue, or
	// for Accept, until its handshake time ran out; it was rejected
	// (an MPA Reply with the R bit) then, whether or not Accept was
	// being called.
	ErrBacklog = errors.New("mpa: the application did not accept in time")
)

func (c *Config) maxStartups() int { return positive(c.MaxStartups, DefaultMaxStartups) }
func (c *Config) maxPerPeer() int  { return positive(c.MaxPerPeer, DefaultMaxPerPeer) }
func (c *Config) backlog() int     { return positive(c.Backlog, DefaultBacklog) }

func positive(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// Listener accepts MPA connections as the Responder. It takes each TCP
// connection at once, and bounds what peers can make it hold (Config):
//
//   - Connections in their startup, before their MPA Request is read: at
//     most MaxStartups run (a goroutine reads the Request), and at most
//     MaxStartups more are parked (only the connection is held, nothing
//     is read) until a place to run is free. A free place goes to the
//     parked connection whose peer runs the fewest (the oldest on a tie),
//     with the time it has left. When all places run, a newcomer takes
//     the place of the oldest running startup of the peer that runs the
//     most, if that peer runs two more than the newcomer's; otherwise it
//     is parked. When all parked places are taken too, it takes the place
//     of the newest parked connection of the peer with the most parked,
//     if that peer has more than the newcomer's; otherwise the newcomer is
//     closed. Those closed are reported (ErrStartupEvicted), as a parked
//     connection whose handshake time runs out is (ErrStartupTimeout). So
//     peers holding silent connections at their limits cannot keep
//     another peer out: a newcomer from a peer with none running waits
//     only while MaxStartups peers run one each. Only when every startup
//     is one peer's is its newcomer parked beyond the bound, and the
//     Listener takes no more connections until one leaves: a burst from
//     one peer waits in the kernel's accept queue instead of being closed.
//   - The connections of one peer (an IPv4 address or an IPv6 /64):
//     MaxPerPeer, from the TCP connection (running or parked) until its
//     Conn closes; further ones are closed at once (ErrPeerLimit).
//   - The Requests waiting for Accept: Backlog in its queue, any more
//     waiting for a place in it.
//   - The time each step may take: HandshakeTimeout, from the TCP
//     connection to the Request (parked or running), from the Request to
//     Accept, and from the Reply to the initiator's RTR. A Request that
//     Accept has not taken when its time runs out is rejected then, by a
//     timer of its own (ErrBacklog), so that it holds neither its TCP
//     connection nor a place in its peer's count after its initiator has
//     given up.
//
// So the connections it holds before Accept are at most 2 × MaxStartups
// + 1 in their startup, each for at most a handshake timeout, and the
// Requests waiting for Accept, each for at most one more; then the open
// Conns, MaxPerPeer per peer. An error
// of the listening socket's Accept (too many open files, say) does not
// stop the Listener: it tries again after a pause, as net/http's Server
// does, until Close. Close closes the parked connections and ends the
// running startups.
type Listener struct {
	ln      net.Listener
	cfg     Config
	pending chan *Request
	room    chan struct{} // a token when a parked startup leaves, for loop
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	mu       sync.Mutex // guards peers, startups and closed
	peers    map[netip.Addr]int
	startups startups
	closed   bool
}

// Listen listens for TCP connections on addr and runs the Responder's
// side of the startup on each: it waits, with a timeout, for a valid MPA
// Request Frame (RFC 5044 §7.1.2 rules 2, 8, 10), and hands the request to
// Accept. A connection whose Request is improperly formatted is closed. A
// nil cfg means the defaults. ctx bounds only the creation of the
// listening socket; Close stops the Listener.
func Listen(ctx context.Context, network, addr string, cfg *Config) (*Listener, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{ln: ln, cfg: *cfg, pending: make(chan *Request, cfg.backlog()),
		room: make(chan struct{}, 1), done: make(chan struct{}), peers: make(map[netip.Addr]int),
		startups: newStartups(cfg.maxStartups(), cfg.maxStartups())}
	l.wg.Add(1)
	go l.loop()
	return l, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening and closes the connections in their startup;
// connections already accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.ln.Close()
	})
	l.mu.Lock()
	l.closed = true
	parked := l.startups.takeParked()
	for _, s := range parked {
		s.timer.Stop()
		l.dropPeer(s.peer)
	}
	l.mu.Unlock()
	for _, s := range parked {
		s.nc.Close()
	}
	l.wg.Wait()
	for {
		select {
		case r := <-l.pending:
			r.expiry.Stop()
			r.Reject(nil, 0, 0)
		default:
			return nil
		}
	}
}

// The pauses after a failed Accept of the listening socket: from the
// first to the longest, doubling (net/http's Server.Serve's).
const (
	acceptRetryFirst = 5 * time.Millisecond
	acceptRetryMax   = time.Second
)

func (l *Listener) loop() {
	defer l.wg.Done()
	var pause time.Duration
	for {
		if !l.waitForRoom() {
			return
		}
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				// Only Close closes the socket; should anything else, Accept
				// must not wait for ever.
				l.once.Do(func() { close(l.done) })
				return
			}
			// Too many open files (EMFILE, ENFILE), no buffers, a
			// connection aborted before it was taken: the condition
			// passes, and the connection waits in the kernel's queue.
			pause = min(max(2*pause, acceptRetryFirst), acceptRetryMax)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		pause = 0
		l.admit(nc)
	}
}

// waitForRoom waits while more startups are parked than MaxStartups (a
// burst from one peer); false once the Listener is closed.
func (l *Listener) waitForRoom() bool {
	for {
		l.mu.Lock()
		over := l.startups.over()
		l.mu.Unlock()
		if !over {
			return true
		}
		select {
		case <-l.room:
		case <-l.done:
			return false
		}
	}
}

// admit counts nc, just accepted, against its peer's MaxPerPeer and gives
// it to the startups: it runs, or it is parked until its deadline, and it
// may make another leave, or leave itself.
func (l *Listener) admit(nc net.Conn) {
	s := &startup{peer: netpeer.OfAddr(nc.RemoteAddr()), nc: nc, deadline: time.Now().Add(l.cfg.handshakeTimeout())}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		nc.Close()
		return
	}
	if l.peers[s.peer] >= l.cfg.maxPerPeer() {
		l.mu.Unlock()
		l.refused(nc.RemoteAddr(), ErrPeerLimit)
		nc.Close()
		return
	}
	l.peers[s.peer]++
	out := l.startups.add(s)
	switch {
	case s.running:
		l.run(s)
	case s != out:
		s.timer = time.AfterFunc(time.Until(s.deadline), func() { l.expireParked(s) })
	}
	if out != nil {
		if out.timer != nil {
			out.timer.Stop()
		}
		l.dropPeer(out.peer)
	}
	l.mu.Unlock()
	if out != nil {
		l.refused(out.nc.RemoteAddr(), ErrStartupEvicted)
		out.nc.Close()
	}
}

// run starts s's goroutine, which reads its Request; l.mu is held.
func (l *Listener) run(s *startup) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		r, err := l.startup(s)
		if err != nil {
			s.nc.Close()
		}
		l.mu.Lock()
		mine := l.startups.finish(s) // false if evicted: closed and released then
		if mine && err != nil {
			l.dropPeer(s.peer)
		}
		late := l.fill()
		l.mu.Unlock()
		l.closeLate(late)
		if !mine || err != nil {
			return
		}
		// The Request is rejected when its time runs out, whether it
		// waits for a place in the queue or in it (Accept skips it
		// there).
		r.gone = make(chan struct{})
		r.expiry = time.AfterFunc(time.Until(r.deadline), func() { l.expire(r) })
		select {
		case l.pending <- r:
		case <-r.gone:
		case <-l.done:
			r.expiry.Stop()
			r.Reject(nil, 0, 0)
		}
	}()
}

// fill runs parked startups in the free places; l.mu is held. Those whose
// time ran out before their turn it returns instead, for closeLate.
func (l *Listener) fill() (late []*startup) {
	for s := l.startups.next(); s != nil; s = l.startups.next() {
		s.timer.Stop()
		if time.Now().Before(s.deadline) {
			l.run(s)
			continue
		}
		l.startups.finish(s)
		l.dropPeer(s.peer)
		late = append(late, s)
	}
	l.signalRoom()
	return late
}

// expireParked closes s, whose handshake time ran out while it was
// parked, unless it has left the parked ones.
func (l *Listener) expireParked(s *startup) {
	l.mu.Lock()
	parked := l.startups.unpark(s)
	if parked {
		l.dropPeer(s.peer)
	}
	l.mu.Unlock()
	if parked {
		l.signalRoom()
		l.closeLate([]*startup{s})
	}
}

func (l *Listener) closeLate(late []*startup) {
	for _, s := range late {
		l.refused(s.nc.RemoteAddr(), ErrStartupTimeout)
		s.nc.Close()
	}
}

func (l *Listener) signalRoom() {
	select {
	case l.room <- struct{}{}:
	default:
	}
}

// expire rejects r, which its handshake time ran out on before Accept
// took it, and reports it; unless it was decided already.
func (l *Listener) expire(r *Request) {
	defer close(r.gone)
	r.once.Do(func() {
		defer r.done()
		l.refused(r.RemoteAddr(), ErrBacklog)
		r.reject(nil, 0, 0)
		r.nc.Close()
	})
}

// dropPeer gives back a place in p's MaxPerPeer; l.mu is held.
func (l *Listener) dropPeer(p netip.Addr) {
	if l.peers[p]--; l.peers[p] <= 0 {
		delete(l.peers, p)
	}
}

func (l *Listener) refused(a net.Addr, why error) {
	if l.cfg.Refused != nil {
		l.cfg.Refused(a, why)
	}
}

func (l *Listener) startup(s *startup) (_ *Request, err error) {
	nc := s.nc
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	done := deadline(ctx, nc, time.Until(s.deadline))
	defer done()
	if l.cfg.TLS != nil {
		tc, err := startTLS(ctx, nc, l.cfg.TLS, true)
		if err != nil {
			return nil, err
		}
		nc = tc
	}
	nc = traced(&l.cfg, nc)
	defer func() { endTrace(nc, err) }()
	req, err := ReadFrame(nc)
	if err != nil {
		return nil, err
	}
	if req.Reply {
		return nil, invalidFrame("an MPA Reply Frame where a Request was due: both ends started as Responder")
	}
	r := newRequest(&l.cfg, nc, req, s.deadline.Add(l.cfg.handshakeTimeout()))
	r.release = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.dropPeer(s.peer)
	}
	return r, nil
}

func newRequest(cfg *Config, nc net.Conn, req Frame, deadline time.Time) *Request {
	r := &Request{cfg: cfg, nc: nc, req: req, Revision: int(req.Rev), deadline: deadline}
	e, ulp, ok := req.Enhancement()
	r.PrivateData = append([]byte(nil), ulp...)
	if ok {
		r.Enhanced = &e
	}
	return r
}

// Server runs the Responder's startup on nc, a connection the caller
// accepted itself (a WebSocket's, one from a listener of its own): it
// reads and validates the MPA Request Frame within the handshake timeout
// and returns it for the caller to Accept or Reject, as Listener.Accept
// does. On an error the caller closes nc.
func Server(ctx context.Context, nc net.Conn, cfg *Config) (_ *Request, err error) {
	if cfg == nil {
		cfg = &Config{}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.handshakeTimeout())
	defer cancel()
	done := deadline(ctx, nc, cfg.handshakeTimeout())
	defer done()
	nc = traced(cfg, nc)
	defer func() { endTrace(nc, err) }()
	req, err := ReadFrame(nc)
	if err != nil {
		return nil, err
	}
	if req.Reply {
		return nil, invalidFrame("an MPA Reply Frame where a Request was due: both ends started as Responder")
	}
	return newRequest(cfg, nc, req, time.Now().Add(cfg.handshakeTimeout())), nil
}

func (r *Request) done() {
	if r.release != nil {
		r.release()
	}
}

// Accept returns the next connection whose MPA Request is valid, for the
// ULP to accept or reject, by the Request's Deadline. A Request that
// waited longer than the handshake timeout has been rejected and is
// skipped: its initiator has given up.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	for {
		select {
		case r := <-l.pending:
			if !r.expiry.Stop() {
				continue // rejected when its time ran out
			}
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
}

// Request is a received MPA Request Frame waiting for the ULP.
type Request struct {
	cfg      *Config
	release  func() // the Listener's count of the peer's connections; nil without one
	nc       net.Conn
	req      Frame
	deadline time.Time     // when the initiator is taken to have given up
	expiry   *time.Timer   // a Listener's: rejects the Request if Accept does not take it by deadline
	gone     chan struct{} // closed once expiry has run

	Revision    int
	PrivateData []byte            // the initiator's Private Data (after any enhanced data)
	Enhanced    *ddp.EnhancedData // the initiator's IRD/ORD and RTR flags (RFC 6581)

	once sync.Once
}

// RemoteAddr returns the initiator's address.
func (r *Request) RemoteAddr() net.Addr { return r.nc.RemoteAddr() }

// Deadline returns when the initiator is taken to have given up waiting
// for the Reply: two handshake timeouts from a Listener's TCP connection
// (one for the Request to come, one for the ULP), one from Server's
// return. Whoever holds the Request until then rejects it.
func (r *Request) Deadline() time.Time { return r.deadline }

var errDecided = errors.New("mpa: the request was already accepted or rejected")

// Accept sends the MPA Reply Frame with the listener's settings and
// privateData and starts ep on the connection. IRD and ORD are negotiated
// as RFC 6581 §9.1 says.
func (r *Request) Accept(ep ddp.Endpoint, privateData []byte) (*Conn, error) {
	err := errDecided
	var c *Conn
	r.once.Do(func() {
		c, err = r.accept(ep, privateData)
		if err != nil {
			r.nc.Close()
			r.done()
		}
	})
	return c, err
}

func (r *Request) accept(ep ddp.Endpoint, privateData []byte) (*Conn, error) {
	cfg := r.cfg
	rep := Frame{Reply: true, Markers: cfg.Markers, CRC: !cfg.NoCRC || r.req.CRC, Rev: r.req.Rev, PrivateData: privateData}
	var neg Negotiated
	var fail *term.Error
	if offer := r.Enhanced; offer != nil {
		// "If the responder receives an enhanced MPA message, it MUST
		// respond with an enhanced MPA message." (RFC 6581 §10)
		ird, ord := ep.ReadLimits()
		mine, newORD := ddp.Answer(*offer, ird, ord, responderRTRs)
		if newORD != ord {
			if err := ep.SetORD(newORD); err != nil {
				fail = localError("lowering the ORD to the initiator's IRD %d: %v", newORD, err)
			}
		}
		rep.Enhanced = true
		rep.PrivateData = append(mine.Append(nil), privateData...)
		neg.PeerIRDORD, neg.LocalIRDORD = offer, &mine
		neg.PeerToPeer = mine.PeerToPeer
	}
	if err := rep.Validate(); err != nil {
		return nil, err
	}
	done := deadline(context.Background(), r.nc, cfg.handshakeTimeout())
	_, err := r.nc.Write(rep.Append(nil))
	done()
	if err != nil {
		return nil, err
	}
	fromInit, fromResp := Negotiate(&r.req, &rep)
	neg.Revision, neg.CRC = int(rep.Rev), fromInit.CRC
	neg.MarkersTx, neg.MarkersRx = fromResp.Markers, fromInit.Markers
	neg.PeerData = r.PrivateData
	fromResp.MaxULPDU = maxSend(r.nc, fromResp.Markers)
	c := newConn(r.nc, ep, cfg, neg, fromResp, fromInit, true)
	c.onClose = r.done
	if neg.PeerToPeer {
		// The startup ends with the initiator's RTR indication (RFC 6581
		// §9.3): one that does not come in time ends the connection, as a
		// Request that does not come does (rule 10).
		c.awaitFirst(cfg.handshakeTimeout())
	}
	if err := c.run(ddp.RTRNone); err != nil {
		if c.firstTimer != nil {
			c.firstTimer.Stop()
		}
		return nil, err
	}
	if fail != nil {
		// The Terminate goes once the initiator's first FPDU has come
		// (rule 6), within the startup's timeout.
		c.onClose = nil // Accept releases the Request
		ep.Stream().Fail(fail)
		t := time.NewTimer(cfg.handshakeTimeout())
		select {
		case <-ep.Terminated():
		case <-c.closed:
		case <-t.C:
		}
		t.Stop()
		c.Close()
		return nil, fail
	}
	return c, nil
}

// localError is RFC 6581 §9.3's answer to a local failure in the startup:
// "The initiator or responder MUST generate the TERM message that
// contains Layer 2, Error Type 0, Error Code 5 when it encounters any
// error locally for which the special Error Code is not defined in
// Section 8 before resetting the connection."
func localError(format string, args ...any) *term.Error {
	return term.MPALocalCatastrophic.With(format, args...)
}

// Reject sends an MPA Reply Frame with the Rejected Connection bit and
// privateData, and closes the TCP connection: MPA exits there, and "The
// ULP may close TCP or use the connection for other purposes" (RFC 5044
// §7.1.2 rule 2); Reject is the first choice, RejectKeepOpen the second.
// For an enhanced Request the Reply carries this end's IRD and ORD.
func (r *Request) Reject(privateData []byte, ird, ord int) error {
	nc, err := r.RejectKeepOpen(privateData, ird, ord)
	if nc != nil {
		nc.Close()
	}
	return err
}

// RejectKeepOpen sends the Reply that Reject sends and returns the TCP
// connection, still open: "the implementation MUST exit MPA, leaving the
// TCP connection open" (RFC 5044 §7.1.2 rule 2). The caller owns it from
// then on; the Listener no longer counts it against the peer's limit. On
// an error the connection is closed and nil is returned.
func (r *Request) RejectKeepOpen(privateData []byte, ird, ord int) (net.Conn, error) {
	err := errDecided
	var nc net.Conn
	r.once.Do(func() {
		defer r.done()
		if err = r.reject(privateData, ird, ord); err != nil {
			r.nc.Close()
			return
		}
		nc = r.nc
	})
	return nc, err
}

func (r *Request) reject(privateData []byte, ird, ord int) error {
	cfg := r.cfg
	rep := Frame{Reply: true, Reject: true, Markers: cfg.Markers, CRC: !cfg.NoCRC || r.req.CRC, Rev: r.req.Rev, PrivateData: privateData}
	if r.Enhanced != nil {
		e, _ := ddp.Answer(*r.Enhanced, ird, ord, responderRTRs)
		rep.Enhanced = true
		rep.PrivateData = append(e.Append(nil), privateData...)
	}
	if err := rep.Validate(); err != nil {
		return err
	}
	done := deadline(context.Background(), r.nc, cfg.handshakeTimeout())
	defer done()
	_, err := r.nc.Write(rep.Append(nil))
	return err
}
