package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/iwarpgo/iwarp/term"
)

// SessionRequest is a DDP Stream Session Initiate waiting for the ULP's
// decision (RFC 5043 §6.3: "Acceptance or rejection of DDP Stream Session
// Initiate messages SHOULD be under the control of the ULP").
type SessionRequest struct {
	st      MessageStream
	m       wire.SessionControl
	timeout time.Duration

	PrivateData []byte             // the initiator's Private Data
	Enhanced    *wire.EnhancedData // the initiator's IRD/ORD (RFC 6581), if any

	once     sync.Once
	release  func()      // gives back the SessionAcceptor's slot; nil if none
	expire   *time.Timer // refuses the request if Accept does not take it
	deadline time.Time   // when expire strikes
}

// Deadline returns when the SessionAcceptor refuses the request if
// Accept has not taken it (Config.AcceptTimeout after it came): a caller
// that holds it for its own application should not hold it longer.
func (r *SessionRequest) Deadline() time.Time { return r.deadline }

// giveBack releases the request's slot in its SessionAcceptor.
func (r *SessionRequest) giveBack() {
	if r.release != nil {
		r.release()
	}
}

// StreamID returns the SCTP Stream Identifier the peer chose.
func (r *SessionRequest) StreamID() uint16 { return r.st.ID() }

var errDecided = errors.New("sctpddp: the session request was already accepted or rejected")

// Accept accepts the session: it negotiates IRD and ORD (RFC 6581 §9.1),
// sends the Accept with privateData, and starts ep on the session.
func (r *SessionRequest) Accept(ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	err := errDecided
	var s *Session
	r.once.Do(func() {
		s, err = r.accept(ep, cfg)
		if err != nil {
			r.giveBack()
		}
	})
	return s, err
}

func (r *SessionRequest) accept(ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	s, err := newSession(r.st, ep, cfg)
	if err != nil {
		// The initiator hears that its request is over, as it does of
		// one the ULP does not decide (§6.4).
		terminateStream(r.st)
		return nil, err
	}
	s.PeerPrivateData, s.PeerEnhanced = r.PrivateData, r.Enhanced
	reply := wire.SessionControl{Function: wire.FunctionAccept, PrivateData: cfg.PrivateData}
	var fail *term.Error
	if e := r.Enhanced; e != nil {
		// RFC 6581 §9.1's negotiation, as MPA does it; a DDP Stream
		// Session has no RTR indication (its passive side may send once
		// it has accepted).
		ird, ord := ep.ReadLimits()
		out, newORD := ddp.Answer(*e, ird, ord, nil)
		if err := setORD(ep, ord, newORD); err != nil {
			fail = localFailure(newORD, err)
		}
		reply = wire.SessionControl{Function: wire.FunctionEnhancedAccept, Enhanced: out, PrivateData: cfg.PrivateData}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if _, err := r.st.WriteSessionControl(ctx, reply); err != nil {
		return nil, err
	}
	// The session holds the request's slot until it closes.
	s.release = r.release
	if err := s.start(); err != nil {
		s.release = nil
		// The Accept has gone: the session this end cannot run ends
		// with a Terminate, as one the active side gives up on does.
		sendTerminate(r.st)
		return nil, err
	}
	if fail != nil {
		return nil, s.abort(fail)
	}
	return s, nil
}

// Reject rejects the session with privateData (§6.3). IRD and ORD, when
// the initiator sent enhanced data, report this end's limits, as RFC 6581
// §9.1 asks.
func (r *SessionRequest) Reject(privateData []byte, ird, ord int) error {
	err := errDecided
	r.once.Do(func() {
		m := wire.SessionControl{Function: wire.FunctionReject, PrivateData: privateData}
		if r.Enhanced != nil {
			e, _ := ddp.Answer(*r.Enhanced, ird, ord, nil)
			m = wire.SessionControl{Function: wire.FunctionEnhancedReject, PrivateData: privateData, Enhanced: e}
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		_, err = r.st.WriteSessionControl(ctx, m)
		r.giveBack()
	})
	return err
}

// Terminate refuses the session without the ULP's decision: "A DDP
// Stream Session Reject message MUST NOT be sent unless the rejection is
// at the direction of the ULP." (RFC 5043 §6.3) It answers the Initiate
// with a DDP Stream Session Terminate, as §6.4 answers requests the ULP
// does not decide, and returns once the Terminate has been acknowledged
// (within the request's timeout), so that the association may be closed
// right after.
func (r *SessionRequest) Terminate() error {
	err := errDecided
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		_, err = r.st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate})
		if err == nil {
			// NewSession waits until every chunk sent is acknowledged.
			err = r.st.NewSession(ctx)
		}
		r.giveBack()
	})
	return err
}

// ReadInitiate reads the first message of a new DDP stream, which must be
// an Initiate with DDP-SSN 0 (RFC 5043 §6.1, §6.2), and returns it as a
// request for the ULP to accept or reject; timeout bounds the reply.
// Anything else is answered with a DDP Stream Session Terminate and an
// error.
func ReadInitiate(ctx context.Context, st MessageStream, timeout time.Duration) (*SessionRequest, error) {
	r, terminate, err := readInitiate(ctx, st, timeout)
	if terminate {
		terminateStream(st)
	}
	return r, err
}

// readInitiate is ReadInitiate, but leaves the Terminate to the caller:
// terminate reports that one is due.
func readInitiate(ctx context.Context, st MessageStream, timeout time.Duration) (r *SessionRequest, terminate bool, err error) {
	// As long as the longest message the stream carries, so that any
	// first message is read and answered: "If the adaptation layer
	// receives a Payload Data Chunk that conforms to none of the
	// enumerated legal patterns, the DDP Stream Session MUST be
	// terminated." (§6.1)
	buf := make([]byte, st.MULPDU()+wire.SSNLen)
	n, ppid, err := st.ReadMessage(ctx, buf)
	if err != nil {
		illegal := errors.Is(err, wire.ErrUnexpectedPPID) || errors.Is(err, wire.ErrSegmentTooLarge) || errors.Is(err, io.ErrShortBuffer)
		return nil, illegal, err
	}
	var m wire.SessionControl
	if ppid == wire.PPIDSessionControl {
		m, _, err = wire.ParseSessionControl(buf[:n])
	} else {
		err = fmt.Errorf("%w: a DDP Segment before the Initiate", ErrIllegalSequence)
	}
	if err == nil && (m.SSN != 0 || (m.Function != wire.FunctionInitiate && m.Function != wire.FunctionEnhancedInitiate)) {
		err = fmt.Errorf("%w: %v with DDP-SSN %d opens the session", ErrIllegalSequence, m.Function, m.SSN)
	}
	if err != nil {
		return nil, true, err
	}
	if err := st.NewSession(ctx); err != nil {
		return nil, false, err
	}
	r = &SessionRequest{st: st, m: m, timeout: timeout, PrivateData: append([]byte(nil), m.PrivateData...)}
	if m.Function.Enhanced() {
		e := m.Enhanced
		r.Enhanced = &e
	}
	return r, false, nil
}

// terminateStream answers a message that would start a session with a
// DDP Stream Session Terminate, as the first message of a new session
// (DDP-SSN 0).
func terminateStream(st MessageStream) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st.NewSession(ctx)
	st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate})
}

// controlTimeout bounds how long a DDP Stream Session Terminate that ends
// a session waits to be sent: for room in the send queue, and for the
// acknowledgement of the session's earlier control message (§6.6, see
// Chunker). pion retransmits a lost chunk after at least one second.
const controlTimeout = 3 * time.Second

// sendTerminate ends the session on st with a DDP Stream Session
// Terminate, the next DDP-SSN of the session.
func sendTerminate(st MessageStream) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate})
}
