//go:build !js

package sctpddp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/pion/dtls/v3"
	"github.com/pion/sctp"
)

// ErrClosed is returned by operations on a closed Association or Stream.
var ErrClosed = errors.New("sctpddp: association closed")

// ErrStreamInUse is returned by Connect for a DDP stream of the
// association that carries a session already: starting another there
// would be a second Initiate on a live session, which the peer must
// answer by terminating that session (RFC 5043 §6.1).
var ErrStreamInUse = errors.New("sctpddp: the DDP stream carries a session already")

// Association is an SCTP association over DTLS over UDP that carries DDP
// streams per RFC 5043. Each DDP stream is a pair of like-numbered SCTP
// streams (§8: "DDP streams are bidirectional. They are always composed by
// pairing the inbound and outbound SCTP streams with the same SCTP Stream
// Identifier."); OpenStream and AcceptStream return them.
//
// An association ends when it is closed, when the peer ends it, or when
// nothing has come from the peer for Config.DeadPeerTimeout (a quiet peer
// is sent heartbeats first); Done is closed then and Err says why.
//
// Its methods are safe for concurrent use.
type Association struct {
	s    *settings
	conn *dtls.Conn
	sctp *sctp.Association
	in   *countingConn // what SCTP reads and writes: counts the packets

	accepted chan *sctp.Stream // fed by acceptLoop
	ended    chan struct{}     // closed when acceptLoop ends: SCTP is over
	closed   chan struct{}     // closed by end
	once     sync.Once
	why      error // why it ended: set before closed is closed
	closeErr error
	local    atomic.Bool    // Shutdown was called
	onEnd    func()         // called once when it ends (a Listener's count)
	sessions *peerCounter   // a Listener's count of sessions; nil if dialed
	wg       sync.WaitGroup // acceptLoop, monitor
	server   bool           // the Listener's side: Connect chooses even stream ids, the dialer odd ones

	idMu sync.Mutex
	ids  map[uint16]bool // DDP streams that carry a session (or an Initiate) of this association
}

// claim marks DDP stream id as carrying a session.
func (a *Association) claim(id uint16) error {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if a.ids[id] {
		return fmt.Errorf("%w: stream %d", ErrStreamInUse, id)
	}
	if a.ids == nil {
		a.ids = make(map[uint16]bool)
	}
	a.ids[id] = true
	return nil
}

// unclaim frees DDP stream id once its session has ended.
func (a *Association) unclaim(id uint16) {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	delete(a.ids, id)
}

// freeID returns the lowest stream id of this end's parity that carries
// no session: odd ones on the dialing side, even ones (from 2) on the
// Listener's, so that the two ends never choose the same.
func (a *Association) freeID() (uint16, error) {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	id := uint16(1)
	if a.server {
		id = 2
	}
	for ; ; id += 2 {
		if !a.ids[id] {
			return id, nil
		}
		if id >= 0xffff-1 {
			return 0, fmt.Errorf("%w: every stream id of this end's parity is in use", ErrStreamInUse)
		}
	}
}

// newAssociation runs the SCTP handshake over an authenticated DTLS
// connection. pion's server side takes no context, so ctx is enforced by
// closing conn. onEnd, if not nil, is called once when the association
// ends (not if newAssociation fails).
func newAssociation(ctx context.Context, s *settings, conn *dtls.Conn, server bool, onEnd func()) (*Association, error) {
	var nc net.Conn = conn
	if s.connHook != nil {
		nc = s.connHook(conn)
	}
	if s.Trace != nil {
		nc = tracedConn{nc, s.Trace, conn.RemoteAddr()}
	}
	in := &countingConn{Conn: nc}
	opts := []sctp.AssociationOption{
		sctp.WithNetConn(in),
		sctp.WithMTU(s.MTU),
		sctp.WithMaxReceiveBufferSize(s.MaxReceiveBufferSize),
		sctp.WithMaxMessageSize(s.MaxMessageSize),
		// RFC 5043 §10 speaks of DATA chunks with the U flag; keep pion
		// from negotiating I-DATA (RFC 8260) instead.
		sctp.WithEnableInterleaving(false),
	}
	if s.LoggerFactory != nil {
		opts = append(opts, sctp.WithLoggerFactory(s.LoggerFactory))
	}
	var assoc *sctp.Association
	var err error
	if server {
		sopts := make([]sctp.ServerOption, len(opts))
		for i, o := range opts {
			sopts[i] = o
		}
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		assoc, err = sctp.ServerWithOptions(sopts...)
		if !stop() {
			if err == nil {
				_ = assoc.Close()
			}
			return nil, fmt.Errorf("sctpddp: SCTP handshake: %w", ctx.Err())
		}
	} else {
		copts := make([]sctp.ClientOption, len(opts))
		for i, o := range opts {
			copts[i] = o
		}
		assoc, err = sctp.ClientContext(ctx, copts...)
	}
	if err != nil {
		return nil, fmt.Errorf("sctpddp: SCTP handshake: %w", err)
	}
	a := &Association{
		s:        s,
		conn:     conn,
		sctp:     assoc,
		in:       in,
		accepted: make(chan *sctp.Stream),
		ended:    make(chan struct{}),
		closed:   make(chan struct{}),
		onEnd:    onEnd,
		server:   server,
	}
	a.wg.Add(2)
	go a.acceptLoop()
	go a.monitor()
	return a, nil
}

func (a *Association) acceptLoop() {
	defer a.wg.Done()
	defer close(a.ended)
	defer close(a.accepted)
	started := 0
	for {
		st, err := a.sctp.AcceptStream()
		if err != nil {
			return // the association has ended
		}
		if started++; started > a.s.MaxStreams {
			if !a.isClosed() {
				a.s.refused(a.RemoteAddr(), ErrTooManyStreams)
				_ = a.end(fmt.Errorf("%w (%d)", ErrTooManyStreams, a.s.MaxStreams))
			}
			continue // until pion's close ends AcceptStream
		}
		select {
		case a.accepted <- st:
		case <-a.closed:
			return
		}
	}
}

// OpenStream returns the DDP stream with SCTP Stream Identifier id. Its
// messages are sent unordered and reliably.
func (a *Association) OpenStream(id uint16) (*Stream, error) {
	select {
	case <-a.closed:
		return nil, a.Err()
	default:
	}
	st, err := a.sctp.OpenStream(id, sctp.PayloadProtocolIdentifier(wire.PPIDSegment))
	if err != nil {
		if a.isClosed() {
			return nil, a.Err()
		}
		return nil, err
	}
	return newStream(a, st), nil
}

// AcceptStream returns the next DDP stream the peer started sending on.
func (a *Association) AcceptStream(ctx context.Context) (*Stream, error) {
	select {
	case st, ok := <-a.accepted:
		if !ok {
			<-a.closed // the monitor ends the association at once
			return nil, a.Err()
		}
		return newStream(a, st), nil
	case <-a.closed:
		return nil, a.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// MULPDU returns the maximum DDP Segment size this association carries
// without SCTP fragmentation (RFC 5043 §9: "the SCTP adaptation layer MUST
// inform the DDP layer of the maximum DDP Segment size that will be
// supported").
func (a *Association) MULPDU() int { return a.s.mulpdu }

// MTU returns the SCTP MTU.
func (a *Association) MTU() uint32 { return a.sctp.MTU() }

// LocalAddr and RemoteAddr return the UDP addresses.
func (a *Association) LocalAddr() net.Addr  { return a.conn.LocalAddr() }
func (a *Association) RemoteAddr() net.Addr { return a.conn.RemoteAddr() }

// PeerCertificate returns the peer's leaf certificate, or nil in PSK mode.
func (a *Association) PeerCertificate() *x509.Certificate {
	st, ok := a.conn.ConnectionState()
	if !ok || len(st.PeerCertificates) == 0 {
		return nil
	}
	c, err := x509.ParseCertificate(st.PeerCertificates[0])
	if err != nil {
		return nil
	}
	return c
}

// Done is closed when the association ends: Close or Shutdown was called,
// the peer ended it, its peer was found dead (Config.DeadPeerTimeout), or
// a Listener closed it because the application did not accept it in time
// (Config.AcceptTimeout), or the peer started too many streams
// (Config.MaxStreams). Err then says why.
func (a *Association) Done() <-chan struct{} { return a.closed }

// Err returns nil while the association is open, and then why it ended:
// ErrClosed if it was closed here (Close, Shutdown), otherwise an error
// that is ErrClosed and wraps the cause (errors.Is): ErrPeerClosed,
// ErrPeerDead, ErrAcceptTimeout or ErrTooManyStreams. Reads and writes on
// its streams that fail because it ended return the same error.
func (a *Association) Err() error {
	select {
	case <-a.closed:
		return closedBy(a.why)
	default:
		return nil
	}
}

func (a *Association) isClosed() bool { return a.Err() != nil }

// Shutdown ends the association gracefully (SCTP SHUTDOWN: data queued is
// delivered first), then closes it. If ctx ends first, it closes at once.
func (a *Association) Shutdown(ctx context.Context) error {
	a.local.Store(true)
	err := a.sctp.Shutdown(ctx)
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close closes the association, its streams, the DTLS connection and (on
// the dialing side) the UDP socket, and waits for the goroutines it
// started. Data not yet acknowledged is lost; use Shutdown to deliver it.
func (a *Association) Close() error { return a.closeWith(ErrClosed) }

// closeWith ends the association for why and waits for its goroutines.
func (a *Association) closeWith(why error) error {
	err := a.end(why)
	a.wg.Wait()
	return err
}

// end ends the association for why (the first reason given wins) without
// waiting for its goroutines, so that they may call it.
func (a *Association) end(why error) error {
	a.once.Do(func() {
		a.why = why
		close(a.closed)
		err := a.sctp.Close()
		if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			err = nil
		}
		a.closeErr = err
		if a.onEnd != nil {
			a.onEnd()
		}
	})
	return a.closeErr
}

// tracedConn hands each SCTP packet that pion reads or writes to
// Config.Trace: one Read or Write of the DTLS connection is one packet.
type tracedConn struct {
	net.Conn
	trace func(peer net.Addr, outbound bool, packet []byte)
	peer  net.Addr
}

func (c tracedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.trace(c.peer, false, b[:n])
	}
	return n, err
}

func (c tracedConn) Write(b []byte) (int, error) {
	c.trace(c.peer, true, b)
	return c.Conn.Write(b)
}
