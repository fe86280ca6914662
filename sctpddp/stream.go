//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pion/sctp"
)

// ErrSSNOutOfOrder is returned by WriteMessage for a message whose DDP-SSN
// is not the stream's next one.
var ErrSSNOutOfOrder = errors.New("sctpddp: DDP-SSN out of submission order")

// Stream is one DDP stream: the outbound and inbound SCTP streams with one
// Stream Identifier. It sends every message as an unordered, reliable DATA
// chunk (RFC 5043 §10: "The adaptation layer MUST use the Unordered option
// on all Data Chunks (U Flag set to one).") and numbers the messages with
// DDP-SSNs in submission order.
//
// Writes may be called from several goroutines; they are serialised, so
// DDP-SSN order is submission order. Reads must come from one goroutine at
// a time.
type Stream struct {
	a *Association
	s *sctp.Stream

	wmu  sync.Mutex // serialises writes; guards the fields below
	next SSN        // DDP-SSN of the next message
	buf  []byte     // encoding buffer (pion copies what it sends)
	room sendRoom   // the send queue cap (RFC 5043 §10)
}

func newStream(a *Association, st *sctp.Stream) *Stream {
	st.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
	s := &Stream{a: a, s: st}
	s.room = sendRoom{limit: a.s.sendQueueLimit, buffered: st.BufferedAmount, low: make(chan struct{}, 1),
		closed: a.closed, closedErr: ErrClosed}
	st.SetBufferedAmountLowThreshold(s.room.limit / 2)
	st.OnBufferedAmountLow(func() { signal(s.room.low) })
	return s
}

// ID returns the SCTP Stream Identifier.
func (s *Stream) ID() uint16 { return s.s.StreamIdentifier() }

// NextSSN returns the DDP-SSN the next message will carry.
func (s *Stream) NextSSN() SSN {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.next
}

// BufferedAmount returns the bytes queued or in flight, not yet
// acknowledged by the peer.
func (s *Stream) BufferedAmount() uint64 { return s.s.BufferedAmount() }

// NewSession starts a new DDP Stream Session on the stream: it waits until
// every Data Chunk of the previous session has been acknowledged (§6.6: "A
// DDP Stream Identifier MUST NOT be reused for another DDP Stream Session
// while any Data Chunk from a prior session might be outstanding.") and
// resets the DDP-SSN (§6.1: "The DDP-SSN is reset to zero at the beginning
// of each DDP Stream Session.").
func (s *Stream) NewSession(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.room.waitEmpty(ctx); err != nil {
		return err
	}
	s.next = 0
	return nil
}

// WriteSegment sends one DDP Segment (DDP Header and payload) as a DDP
// Segment Chunk with the next DDP-SSN, and returns that DDP-SSN. It blocks
// while the stream's send queue is full. The segment is copied; seg may be
// reused when WriteSegment returns.
func (s *Stream) WriteSegment(ctx context.Context, seg []byte) (SSN, error) {
	// RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments
	// that are larger than the maximum size specified."
	if err := CheckSegmentSize(len(seg), s.a.s.mulpdu); err != nil {
		return 0, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ssn := s.next
	s.buf = SegmentChunk{SSN: ssn, Segment: seg}.Append(s.buf[:0])
	if _, _, err := ParseSegmentChunk(s.buf); err != nil {
		return 0, err
	}
	if err := s.send(ctx, PPIDSegment, s.buf); err != nil {
		return 0, err
	}
	return ssn, nil
}

// WriteSegmentv is WriteSegment for a segment given as its DDP header and
// payload slices (ddp.LLP's gather write): they are copied once, into the
// stream's encoding buffer, which pion copies again into its chunks.
func (s *Stream) WriteSegmentv(ctx context.Context, hdr []byte, payload [][]byte) (SSN, error) {
	n := segmentLen(hdr, payload)
	if err := CheckSegmentSize(n, s.a.s.mulpdu); err != nil {
		return 0, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ssn := s.next
	b := appendSegmentChunk(s.buf[:0], ssn, hdr, payload)
	s.buf = b
	if err := s.send(ctx, PPIDSegment, b); err != nil {
		return 0, err
	}
	return ssn, nil
}

// InterruptRead makes a blocked or later ReadMessage return at once.
func (s *Stream) InterruptRead() { _ = s.s.SetReadDeadline(time.Now()) }

// MULPDU returns the association's MULPDU.
func (s *Stream) MULPDU() int { return s.a.s.mulpdu }

// WriteSessionControl sends a DDP Stream Session Control message with the
// next DDP-SSN (m.SSN is ignored) and returns that DDP-SSN.
func (s *Stream) WriteSessionControl(ctx context.Context, m SessionControl) (SSN, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m.SSN = s.next
	if err := m.Validate(); err != nil {
		return 0, err
	}
	s.buf = m.Append(s.buf[:0])
	if err := s.send(ctx, PPIDSessionControl, s.buf); err != nil {
		return 0, err
	}
	return m.SSN, nil
}

// WriteMessage sends an already encoded message with its PPID: a DDP
// Segment Chunk (PPID 16) or a DDP Stream Session Control message (PPID
// 17). The message is checked as the codecs check it, its DDP Segment
// against the MULPDU, and its DDP-SSN must be the stream's next one (§6:
// "The DDP-SSNs assigned to the Data Chunks for a session MUST NOT have
// any gaps.").
func (s *Stream) WriteMessage(ctx context.Context, ppid PPID, msg []byte) error {
	var ssn SSN
	switch ppid {
	case PPIDSegment:
		c, _, err := ParseSegmentChunk(msg)
		if err != nil {
			return err
		}
		if err := CheckSegmentSize(len(c.Segment), s.a.s.mulpdu); err != nil {
			return err
		}
		ssn = c.SSN
	case PPIDSessionControl:
		m, _, err := ParseSessionControl(msg)
		if err != nil {
			return err
		}
		ssn = m.SSN
	default:
		// RFC 5043 §5.1: "An SCTP Association that has had the DDP
		// Adaptation Indication negotiated will carry only SCTP Data
		// Chunks as defined in this document."
		return fmt.Errorf("%w: %v", ErrUnexpectedPPID, ppid)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if ssn != s.next {
		return fmt.Errorf("%w: message has %d, next is %d", ErrSSNOutOfOrder, ssn, s.next)
	}
	return s.send(ctx, ppid, msg)
}

// send waits for room and queues msg; on success it advances the DDP-SSN.
// The caller holds wmu.
func (s *Stream) send(ctx context.Context, ppid PPID, msg []byte) error {
	control := ppid == PPIDSessionControl
	if err := s.room.waitRoom(ctx, len(msg), control); err != nil {
		if errors.Is(err, ErrClosed) {
			return s.a.Err()
		}
		return err
	}
	if _, err := s.s.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(ppid)); err != nil {
		return s.writeErr(err)
	}
	s.next = s.next.Next()
	s.room.sent(control)
	return nil
}

func (s *Stream) writeErr(err error) error {
	select {
	case <-s.a.closed:
		return s.a.Err()
	default:
	}
	return fmt.Errorf("sctpddp: stream %d: %w", s.ID(), err)
}

// ReadMessage reads one whole message into buf and returns its length and
// PPID. A buf too short for the message gives io.ErrShortBuffer and keeps
// the message for the next call. Messages whose PPID is not 16 or 17
// (ErrUnexpectedPPID) and DDP Segment Chunks whose segment exceeds the
// MULPDU (ErrSegmentTooLarge, RFC 5043 §9) are consumed and reported. At
// the end of the association it returns Association.Err (which is
// ErrClosed and names the cause), or io.EOF. ctx can interrupt the read.
func (s *Stream) ReadMessage(ctx context.Context, buf []byte) (int, PPID, error) {
	var interrupted chan struct{}
	var stop func() bool
	if ctx.Done() != nil {
		interrupted = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			_ = s.s.SetReadDeadline(time.Now())
			close(interrupted)
		})
	}
	n, ppi, err := s.s.ReadSCTP(buf)
	if stop != nil && !stop() {
		// ctx ended: undo the deadline so that later reads work.
		<-interrupted
		_ = s.s.SetReadDeadline(time.Time{})
		if err != nil && !errors.Is(err, io.ErrShortBuffer) {
			return 0, 0, ctx.Err()
		}
	}
	if err != nil {
		if errors.Is(err, io.ErrShortBuffer) {
			return n, PPID(ppi), err
		}
		select {
		case <-s.a.closed:
			return 0, 0, s.a.Err()
		case <-s.a.ended:
			// SCTP ended by itself; the monitor is ending the
			// association and names the cause.
			<-s.a.closed
			return 0, 0, s.a.Err()
		default:
		}
		return 0, 0, err
	}
	ppid := PPID(ppi)
	switch ppid {
	case PPIDSegment:
		if n >= SSNLen {
			if err := CheckSegmentSize(n-SSNLen, s.a.s.mulpdu); err != nil {
				return n, ppid, err
			}
		}
	case PPIDSessionControl:
	default:
		return n, ppid, fmt.Errorf("%w: %v", ErrUnexpectedPPID, ppid)
	}
	return n, ppid, nil
}

// Close resets the outbound SCTP stream (RFC 6525); the association stays
// open.
func (s *Stream) Close() error { return s.s.Close() }
