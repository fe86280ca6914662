//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// Stream is one DDP stream: the outbound and inbound SCTP streams with one
// Stream Identifier. It sends every message as an unordered, reliable DATA
// chunk (RFC 5043 §10: "The adaptation layer MUST use the Unordered option
// on all Data Chunks (U Flag set to one).") and numbers the messages with
// DDP-SSNs in submission order (its Chunker).
//
// Writes may be called from several goroutines; they are serialised, so
// DDP-SSN order is submission order. Reads must come from one goroutine at
// a time.
type Stream struct {
	*Chunker
	a *Association
	s sctpStream
}

func newStream(a *Association, st sctpStream) *Stream {
	s := &Stream{a: a, s: st}
	cfg := ChunkerConfig{
		MULPDU:         a.s.mulpdu,
		SendQueueLimit: a.s.sendQueueLimit,
		Send:           s.writeSCTP,
		Buffered:       st.BufferedAmount,
		Done:           a.closed,
		Err:            a.Err,
	}
	if o, ok := a.sctp.(ownAssociation); ok {
		// The association's send window follows the path; unless
		// Config.SendQueueLimit says otherwise, a stream may use all
		// of it, its messages counted for RFC 5043 §10.
		cfg.Window, cfg.Unacked = o.sendWindow, st.(ownStream).unacked
		cfg.Sendv = s.writevSCTP
		if a.s.SendQueueLimit <= 0 {
			cfg.SendQueueLimit = uint64(a.s.MaxWindow)
		}
	}
	s.Chunker = NewChunker(cfg)
	st.SetBufferedAmountLowThreshold(s.SendQueueLimit() / 2)
	st.OnBufferedAmountLow(s.BufferedAmountLow)
	return s
}

// ID returns the SCTP Stream Identifier.
func (s *Stream) ID() uint16 { return s.s.ID() }

// MULPDU returns the association's MULPDU.
func (s *Stream) MULPDU() int { return s.a.s.mulpdu }

// BufferedAmount returns the bytes queued or in flight, not yet
// acknowledged by the peer.
func (s *Stream) BufferedAmount() uint64 { return s.s.BufferedAmount() }

// WriteSegment sends one DDP Segment (DDP Header and payload) as a DDP
// Segment Chunk with the next DDP-SSN, and returns that DDP-SSN. The
// segment must be at least as long as its DDP Header (wire.CheckSegment).
// It blocks while the stream's send queue is full. The segment is copied;
// seg may be reused when WriteSegment returns.
func (s *Stream) WriteSegment(ctx context.Context, seg []byte) (wire.SSN, error) {
	if err := wire.CheckSegmentSize(len(seg), s.a.s.mulpdu); err != nil {
		return 0, err
	}
	if err := wire.CheckSegment(seg); err != nil {
		return 0, err
	}
	return s.WriteSegmentv(ctx, seg, nil)
}

// writeSCTP queues one message on the outbound SCTP stream, which copies
// it.
func (s *Stream) writeSCTP(ctx context.Context, msg []byte, ppid wire.PPID) error {
	if err := s.s.Write(ctx, msg, ppid); err != nil {
		return s.writeErr(err)
	}
	return nil
}

// writeErr is what a failed write returns: the association's error once
// it has ended, or err.
func (s *Stream) writeErr(err error) error {
	select {
	case <-s.a.closed:
		return s.a.Err()
	default:
	}
	return fmt.Errorf("sctpddp: stream %d: %w", s.ID(), err)
}

// writevSCTP queues one message, given as slices, on the outbound stream
// of package sctp's association, which gathers them into its own buffer.
func (s *Stream) writevSCTP(ctx context.Context, parts [][]byte, ppid wire.PPID) error {
	if err := s.s.(ownStream).Writev(ctx, parts, ppid); err != nil {
		return s.writeErr(err)
	}
	return nil
}

// InterruptRead makes a blocked or later ReadMessage return at once.
func (s *Stream) InterruptRead() { _ = s.s.SetReadDeadline(time.Now()) }

// ReadMessage reads one whole message into buf and returns its length and
// PPID. A buf too short for the message gives io.ErrShortBuffer and keeps
// the message for the next call. Messages whose PPID is not 16 or 17
// (wire.ErrUnexpectedPPID) and DDP Segment Chunks whose segment exceeds the
// MULPDU (wire.ErrSegmentTooLarge, RFC 5043 §9) are consumed and reported. At
// the end of the association it returns Association.Err (which is
// ErrClosed and names the cause), or io.EOF. ctx can interrupt the read.
func (s *Stream) ReadMessage(ctx context.Context, buf []byte) (int, wire.PPID, error) {
	var interrupted chan struct{}
	var stop func() bool
	if ctx.Done() != nil {
		interrupted = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			_ = s.s.SetReadDeadline(time.Now())
			close(interrupted)
		})
	}
	n, ppid, err := s.s.Read(buf)
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
			return n, ppid, err
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
		if s.a.sctp.Cause() != nil {
			// The same, seen by the stream before the acceptor.
			<-s.a.closed
			return 0, 0, s.a.Err()
		}
		return 0, 0, err
	}
	switch ppid {
	case wire.PPIDSegment:
		if n >= wire.SSNLen {
			if err := wire.CheckSegmentSize(n-wire.SSNLen, s.a.s.mulpdu); err != nil {
				return n, ppid, err
			}
		}
	case wire.PPIDSessionControl:
	default:
		return n, ppid, fmt.Errorf("%w: %v", wire.ErrUnexpectedPPID, ppid)
	}
	return n, ppid, nil
}

// drain reads the retired stream r.st after its session has ended, until
// nothing has come on it for Config.RetiredStreamTimeout, another retired
// stream needs its room (Association.retire) or the association ends:
// chunks of that session still arriving are discarded, and an Initiate,
// which would start another session on the stream, is answered with a
// DDP Stream Session Terminate. "A DDP Stream Identifier MUST NOT be
// reused for another DDP Stream Session while any Data Chunk from a prior
// session might be outstanding." (RFC 5043 §6.6) Refusing the request is
// not the ULP's decision, so the answer is §6.4's: "the passive side MUST
// respond to the Initiate message with a DDP Stream Terminate Message".
// Nothing else is answered, so that two retired ends never answer each
// other. A message too long for any Initiate is read into the
// association's scratch buffer, not one of its own.
func (a *Association) drain(r *retiredReader) {
	s := r.st
	quiet := a.s.RetiredStreamTimeout
	// arm sets the read deadline to the end of the quiet period (which
	// also undoes the InterruptRead that ended the session's reads), and
	// reports whether the reader may go on. The deadline is set before
	// evicted is checked, and evictQuiet sets evicted before it
	// interrupts the read: an eviction is never overwritten unseen.
	arm := func() bool {
		deadline := time.Time{}
		if quiet > 0 {
			deadline = time.Unix(0, r.last.Load()).Add(quiet)
		}
		_ = s.s.SetReadDeadline(deadline)
		return !r.evicted.Load()
	}
	// A read deadline holds a timer until it strikes: cancel it when the
	// reader stops.
	defer func() { _ = s.s.SetReadDeadline(time.Time{}) }()
	if !arm() {
		return
	}
	buf := make([]byte, wire.MaxSessionControlLen) // any legal Initiate
	for {
		n, ppid, err := s.ReadMessage(context.Background(), buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The stream has been quiet for the quiet period, or
			// evictQuiet stopped the reader, or the InterruptRead's
			// deadline struck after it was undone.
			if r.evicted.Load() || quiet > 0 && time.Since(time.Unix(0, r.last.Load())) >= quiet {
				return
			}
			if !arm() {
				return
			}
			continue
		}
		r.last.Store(time.Now().UnixNano())
		switch {
		case errors.Is(err, io.ErrShortBuffer):
			// Longer than any Initiate: read it to discard it.
			err = a.discard(s, n)
		case err == nil && ppid == wire.PPIDSessionControl:
			m, _, perr := wire.ParseSessionControl(buf[:n])
			if perr == nil && (m.Function == wire.FunctionInitiate || m.Function == wire.FunctionEnhancedInitiate) {
				terminateStream(s)
			}
		}
		if err != nil && !errors.Is(err, wire.ErrUnexpectedPPID) && !errors.Is(err, wire.ErrSegmentTooLarge) && !errors.Is(err, os.ErrDeadlineExceeded) {
			return // the association has ended
		}
		if !arm() {
			return
		}
	}
}

// Close resets the outbound SCTP stream (RFC 6525); the association stays
// open. Only pion/sctp's association (Config.PionSCTP) resets streams;
// over the default one Close returns an error and changes nothing.
func (s *Stream) Close() error { return s.s.Reset() }
