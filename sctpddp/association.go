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
	"time"

	"github.com/pion/dtls/v3"
)

// ErrClosed is returned by operations on a closed Association or Stream.
var ErrClosed = errors.New("sctpddp: association closed")

// ErrStreamInUse is returned by Connect for a DDP stream of the
// association that carries or has carried a session: starting another
// there would be a second Initiate on a live session, which the peer must
// answer by terminating that session (RFC 5043 §6.1), or would reuse the
// stream's id (§6.6).
var ErrStreamInUse = errors.New("sctpddp: the DDP stream carries or has carried a session of the association")

// ErrNoStreamID is returned by Association.Connect once every stream id of
// this end has carried a session: none may carry another on this
// association (RFC 5043 §6.6), so open a new association.
var ErrNoStreamID = errors.New("sctpddp: every DDP stream id of this end has carried a session of the association; open a new association")

// Association is an SCTP association over DTLS over UDP that carries DDP
// streams per RFC 5043. Each DDP stream is a pair of like-numbered SCTP
// streams (§8: "DDP streams are bidirectional. They are always composed by
// pairing the inbound and outbound SCTP streams with the same SCTP Stream
// Identifier."); OpenStream and AcceptStream return them.
//
// An association ends when it is closed, when the peer ends it, when
// nothing has come from the peer for Config.DeadPeerTimeout (a quiet peer
// is sent heartbeats first), or Config.LingerTimeout after the last of
// the DDP Stream Sessions it carried has ended (RFC 5040 §7); Done is
// closed then and Err says why.
//
// Its methods are safe for concurrent use.
type Association struct {
	s    *settings
	conn net.Conn // a *dtls.Conn, or under InsecurePlainUDP the UDP flow
	sctp sctpAssociation
	in   *countingConn // what SCTP reads and writes: counts the packets

	accepted chan sctpStream // fed by acceptLoop
	ended    chan struct{}   // closed when acceptLoop ends: SCTP is over
	closed   chan struct{}   // closed by end
	once     sync.Once
	why      error // why it ended: set before closed is closed
	closeErr error
	local    atomic.Bool    // Shutdown was called
	lingered atomic.Bool    // shut down by lingerEnd: every session had ended
	raw      atomic.Bool    // the application reads or writes streams itself
	onEnd    func()         // called once when it ends (a Listener's count)
	sessions *peerCounter   // a Listener's count of sessions; nil if dialed
	wg       sync.WaitGroup // acceptLoop, monitor, the retired streams' readers
	server   bool           // the Listener's side: Connect chooses even stream ids, the dialer odd ones

	// "A DDP Stream Identifier MUST NOT be reused for another DDP Stream
	// Session while any Data Chunk from a prior session might be
	// outstanding." (RFC 5043 §6.6) This end cannot tell when none might
	// be, so a stream id carries at most one session per association.
	idMu sync.Mutex // guards ids and nextID; held while end closes closed
	// ids holds the DDP streams that carry or have carried a session (or
	// an Initiate) of this association: false while in use, true once
	// retired.
	ids    map[uint16]bool
	nextID int // the next stream id Association.Connect tries
	// readers holds the retired streams still read (Config.MaxRetiredStreams);
	// guarded by idMu.
	readers map[*retiredReader]struct{}
	// inUse counts the DDP streams in ids not yet retired; when it
	// falls to zero, linger shuts the association down after
	// Config.LingerTimeout unless a claim (which bumps lingerGen) comes
	// first, and ending is set once it does (linger.go). Guarded by idMu.
	inUse     int
	linger    *time.Timer
	lingerGen uint64
	ending    bool

	scratchMu sync.Mutex
	scratch   []byte // what retired streams' readers discard messages into
}

// claim marks DDP stream id as carrying a session. It fails for a stream
// that carries or has carried one: the id stays used for the
// association's life.
func (a *Association) claim(id uint16) error {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if a.ending {
		return closedBy(ErrSessionsEnded)
	}
	if _, used := a.ids[id]; used {
		return fmt.Errorf("%w: stream %d", ErrStreamInUse, id)
	}
	a.ids[id] = false
	a.claimed()
	return nil
}

// retired reports whether stream id has carried a session that has ended.
func (a *Association) retired(id uint16) bool {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	return a.ids[id]
}

// maxStreamID is the highest SCTP Stream Identifier of an association:
// both SCTP associations offer 65535 streams each way, ids 0 to 65534.
const maxStreamID = 0xfffe

// claimNew claims the next stream id of this end's parity that has not
// carried a session: odd ones on the dialing side, even ones (from 2) on
// the Listener's, so that the two ends never choose the same. Ids only
// increase: none is used twice.
func (a *Association) claimNew() (uint16, error) {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if a.ending {
		return 0, closedBy(ErrSessionsEnded)
	}
	if a.nextID == 0 {
		a.nextID = 1
		if a.server {
			a.nextID = 2
		}
	}
	for ; a.nextID <= maxStreamID; a.nextID += 2 {
		id := uint16(a.nextID)
		if _, used := a.ids[id]; used {
			continue
		}
		a.ids[id] = false
		a.claimed()
		a.nextID += 2
		return id, nil
	}
	return 0, ErrNoStreamID
}

// retire reads the DDP stream st once its session (or request) has ended
// (Stream.drain), until nothing has come on it for
// Config.RetiredStreamTimeout or the association ends. The SCTP
// association keeps the stream and never offers its id to AcceptStream
// again, so this is the only reader that will see what the peer still sends on it. "A DDP
// Stream Identifier MUST NOT be reused for another DDP Stream Session
// while any Data Chunk from a prior session might be outstanding." (RFC
// 5043 §6.6) Once the peer, heard from all along (Config.DeadPeerTimeout),
// has sent nothing on the stream for that long, no chunk of the prior
// session is outstanding but for a path that dropped every
// retransmission, and the reader stops: so the readers of a well-behaved
// peer that runs sessions one after the other do not pile up. At most
// Config.MaxRetiredStreams are read at once; beyond, the reader of the
// stream quiet longest stops early to make room. What a peer still sends
// on a stream no reader reads stays in the SCTP receive buffer, which
// counts against that association's receive window only: a peer that
// keeps sending on streams whose sessions are over slows itself, and
// holds no goroutine beyond the cap.
func (a *Association) retire(st *Stream) { a.startReader(st) }

// retiredReader is the reader of one retired stream.
type retiredReader struct {
	st      *Stream
	last    atomic.Int64 // when the last message came (or the stream retired), in Unix nanoseconds
	evicted atomic.Bool  // stop at once: another retired stream needs the room
}

func (a *Association) startReader(st *Stream) {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if retired, ok := a.ids[st.ID()]; ok && !retired {
		a.released()
	}
	a.ids[st.ID()] = true
	if a.isClosed() {
		return
	}
	now := time.Now()
	if len(a.readers) >= a.s.MaxRetiredStreams {
		a.evictQuietest()
	}
	r := &retiredReader{st: st}
	r.last.Store(now.UnixNano())
	a.readers[r] = struct{}{}
	// end closes a.closed under idMu: this Add comes before closeWith's
	// Wait, or not at all.
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.drain(r)
		a.idMu.Lock()
		delete(a.readers, r)
		a.idMu.Unlock()
	}()
}

// evictQuietest stops the reader of the retired stream quiet longest.
// idMu is held.
func (a *Association) evictQuietest() {
	var oldest *retiredReader
	for r := range a.readers {
		if oldest == nil || r.last.Load() < oldest.last.Load() {
			oldest = r
		}
	}
	if oldest == nil {
		return
	}
	delete(a.readers, oldest)
	oldest.evicted.Store(true) // before the interrupt: see drain
	oldest.st.InterruptRead()
}

// discard reads the next message of st, n bytes long, into the
// association's scratch buffer, and drops it.
func (a *Association) discard(st *Stream, n int) error {
	a.scratchMu.Lock()
	defer a.scratchMu.Unlock()
	if len(a.scratch) < n {
		a.scratch = make([]byte, max(n, int(a.s.MaxMessageSize)))
	}
	// The message is whole in the stream's queue already: this returns
	// at once.
	_, _, err := st.ReadMessage(context.Background(), a.scratch[:n])
	return err
}

// newAssociation runs the SCTP handshake over an authenticated DTLS
// connection, with package sctp's association or, under Config.PionSCTP,
// pion/sctp's; or, under Config.InsecurePlainUDP, over a UDP flow that
// carries one SCTP packet per datagram. onEnd, if not nil, is called once
// when the association ends (not if newAssociation fails).
func newAssociation(ctx context.Context, s *settings, conn net.Conn, server bool, onEnd func()) (*Association, error) {
	var nc net.Conn = conn
	if s.connHook != nil {
		nc = s.connHook(conn)
	}
	if s.Trace != nil {
		nc = tracedConn{nc, s.Trace, conn.RemoteAddr()}
	}
	in := &countingConn{Conn: nc}
	handshake := ownHandshake
	if s.PionSCTP {
		handshake = pionHandshake
	}
	assoc, err := handshake(ctx, s, conn, in, server)
	if err != nil {
		return nil, err
	}
	a := &Association{
		s:        s,
		conn:     conn,
		sctp:     assoc,
		in:       in,
		accepted: make(chan sctpStream),
		ended:    make(chan struct{}),
		closed:   make(chan struct{}),
		onEnd:    onEnd,
		server:   server,
		ids:      make(map[uint16]bool),
		readers:  make(map[*retiredReader]struct{}),
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
			continue // until the close ends AcceptStream
		}
		select {
		case a.accepted <- st:
		case <-a.closed:
			return
		}
	}
}

// OpenStream returns the DDP stream with SCTP Stream Identifier id. Its
// messages are sent unordered and reliably. An association whose streams
// the application uses itself is never taken for idle (Config's
// MaxAssociations).
func (a *Association) OpenStream(id uint16) (*Stream, error) {
	a.raw.Store(true)
	return a.openStream(id)
}

func (a *Association) openStream(id uint16) (*Stream, error) {
	select {
	case <-a.closed:
		return nil, a.Err()
	default:
	}
	st, err := a.sctp.OpenStream(id)
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
	a.raw.Store(true)
	return a.acceptStream(ctx)
}

func (a *Association) acceptStream(ctx context.Context) (*Stream, error) {
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

// PeerCertificate returns the peer's leaf certificate, or nil in PSK mode
// and over plain UDP.
func (a *Association) PeerCertificate() *x509.Certificate {
	dc, ok := a.conn.(*dtls.Conn)
	if !ok {
		return nil
	}
	st, ok := dc.ConnectionState()
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
// (Config.AcceptTimeout), the peer started too many streams
// (Config.MaxStreams), or its sessions had all ended
// (Config.LingerTimeout). Err then says why.
func (a *Association) Done() <-chan struct{} { return a.closed }

// Err returns nil while the association is open, and then why it ended:
// ErrClosed if it was closed here (Close, Shutdown), otherwise an error
// that is ErrClosed and wraps the cause (errors.Is): ErrPeerClosed,
// ErrPeerDead, ErrAcceptTimeout, ErrTooManyStreams or ErrSessionsEnded. Reads and writes on
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
		a.idMu.Lock() // see retire
		close(a.closed)
		a.stopLinger()
		a.idMu.Unlock()
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

// tracedConn hands each SCTP packet that the association reads or writes to
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
