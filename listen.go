//go:build !js

package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// Listener hands out the connection requests that arrive at its address,
// of either transport. Its limits are the transport's (mpa.Config's and
// sctpddp.Config's MaxPerPeer and the like, their Refused callbacks).
type Listener struct {
	url      string
	addr     net.Addr
	requests chan *Request
	done     chan struct{}
	closeFn  func()
	once     sync.Once
	wg       sync.WaitGroup
	cfg      *Config
}

// Request is a connection request: the peer's private data, for the
// application to Accept (with a queue pair) or Reject.
type Request struct {
	l         *Listener
	transport string
	remote    net.Addr
	local     net.Addr
	peerData  []byte
	enhanced  *ddp.EnhancedData
	accept    func(qp *rdmap.QueuePair, pd []byte) (*Conn, error)
	reject    func(pd []byte) error
	refuse    func() // refuses the request without the application's decision
	expired   func() // reports a request whose time ran out before Accept (the transport's Refused)
	deadline  time.Time
	once      sync.Once
}

// Transport returns "tcp" or "sctp".
func (r *Request) Transport() string { return r.transport }

// RemoteAddr returns the peer's address.
func (r *Request) RemoteAddr() net.Addr { return r.remote }

// PrivateData returns the private data the peer sent.
func (r *Request) PrivateData() []byte { return r.peerData }

// PeerReadLimits returns the IRD and ORD the peer offered (RFC 6581), and
// false when it offered none.
func (r *Request) PeerReadLimits() (ird, ord int, ok bool) {
	if r.enhanced == nil {
		return 0, 0, false
	}
	return int(r.enhanced.IRD), int(r.enhanced.ORD), true
}

// ErrDecided: Accept or Reject of a request already accepted, rejected,
// or refused when its time ran out or its Listener closed.
var ErrDecided = errors.New("iwarp: the request was already accepted, rejected or refused")

// Accept starts qp on the connection, sending privateData (at most
// MaxPrivateData octets, often an rdmap.RemoteBuffer: see the package
// documentation) with the reply, and returns once the stream runs. If ctx
// is done already, the request is refused as when its time runs out and
// Accept returns ctx's error; if ctx ends while the reply is being sent,
// qp is closed, which ends the set-up, and Accept returns ctx's error.
func (r *Request) Accept(ctx context.Context, qp *rdmap.QueuePair, privateData []byte) (*Conn, error) {
	if err := checkPrivateData(privateData); err != nil {
		return nil, err
	}
	if err := checkIdle(qp); err != nil {
		return nil, err
	}
	err := ErrDecided
	var c *Conn
	r.once.Do(func() {
		if err = ctx.Err(); err != nil {
			r.refuse()
			return
		}
		// A set-up that waits on the peer (RFC 6581's RTR) ends when
		// its queue pair closes.
		closed := make(chan struct{})
		stop := context.AfterFunc(ctx, func() { qp.Close(ctx); close(closed) })
		c, err = r.accept(qp, privateData)
		if !stop() {
			<-closed
			if err == nil {
				c.Close()
			}
			c, err = nil, tag(err, fmt.Sprintf("iwarp: accepting %v: %v", r.remote, ctx.Err()), ctx.Err())
			return
		}
		if err != nil {
			err = tag(err, fmt.Sprintf("iwarp: accepting %v: %v", r.remote, err), ErrHandshake)
			return
		}
		r.l.cfg.event(Event{Type: Established, URL: r.l.url, Conn: c})
		c.watch()
	})
	return c, err
}

// Reject refuses the connection with privateData (MPA's Reply with the R
// bit, DDP over SCTP's Reject).
func (r *Request) Reject(privateData []byte) error {
	err := ErrDecided
	r.once.Do(func() { err = r.reject(privateData) })
	return err
}

// Listen listens at url (tcp://host:port, sctp://host:port; port 0 picks
// one) until Close. Its failures wrap ErrBadAddress, ErrConfig (over
// sctp://, Config.SCTP must say how the peers authenticate), or are the
// operating system's (an address in use: syscall.EADDRINUSE).
func Listen(ctx context.Context, url string, cfg *Config) (*Listener, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	scheme, addr, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &Listener{requests: make(chan *Request), done: make(chan struct{}), cfg: cfg}
	if scheme == "tcp" {
		err = l.listenTCP(ctx, addr)
	} else {
		err = l.listenSCTP(ctx, addr)
	}
	if errors.Is(err, ErrConfig) {
		return nil, err
	}
	if errors.Is(err, sctpddp.ErrConfig) {
		return nil, tag(err, fmt.Sprintf("iwarp: %s: %v", url, err), ErrConfig)
	}
	if err != nil {
		return nil, tag(err, fmt.Sprintf("iwarp: cannot listen on %s: %v", url, err))
	}
	l.url = scheme + "://" + l.addr.String()
	return l, nil
}

// Addr returns the address the Listener is bound to; URL the same as an
// address to dial.
func (l *Listener) Addr() net.Addr { return l.addr }
func (l *Listener) URL() string    { return l.url }

// Accept returns the next connection request. A request waits for it only
// as long as its transport lets it wait for the application (mpa.Config's
// HandshakeTimeout, sctpddp.Config's AcceptTimeout): then it is refused as
// the transport refuses it (an MPA Reply with the Reject bit, a DDP Stream
// Session Terminate) and reported to the transport's Refused
// (mpa.ErrBacklog, sctpddp.ErrAcceptTimeout). After Close it returns
// ErrClosed; when ctx ends first, ctx's error.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	select {
	case r := <-l.requests:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, tag(nil, "iwarp: the Listener is closed", ErrClosed)
	}
}

// Close stops listening and refuses the requests not yet accepted: an
// MPA Reply with the Reject bit, a DDP Stream Session Terminate over SCTP.
// Connections already accepted stay open until they are closed.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.closeFn()
	})
	l.wg.Wait()
	return nil
}

// offer hands r to Accept by r.deadline, or refuses it then, or when the
// Listener closes; it returns false when the Listener has closed.
func (l *Listener) offer(r *Request) bool {
	expire := func() {
		r.once.Do(func() {
			r.expired()
			r.refuse()
		})
	}
	wait := time.Until(r.deadline)
	if wait <= 0 {
		expire()
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.requests <- r:
		return true
	case <-t.C:
		expire()
		return true
	case <-l.done:
		r.once.Do(r.refuse)
		return false
	}
}

func (l *Listener) listenTCP(ctx context.Context, addr string) error {
	mc := mpa.Config{}
	if l.cfg.MPA != nil {
		mc = *l.cfg.MPA
	}
	mc.PrivateData = nil
	ml, err := mpa.Listen(ctx, "tcp", addr, &mc)
	if err != nil {
		return err
	}
	l.addr = ml.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	l.closeFn = func() { cancel(); ml.Close() }
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			mr, err := ml.Accept(ctx)
			if err != nil {
				return
			}
			r := &Request{l: l, transport: "tcp", remote: mr.RemoteAddr(), peerData: mr.PrivateData, enhanced: mr.Enhanced,
				deadline: mr.Deadline()}
			r.accept = func(qp *rdmap.QueuePair, pd []byte) (*Conn, error) {
				m, err := mr.Accept(qp, pd)
				if err != nil {
					return nil, err
				}
				return &Conn{qp: qp, url: l.url, transport: "tcp", mpa: m, local: m.LocalAddr(), remote: m.RemoteAddr(), peerData: mr.PrivateData, cfg: l.cfg}, nil
			}
			r.reject = func(pd []byte) error { return mr.Reject(pd, 0, 0) }
			r.refuse = func() { r.reject(nil) }
			r.expired = func() {
				if mc.Refused != nil {
					mc.Refused(r.remote, mpa.ErrBacklog)
				}
			}
			if !l.offer(r) {
				return
			}
		}
	}()
	return nil
}

func (l *Listener) listenSCTP(ctx context.Context, addr string) error {
	if l.cfg.SCTP == nil {
		return tag(sctpddp.ErrNoPeerAuthentication, fmt.Sprintf("iwarp: sctp://%s: Config.SCTP is nil: %v", addr, sctpddp.ErrNoPeerAuthentication), ErrConfig)
	}
	sl, err := sctpddp.Listen(ctx, "udp", addr, l.cfg.SCTP)
	if err != nil {
		return err
	}
	l.addr = sl.Addr()
	actx, cancel := context.WithCancel(context.Background())
	l.closeFn = func() { cancel(); sl.Close() }
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			a, err := sl.Accept(actx)
			if err != nil {
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.serveAssociation(actx, a)
			}()
		}
	}()
	return nil
}

// assocRef counts the holders of an accepted association: the Listener
// while it takes session requests on it, and each connection accepted on
// it. The last to let go closes it.
type assocRef struct {
	a  *sctpddp.Association
	mu sync.Mutex
	n  int
}

func (r *assocRef) hold() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return false
	}
	r.n++
	return true
}

func (r *assocRef) release() {
	r.mu.Lock()
	r.n--
	last := r.n == 0
	r.mu.Unlock()
	if last {
		r.a.Close()
	}
}

// serveAssociation offers the session requests of one association until
// it ends (the peer ends it, or the Listener closes). The association is
// closed when, besides, every connection accepted on it has been closed.
func (l *Listener) serveAssociation(ctx context.Context, a *sctpddp.Association) {
	sessions := a.Sessions(0)
	ref := &assocRef{a: a, n: 1}
	defer ref.release()
	for {
		sr, err := sessions.Accept(ctx)
		if err != nil {
			return
		}
		r := &Request{l: l, transport: "sctp", remote: a.RemoteAddr(), peerData: sr.PrivateData, enhanced: sr.Enhanced,
			deadline: sr.Deadline()}
		r.accept = func(qp *rdmap.QueuePair, pd []byte) (*Conn, error) {
			if !ref.hold() {
				return nil, tag(sctpddp.ErrClosed, "iwarp: accept: the association has ended", sctpddp.ErrClosed)
			}
			scfg := l.cfg.Session
			scfg.PrivateData = pd
			s, err := sr.Accept(qp, scfg)
			if err != nil {
				ref.release()
				return nil, err
			}
			var once sync.Once
			return &Conn{qp: qp, url: l.url, transport: "sctp", session: s, local: a.LocalAddr(), remote: a.RemoteAddr(),
				peerData: sr.PrivateData, cfg: l.cfg, release: func() { once.Do(ref.release) }}, nil
		}
		r.reject = func(pd []byte) error { return sr.Reject(pd, 0, 0) }
		// The application never saw the request: "A DDP Stream Session
		// Reject message MUST NOT be sent unless the rejection is at the
		// direction of the ULP." (RFC 5043 §6.3) A Terminate answers it
		// instead, as §6.4 answers requests the ULP does not decide.
		r.refuse = func() { sr.Terminate() }
		r.expired = func() {
			if l.cfg.SCTP.Refused != nil {
				l.cfg.SCTP.Refused(r.remote, sctpddp.ErrAcceptTimeout)
			}
		}
		if !l.offer(r) {
			return
		}
	}
}
