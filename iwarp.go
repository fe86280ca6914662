//go:build !js

package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// DefaultConnectTimeout bounds a Dial whose context has no deadline.
const DefaultConnectTimeout = 10 * time.Second

// Config configures Dial, DialFirst and Listen. A nil Config means the
// defaults (for sctp:// there is no default authentication: set SCTP).
type Config struct {
	// PrivateData goes to the peer with Dial's set-up: in MPA's Request,
	// in DDP over SCTP's Initiate. At most MaxPrivateData octets.
	PrivateData []byte
	// ConnectTimeout bounds Dial (each attempt of DialFirst) when its
	// context has no earlier deadline. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MPA configures tcp:// (nil: mpa's defaults). Its PrivateData is
	// replaced by the one above.
	MPA *mpa.Config
	// SCTP configures sctp://: how the peers authenticate (required:
	// see the package documentation), the MTU, the Listener's limits,
	// the dead-peer time. Its handshake timeout also bounds a Dial.
	SCTP *sctpddp.Config
	// Session configures the DDP Stream Session of sctp:// (its Private
	// Data is replaced by the one above).
	Session sctpddp.SessionConfig
	// OnEvent, if set, hears each connection's lifecycle (see EventType).
	// It is called from the library's goroutines and must not block.
	OnEvent func(Event)
}

func (c *Config) connectTimeout() time.Duration {
	if c.ConnectTimeout <= 0 {
		return DefaultConnectTimeout
	}
	return c.ConnectTimeout
}

func (c *Config) event(e Event) {
	if c.OnEvent != nil {
		c.OnEvent(e)
	}
}

// EventType names a lifecycle event.
type EventType uint8

// The lifecycle events, as rdma_cm names its own.
const (
	Established  EventType = iota + 1 // the stream runs (ESTABLISHED)
	Rejected                          // the peer rejected the connection (REJECTED)
	Unreachable                       // nobody answered (UNREACHABLE)
	Failed                            // the set-up failed otherwise (CONNECT_ERROR)
	Disconnected                      // the peer closed the stream in order (DISCONNECTED)
	Ended                             // the stream ended otherwise: a Terminate, the transport's loss, Close
)

func (t EventType) String() string {
	switch t {
	case Established:
		return "ESTABLISHED"
	case Rejected:
		return "REJECTED"
	case Unreachable:
		return "UNREACHABLE"
	case Failed:
		return "CONNECT_ERROR"
	case Disconnected:
		return "DISCONNECTED"
	case Ended:
		return "ENDED"
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// Event is one step of a connection's lifecycle.
type Event struct {
	Type EventType
	URL  string // the address dialed or listened on
	Conn *Conn  // Established, Disconnected, Ended
	Err  error  // why, for all but Established
}

// ParseURL splits an address of Dial and Listen, tcp://host:port (MPA
// over TCP) or sctp://host:port (DDP over SCTP over DTLS over UDP), into
// its scheme, "tcp" or "sctp", and its host:port. Its errors match
// ErrBadAddress and say what is wrong.
func ParseURL(s string) (scheme, addr string, err error) {
	bad := func(why string) error {
		return tag(nil, fmt.Sprintf("iwarp: bad address %q: %s", s, why), ErrBadAddress)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", "", bad("want tcp://host:port or sctp://host:port")
	}
	if u.Scheme != "tcp" && u.Scheme != "sctp" {
		return "", "", bad("the scheme is tcp (MPA over TCP) or sctp (DDP over SCTP over DTLS)")
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return "", "", bad("no port: want host:port")
	}
	return u.Scheme, u.Host, nil
}

// Conn is an established connection carrying one queue pair's stream.
type Conn struct {
	qp        *rdmap.QueuePair
	url       string
	transport string
	local     net.Addr
	remote    net.Addr
	peerData  []byte
	mpa       *mpa.Conn
	session   *sctpddp.Session
	assoc     *sctpddp.Association // dialed sctp://: the Conn's own
	release   func()               // a Listener's bookkeeping
	cfg       *Config
	closed    atomic.Bool              // Close or Shutdown began while the stream ran
	ended     atomic.Pointer[errorBox] // why the stream had stopped when Close began
	closeOnce sync.Once
	closeErr  error
}

// QueuePair returns the connection's queue pair.
func (c *Conn) QueuePair() *rdmap.QueuePair { return c.qp }

// URL returns the address the connection was dialed to, or the Listener's.
func (c *Conn) URL() string { return c.url }

// Transport returns "tcp" (MPA over TCP) or "sctp" (DDP over SCTP).
func (c *Conn) Transport() string { return c.transport }

// LocalAddr and RemoteAddr return the transport's addresses.
func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// PeerPrivateData returns the private data the peer sent with the set-up.
func (c *Conn) PeerPrivateData() []byte { return c.peerData }

// MPA returns the MPA connection of a tcp:// Conn (nil for sctp://).
func (c *Conn) MPA() *mpa.Conn { return c.mpa }

// Session returns the DDP Stream Session of an sctp:// Conn (nil for
// tcp://).
func (c *Conn) Session() *sctpddp.Session { return c.session }

// Done is closed when the stream has stopped (the peer disconnected, a
// Terminate, the transport's loss, Close); Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.qp.Terminated() }

// Err returns why the stream stopped, or nil while it runs: see the
// package documentation.
func (c *Conn) Err() error {
	if e := c.ended.Load(); e != nil {
		return c.endError(e.err, false)
	}
	return c.endError(c.qp.Err(), c.closed.Load())
}

// errorBox holds an error for an atomic.Pointer.
type errorBox struct{ err error }

// Close ends the connection at once: the work requests still outstanding
// complete with WR_FLUSH_ERR, the queue pair closes and with it the
// transport connection, and what Dial made for it (a dialed sctp://
// connection's association and UDP socket). When Close returns, nothing
// of the connection remains. Call Shutdown first to let outstanding work
// finish. Close after Close or Shutdown returns what the first returned.
func (c *Conn) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return c.shutdown(ctx, false)
}

// Shutdown ends the connection gracefully: it waits for the send work
// requests outstanding to complete, then closes as Close does. If ctx is
// done first, what is outstanding then flushes and Shutdown returns ctx's
// error.
func (c *Conn) Shutdown(ctx context.Context) error { return c.shutdown(ctx, true) }

func (c *Conn) shutdown(ctx context.Context, graceful bool) error {
	c.closeOnce.Do(func() {
		if err := c.qp.Err(); err != nil {
			c.ended.Store(&errorBox{err}) // the queue pair's Close replaces it
		} else {
			c.closed.Store(true)
		}
		c.closeErr = c.qp.Close(ctx)
		if err := ctx.Err(); graceful && c.closeErr == nil && err != nil {
			c.closeErr = fmt.Errorf("iwarp: shutdown: %w before the outstanding work completed (what was left flushed)", err)
		}
		if c.assoc != nil {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c.assoc.Shutdown(sctx)
			cancel()
		}
		if c.release != nil {
			c.release()
		}
	})
	return c.closeErr
}

// watch reports how the stream ended.
func (c *Conn) watch() {
	if c.cfg.OnEvent == nil {
		return
	}
	go func() {
		<-c.qp.Terminated()
		err := c.Err()
		t := Ended
		if errors.Is(err, rdmap.ErrDisconnected) {
			t = Disconnected
		}
		c.cfg.event(Event{Type: t, URL: c.url, Conn: c, Err: err})
	}()
}

// Dial connects qp to the peer at url (tcp://host:port or
// sctp://host:port) and returns once the stream runs. ctx bounds the
// set-up, as does Config.ConnectTimeout when ctx has no deadline. A
// failure wraps ErrBadAddress, ErrConfig, ErrClosed, ErrUnreachable,
// ErrRejected, ErrHandshake, or ctx's error when ctx ended it (see the
// package documentation); qp then stays IDLE, so that it may be dialed
// elsewhere, unless the set-up failed after it started (an RFC 6581
// negotiation that ended with a Terminate).
func Dial(ctx context.Context, url string, qp *rdmap.QueuePair, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c, err := dial(ctx, url, qp, cfg)
	if err != nil {
		t := Failed
		switch {
		case errors.Is(err, ErrUnreachable):
			t = Unreachable
		case errors.Is(err, ErrRejected):
			t = Rejected
		}
		cfg.event(Event{Type: t, URL: url, Err: err})
		return nil, err
	}
	cfg.event(Event{Type: Established, URL: url, Conn: c})
	c.watch()
	return c, nil
}

func dial(ctx context.Context, u string, qp *rdmap.QueuePair, cfg *Config) (*Conn, error) {
	scheme, addr, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	if err := checkPrivateData(cfg.PrivateData); err != nil {
		return nil, err
	}
	if err := checkIdle(qp); err != nil {
		return nil, err
	}
	if scheme == "sctp" && cfg.SCTP == nil {
		return nil, tag(sctpddp.ErrNoPeerAuthentication, fmt.Sprintf("iwarp: %s: Config.SCTP is nil: %v", u, sctpddp.ErrNoPeerAuthentication), ErrConfig)
	}
	if err := ctx.Err(); err != nil {
		return nil, tag(err, fmt.Sprintf("iwarp: %s: %v", u, err), err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout())
	defer cancel()
	c := &Conn{qp: qp, url: u, transport: scheme, cfg: cfg}
	if scheme == "tcp" {
		mc := mpa.Config{}
		if cfg.MPA != nil {
			mc = *cfg.MPA
		}
		mc.PrivateData = cfg.PrivateData
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			var dns *net.DNSError
			switch cerr := ctx.Err(); {
			case errors.Is(cerr, context.Canceled), errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dns):
				return nil, classify(ctx, u, err)
			case cerr != nil:
				return nil, tag(err, fmt.Sprintf("iwarp: nobody answers at %s in time: %v", u, err), ErrUnreachable, cerr)
			}
			return nil, tag(err, fmt.Sprintf("iwarp: nobody answers at %s: %v", u, err), ErrUnreachable)
		}
		m, err := mpa.Client(ctx, nc, qp, &mc)
		if err != nil {
			nc.Close()
			return nil, classify(ctx, u, err)
		}
		c.mpa, c.local, c.remote, c.peerData = m, m.LocalAddr(), m.RemoteAddr(), m.Negotiated().PeerData
		return c, nil
	}
	sc := *cfg.SCTP
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); sc.HandshakeTimeout <= 0 || sc.HandshakeTimeout > d {
			sc.HandshakeTimeout = max(d, time.Millisecond)
		}
	}
	a, err := sctpddp.Dial(ctx, "udp", addr, &sc)
	if err != nil {
		return nil, classify(ctx, u, err)
	}
	scfg := cfg.Session
	scfg.PrivateData = cfg.PrivateData
	s, err := a.Connect(ctx, qp, scfg)
	if err != nil {
		a.Close()
		return nil, classify(ctx, u, err)
	}
	c.session, c.assoc, c.local, c.remote, c.peerData = s, a, a.LocalAddr(), a.RemoteAddr(), s.PeerPrivateData
	return c, nil
}

// DialFirst dials each of urls in turn, each attempt bounded by
// Config.ConnectTimeout, and returns the first connection that comes up
// (Conn.URL says which); a list of an sctp:// and a tcp:// address makes
// MPA over TCP the fallback of DDP over SCTP. If none does, the error
// joins every attempt's, each wrapping its reason (ErrUnreachable, ...).
// An attempt that fails after the queue pair has started ends the list:
// the queue pair cannot start again.
func DialFirst(ctx context.Context, urls []string, qp *rdmap.QueuePair, cfg *Config) (*Conn, error) {
	if len(urls) == 0 {
		return nil, tag(nil, "iwarp: DialFirst with no address", ErrBadAddress)
	}
	var errs []error
	for _, u := range urls {
		c, err := Dial(ctx, u, qp, cfg)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if qp.State() != rdmap.StateIdle || ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
