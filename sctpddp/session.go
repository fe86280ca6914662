package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/iwarpgo/iwarp/term"
)

// SessionConfig configures one DDP Stream Session (RFC 5043 §6).
type SessionConfig struct {
	// PrivateData goes in the Initiate, Accept or Reject: at most 512
	// octets, 508 when IRD/ORD are negotiated (RFC 5043 §5.2.3).
	PrivateData []byte
	// Basic uses RFC 5043's own function codes (1-3) and negotiates no
	// IRD/ORD; by default the session uses RFC 6581's enhanced ones
	// (5-7), whose Private Data starts with the IRD and ORD.
	Basic bool
	// Window is the most DDP Segments the peer may have in flight on the
	// stream: RFC 5043 §10 lets a sender have 32767 unacknowledged, which
	// is the default.
	Window int
}

func (c *SessionConfig) window() int {
	if c.Window <= 0 {
		return wire.MaxInFlight + 1
	}
	return c.Window
}

// MessageStream is a DDP stream as the session layer uses it: an SCTP
// stream pair of an Association (Stream), or a WebRTC data channel. Each
// message is one DDP Segment Chunk or one DDP Stream Session Control
// message with its DDP-SSN (RFC 5043 §5.2).
type MessageStream interface {
	ID() uint16
	// MULPDU is the largest DDP Segment the stream carries.
	MULPDU() int
	// ReadMessage reads one whole message and says which it is.
	ReadMessage(ctx context.Context, buf []byte) (int, wire.PPID, error)
	// WriteSegmentv sends one DDP Segment with the next DDP-SSN.
	WriteSegmentv(ctx context.Context, hdr []byte, payload [][]byte) (wire.SSN, error)
	// WriteSessionControl sends a session control message with the next
	// DDP-SSN.
	WriteSessionControl(ctx context.Context, m wire.SessionControl) (wire.SSN, error)
	// NewSession resets the DDP-SSN once the previous session's chunks are
	// acknowledged.
	NewSession(ctx context.Context) error
	// InterruptRead makes a blocked or later ReadMessage return.
	InterruptRead()
}

// maxEarlySegments bounds the DDP Segments kept that arrive before the
// Accept they follow.
const maxEarlySegments = 64

// Errors of the session layer.
var (
	ErrSessionTerminated = errors.New("sctpddp: the peer sent DDP Stream Session Terminate")
	ErrIllegalSequence   = errors.New("sctpddp: a message outside RFC 5043 §6's legal session sequences")
)

// Session is one DDP Stream Session: a DDP stream (a pair of SCTP streams
// with one identifier) carrying one ULP endpoint's DDP stream (an RDMAP
// queue pair). It feeds incoming DDP Segments to the endpoint's
// ddp.Stream with their DDP-SSN widened to the stream's sequence numbers,
// so that placement happens on arrival while delivery follows the DDP-SSN
// order, and it is the endpoint's ddp.LLP for sending.
type Session struct {
	st     MessageStream
	mulpdu int
	ep     ddp.Endpoint
	cfg    SessionConfig

	// What the peer said when the session started.
	PeerPrivateData []byte
	PeerEnhanced    *wire.EnhancedData

	mu        sync.Mutex // guards closing and err
	closing   bool
	err       error
	closeOnce sync.Once
	done      chan struct{}
	ctx       context.Context // ends when the session closes: its writes stop waiting
	cancel    context.CancelFunc
	early     [][]byte // DDP Segment Chunks that overtook the Accept
	release   func()   // gives back the SessionAcceptor's slot on Close; may be nil
	released  bool     // Close has run release: what is added later runs at once
	wg        sync.WaitGroup
}

// addRelease adds f to what Close gives back; once Close has given back
// what it had (the session may end while Connect returns), it runs f.
func (s *Session) addRelease(f func()) {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		f()
		return
	}
	defer s.mu.Unlock()
	if prev := s.release; prev != nil {
		s.release = func() { prev(); f() }
		return
	}
	s.release = f
}

// ID returns the SCTP Stream Identifier of the session's DDP stream.
func (s *Session) ID() uint16 { return s.st.ID() }

// MULPDU implements ddp.LLP.
func (s *Session) MULPDU() int { return s.mulpdu }

// WriteSegment implements ddp.LLP: one DDP Segment Chunk with the next
// DDP-SSN, copied into the association's send queue.
func (s *Session) WriteSegment(hdr []byte, payload [][]byte) error {
	_, err := s.st.WriteSegmentv(s.ctx, hdr, payload)
	return err
}

// Flush implements ddp.LLP: WriteSegment has queued each chunk already
// (SCTP carries each segment as its own message, and SCTP's send queue
// holds copies).
func (s *Session) Flush() error { return nil }

// Close ends the session: it sends the DDP Stream Session Terminate
// ("At least one side MUST send a DDP Stream Terminate", RFC 5043 §6.2),
// stops reading and waits for the session's goroutines. It does not close
// the association. The Terminate waits until the session's Initiate or
// Accept has been acknowledged, which it must not overtake (§6.6), for at
// most 3 seconds (it is not sent if that time passes).
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		sendTerminate(s.st)
		s.cancel()
		close(s.done)
		s.st.InterruptRead()
	})
	s.wg.Wait()
	s.mu.Lock()
	release := s.release
	s.release, s.released = nil, true
	s.mu.Unlock()
	if release != nil {
		release()
	}
	return nil
}

// Err returns why the session ended, if it ended by itself.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// start makes the endpoint send over the session and starts reading.
func (s *Session) start() error {
	// Counted before the endpoint starts: from then on its Close may
	// close the session, whose Close waits for these goroutines (which
	// then return at once).
	s.wg.Add(2)
	if err := s.ep.Start(s, ddp.Start{}); err != nil {
		s.wg.Add(-2)
		return err
	}
	go s.readLoop()
	go s.watch()
	return nil
}

func newSession(st MessageStream, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	if err := ep.Stream().SetWindow(cfg.window()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{st: st, mulpdu: st.MULPDU(), ep: ep, cfg: cfg, done: make(chan struct{}), ctx: ctx, cancel: cancel}, nil
}

// readLoop is the receive side: one goroutine per session.
func (s *Session) readLoop() {
	defer s.wg.Done()
	ds := s.ep.Stream()
	buf := make([]byte, s.mulpdu+wire.SSNLen)
	var endSeq uint32
	ending := false
	for {
		var n int
		var ppid wire.PPID
		var err error
		if len(s.early) > 0 {
			n, ppid = copy(buf, s.early[0]), wire.PPIDSegment
			s.early = s.early[1:]
		} else {
			n, ppid, err = s.st.ReadMessage(context.Background(), buf)
		}
		if s.isClosing() {
			return
		}
		if err != nil {
			if errors.Is(err, wire.ErrUnexpectedPPID) || errors.Is(err, wire.ErrSegmentTooLarge) || errors.Is(err, io.ErrShortBuffer) {
				s.illegal(ds, err)
				return
			}
			s.end(ds, ddp.Lost(fmt.Errorf("sctpddp: stream %d: %w", s.ID(), err)))
			return
		}
		switch ppid {
		case wire.PPIDSegment:
			c, _, perr := wire.ParseSegmentChunk(buf[:n])
			if perr != nil {
				s.illegal(ds, perr)
				return
			}
			seq, ok := widen(ds, c.SSN)
			if !ok || (ending && seq-ds.Next() >= endSeq-ds.Next()) {
				s.illegal(ds, fmt.Errorf("DDP-SSN %d outside the window from %d", c.SSN, wire.SSN(ds.Next()+1)))
				return
			}
			if err := ds.Receive(seq, c.Segment); errors.Is(err, ddp.ErrWindow) {
				s.illegal(ds, err)
				return
			}
		case wire.PPIDSessionControl:
			m, _, perr := wire.ParseSessionControl(buf[:n])
			if perr != nil {
				s.illegal(ds, perr)
				return
			}
			seq, ok := widen(ds, m.SSN)
			// Only a Terminate may follow the session's start (§6.2).
			if m.Function != wire.FunctionTerminate || !ok || ending {
				s.illegal(ds, fmt.Errorf("%v with DDP-SSN %d", m.Function, m.SSN))
				return
			}
			ending, endSeq = true, seq
		}
		// The peer's Terminate ends the session once every Data Chunk
		// before it has been placed and delivered: it may overtake them.
		if ending && (ds.Next() == endSeq || ds.Stopped()) {
			s.end(ds, fmt.Errorf("%w: %w", ddp.ErrDisconnected, ErrSessionTerminated))
			return
		}
	}
}

// watch ends the session once the endpoint has stopped on an error and
// handed its Terminate to the session: "Note that this would follow any
// RDMAP Terminate message" (§6.2).
func (s *Session) watch() {
	defer s.wg.Done()
	select {
	case <-s.ep.Terminated():
		go s.Close()
	case <-s.done:
	}
}

// widen maps a 16-bit DDP-SSN to the DDP stream's 32-bit sequence
// number: the first segment after the Initiate or Accept (DDP-SSN 0) has
// DDP-SSN 1 and sequence number 0. "The receiver MAY perform a validity
// check on received DDP-SSNs to ensure that any gap could be accounted
// for by unreceived Data Chunks." (§10)
func widen(ds *ddp.Stream, ssn wire.SSN) (uint32, bool) {
	next := ds.Next()
	d := uint16(ssn - wire.SSN(next+1))
	if int(d) >= ds.Window() {
		return 0, false
	}
	return next + uint32(d), true
}

func (s *Session) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// illegal terminates the session for a message that fits no legal
// sequence: "If the adaptation layer receives a Payload Data Chunk that
// conforms to none of the enumerated legal patterns, the DDP Stream
// Session MUST be terminated." (§6.1) Nothing more is placed.
func (s *Session) illegal(ds *ddp.Stream, why error) {
	s.end(ds, ddp.Lost(fmt.Errorf("%w: %v", ErrIllegalSequence, why)))
	go s.Close()
}

// end stops the endpoint's stream: the LLP stream is gone for it (err
// wraps ddp.ErrDisconnected or ddp.ErrLLPLost), so it flushes its work
// and sends no RDMAP Terminate.
func (s *Session) end(ds *ddp.Stream, err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	ds.Close(err)
}

// ConnectStream starts a DDP Stream Session as the active side on st
// (RFC 5043 §6.2): it sends the Initiate, waits for the Accept,
// negotiates IRD and ORD as RFC 6581 §9.1 says, and starts ep. Once the
// Initiate is out, a failure other than the peer's Reject or Terminate
// ends the session with a DDP Stream Session Terminate (§6.1).
func ConnectStream(ctx context.Context, st MessageStream, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	if err := st.NewSession(ctx); err != nil {
		return nil, err
	}
	s, err := newSession(st, ep, cfg)
	if err != nil {
		return nil, err
	}
	ird, ord := ep.ReadLimits()
	offer := ddp.Offer(ird, ord, nil)
	init := wire.SessionControl{Function: wire.FunctionEnhancedInitiate, PrivateData: cfg.PrivateData, Enhanced: offer}
	if cfg.Basic {
		init = wire.SessionControl{Function: wire.FunctionInitiate, PrivateData: cfg.PrivateData}
	}
	if _, err := st.WriteSessionControl(ctx, init); err != nil {
		return nil, err
	}
	fail, err := s.awaitAccept(ctx, offer, ird, ord)
	if err == nil {
		err = s.start()
	}
	if err != nil {
		// "If the adaptation layer receives a Payload Data Chunk that
		// conforms to none of the enumerated legal patterns, the DDP
		// Stream Session MUST be terminated." (§6.1) The same ends a
		// session this end gives up on (ctx ended, ep did not start).
		var re *ddp.RejectedError
		if !errors.As(err, &re) && !errors.Is(err, ErrSessionTerminated) {
			sendTerminate(st)
		}
		return nil, err
	}
	if fail != nil {
		return nil, s.abort(fail)
	}
	return s, nil
}

// awaitAccept reads the reply to the Initiate: on an Accept it keeps the
// responder's Private Data and settles IRD and ORD; fail reports an IRD
// this end cannot meet (see abort).
func (s *Session) awaitAccept(ctx context.Context, offer wire.EnhancedData, ird, ord int) (fail *term.Error, err error) {
	st := s.st
	// Chunks are unordered: the responder's first DDP Segments, sent after
	// its Accept, may arrive before it. They are kept (up to
	// maxEarlySegments) and handed to DDP once the session runs.
	buf := make([]byte, st.MULPDU()+wire.SSNLen)
	var n int
	for {
		var ppid wire.PPID
		n, ppid, err = st.ReadMessage(ctx, buf)
		if err != nil {
			return nil, fmt.Errorf("sctpddp: waiting for the DDP Stream Session Accept: %w", err)
		}
		if ppid == wire.PPIDSessionControl {
			break
		}
		if len(s.early) == maxEarlySegments {
			return nil, fmt.Errorf("%w: %d DDP Segments and no Accept", ErrIllegalSequence, maxEarlySegments)
		}
		s.early = append(s.early, append([]byte(nil), buf[:n]...))
	}
	m, _, err := wire.ParseSessionControl(buf[:n])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIllegalSequence, err)
	}
	if m.SSN != 0 {
		return nil, fmt.Errorf("%w: reply with DDP-SSN %d", ErrIllegalSequence, m.SSN)
	}
	pd := append([]byte(nil), m.PrivateData...)
	switch m.Function {
	case wire.FunctionAccept, wire.FunctionEnhancedAccept:
	case wire.FunctionReject, wire.FunctionEnhancedReject:
		re := &ddp.RejectedError{PrivateData: pd}
		if m.Function.Enhanced() {
			e := m.Enhanced
			re.Enhanced = &e
		}
		return nil, re
	case wire.FunctionTerminate:
		return nil, fmt.Errorf("%w before the session started", ErrSessionTerminated)
	default:
		return nil, fmt.Errorf("%w: %v in reply to an Initiate", ErrIllegalSequence, m.Function)
	}
	s.PeerPrivateData = pd
	if m.Function.Enhanced() {
		e := m.Enhanced
		s.PeerEnhanced = &e
		// "Upon receiving the MPA Accept Frame from the responder, the
		// initiator MUST set its IRD at least to the responder ORD and its
		// ORD at most to the responder IRD." (RFC 6581 §9.1)
		newORD, _, err := ddp.Settle(offer, e, ird, ord, nil)
		if err != nil && !errors.As(err, &fail) {
			return nil, fmt.Errorf("%w: %v", ErrIllegalSequence, err)
		}
		if err := setORD(s.ep, ord, newORD); err != nil && fail == nil {
			fail = localFailure(newORD, err)
		}
	} else if !s.cfg.Basic {
		return nil, fmt.Errorf("%w: a basic Accept answered an enhanced Initiate", ErrIllegalSequence)
	}
	return fail, nil
}

// abort ends a session that has just started because this end cannot
// meet the responder's IRD (RFC 6581 §9.1): "If the initiator does not
// have sufficient resources for the required IRD, it MUST send a TERM
// message to the responder indicating insufficient resources ... Layer 2,
// Error Type 0, Error Code 6." The endpoint sends that Terminate; the
// session then closes, and abort returns fail.
func (s *Session) abort(fail *term.Error) error {
	s.ep.Stream().Fail(fail)
	<-s.ep.Terminated()
	s.Close()
	return fail
}

// localFailure is the error a session ends with when this end cannot
// lower its ORD to the peer's IRD: "The initiator or responder MUST
// generate the TERM message that contains Layer 2, Error Type 0, Error
// Code 5 when it encounters any error locally for which the special
// Error Code is not defined in Section 8 before resetting the
// connection." (RFC 6581 §9.3) The session starts so that its endpoint
// can send that Terminate (abort).
func localFailure(newORD int, err error) *term.Error {
	return term.MPALocalCatastrophic.With("lowering the ORD to the peer's IRD %d: %v", newORD, err)
}

// setORD lowers the endpoint's ORD to what the negotiation settled on
// (RFC 6581 §9.1), if it changed.
func setORD(ep ddp.Endpoint, ord, newORD int) error {
	if newORD == ord {
		return nil
	}
	return ep.SetORD(newORD)
}
