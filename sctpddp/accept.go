//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// DefaultPendingSessions is how many session requests may wait for the
// ULP's decision at once.
const DefaultPendingSessions = 16

// SessionRequest is a DDP Stream Session Initiate waiting for the ULP's
// decision (RFC 5043 §6.3: "Acceptance or rejection of DDP Stream Session
// Initiate messages SHOULD be under the control of the ULP").
type SessionRequest struct {
	a  *Association
	st *Stream
	m  SessionControl

	PrivateData []byte        // the initiator's Private Data
	Enhanced    *EnhancedData // the initiator's IRD/ORD (RFC 6581), if any

	once sync.Once
}

// StreamID returns the SCTP Stream Identifier the peer chose.
func (r *SessionRequest) StreamID() uint16 { return r.st.ID() }

var errDecided = errors.New("sctpddp: the session request was already accepted or rejected")

// Accept accepts the session: it negotiates IRD and ORD (RFC 6581 §9.1),
// sends the Accept with privateData, and starts ep on the session.
func (r *SessionRequest) Accept(ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	err := errDecided
	var s *Session
	r.once.Do(func() { s, err = r.accept(ep, cfg) })
	return s, err
}

func (r *SessionRequest) accept(ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	s, err := newSession(r.a, r.st, ep, cfg)
	if err != nil {
		return nil, err
	}
	s.PeerPrivateData, s.PeerEnhanced = r.PrivateData, r.Enhanced
	reply := SessionControl{Function: FunctionAccept, PrivateData: cfg.PrivateData}
	if e := r.Enhanced; e != nil {
		ird, ord := ep.ReadLimits()
		out := EnhancedData{IRD: clamp14(ird), ORD: clamp14(ord)}
		// "The responder MUST respond to an initiator ORD value of 0x3FFF
		// by leaving its local endpoint IRD value unchanged and setting the
		// IRD to 0x3FFF in its reply message." Likewise for the IRD.
		if e.ORD == IRDORDNoNegotiation {
			out.IRD = IRDORDNoNegotiation
		}
		if e.IRD == IRDORDNoNegotiation {
			out.ORD = IRDORDNoNegotiation
		} else if int(e.IRD) < ord {
			// "The responder MUST set its ORD at most to the initiator
			// IRD."
			if err := ep.SetORD(int(e.IRD)); err != nil {
				return nil, err
			}
			out.ORD = e.IRD
		}
		reply = SessionControl{Function: FunctionEnhancedAccept, Enhanced: out, PrivateData: cfg.PrivateData}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.a.s.HandshakeTimeout)
	defer cancel()
	if _, err := r.st.WriteSessionControl(ctx, reply); err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reject rejects the session with privateData (§6.3). IRD and ORD, when
// the initiator sent enhanced data, report this end's limits, as RFC 6581
// §9.1 asks.
func (r *SessionRequest) Reject(privateData []byte, ird, ord int) error {
	err := errDecided
	r.once.Do(func() {
		m := SessionControl{Function: FunctionReject, PrivateData: privateData}
		if r.Enhanced != nil {
			m = SessionControl{Function: FunctionEnhancedReject, PrivateData: privateData,
				Enhanced: EnhancedData{IRD: clamp14(ird), ORD: clamp14(ord)}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.a.s.HandshakeTimeout)
		defer cancel()
		_, err = r.st.WriteSessionControl(ctx, m)
	})
	return err
}

// SessionAcceptor hands out the DDP Stream Session requests of one
// association.
type SessionAcceptor struct {
	a       *Association
	pending chan *SessionRequest
	wg      sync.WaitGroup
}

// Sessions starts accepting DDP Stream Sessions on the association, with
// at most pending requests waiting for a decision (DefaultPendingSessions
// if 0): "There MUST be a finite limit on the number of such requests
// that are pending a ULP decision. When more session requests are
// received, the passive side MUST respond to the Initiate message with a
// DDP Stream Terminate Message." (RFC 5043 §6.4). Call it once per
// association.
func (a *Association) Sessions(pending int) *SessionAcceptor {
	if pending <= 0 {
		pending = DefaultPendingSessions
	}
	sa := &SessionAcceptor{a: a, pending: make(chan *SessionRequest, pending)}
	sa.wg.Add(1)
	go sa.loop()
	return sa
}

// Accept returns the next session request.
func (sa *SessionAcceptor) Accept(ctx context.Context) (*SessionRequest, error) {
	select {
	case r := <-sa.pending:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-sa.a.Done():
		return nil, ErrClosed
	}
}

func (sa *SessionAcceptor) loop() {
	defer sa.wg.Done()
	for {
		st, err := sa.a.AcceptStream(context.Background())
		if err != nil {
			return
		}
		sa.wg.Add(1)
		go func() {
			defer sa.wg.Done()
			sa.initiate(st)
		}()
	}
}

// initiate reads a new stream's first message, which must be an
// Initiate with DDP-SSN 0 (§6.1, §6.2); anything else is answered with a
// DDP Stream Session Terminate.
func (sa *SessionAcceptor) initiate(st *Stream) {
	ctx, cancel := context.WithTimeout(context.Background(), sa.a.s.HandshakeTimeout)
	defer cancel()
	buf := make([]byte, MaxPrivateData+16)
	n, ppid, err := st.ReadMessage(ctx, buf)
	if errors.Is(err, ErrClosed) || errors.Is(err, context.DeadlineExceeded) && sa.closed() {
		return
	}
	var m SessionControl
	if err == nil && ppid == PPIDSessionControl {
		m, _, err = ParseSessionControl(buf[:n])
	} else if err == nil {
		err = fmt.Errorf("%w: a DDP Segment before the Initiate", ErrIllegalSequence)
	}
	if err == nil && (m.SSN != 0 || (m.Function != FunctionInitiate && m.Function != FunctionEnhancedInitiate)) {
		err = fmt.Errorf("%w: %v with DDP-SSN %d opens the session", ErrIllegalSequence, m.Function, m.SSN)
	}
	if err != nil {
		sa.terminate(st)
		return
	}
	if err := st.NewSession(ctx); err != nil {
		return
	}
	r := &SessionRequest{a: sa.a, st: st, m: m, PrivateData: append([]byte(nil), m.PrivateData...)}
	if m.Function.Enhanced() {
		e := m.Enhanced
		r.Enhanced = &e
	}
	select {
	case sa.pending <- r:
	default:
		sa.terminate(st)
	}
}

func (sa *SessionAcceptor) closed() bool {
	select {
	case <-sa.a.Done():
		return true
	default:
		return false
	}
}

func (sa *SessionAcceptor) terminate(st *Stream) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st.NewSession(ctx)
	st.WriteSessionControl(ctx, SessionControl{Function: FunctionTerminate})
}
