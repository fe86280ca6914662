package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// Limits and defaults of ChannelConfig.
const (
	// DefaultChannelSendQueueLimit caps the bytes a ChannelStream has
	// buffered in the channel (its buffered amount).
	DefaultChannelSendQueueLimit = 256 << 10
	// DefaultChannelReceiveQueueLimit caps the bytes received and not yet
	// read before the channel's message handler waits.
	DefaultChannelReceiveQueueLimit = 1 << 20
)

// Errors of the data-channel streams.
var (
	// ErrChannelClosed: the data channel or its PeerConnection closed.
	ErrChannelClosed = errors.New("sctpddp: data channel closed")
	// ErrReadInterrupted is returned by ChannelStream.ReadMessage after
	// InterruptRead.
	ErrReadInterrupted = errors.New("sctpddp: read interrupted")
)

// Channel is a WebRTC data channel as a ChannelStream uses it: pion's
// natively (package sctpddp/datachannel), the browser's RTCDataChannel in
// js/wasm.
type Channel interface {
	// Send queues one binary message; the channel copies it.
	Send(msg []byte) error
	// BufferedAmount returns the bytes queued and not yet sent (natively,
	// not yet acknowledged).
	BufferedAmount() uint64
	// Closing reports whether the channel is closing or closed.
	Closing() bool
}

// ChannelConfig configures a ChannelStream. The zero value takes the
// defaults.
type ChannelConfig struct {
	// MULPDU is the largest DDP Segment sent or accepted
	// (wire.MaxDataChannelMULPDU if 0; at least wire.MinMULPDU). Both ends
	// should use the same value.
	MULPDU int
	// SendQueueLimit caps the channel's buffered amount: writes block
	// while it would be exceeded (DefaultChannelSendQueueLimit if 0). It
	// is raised to two maximum-size messages and lowered to keep RFC 5043
	// §10's limit of 32767 unacknowledged chunks (MaxSendQueueLimit).
	SendQueueLimit int
	// ReceiveQueueLimit caps the bytes received and not yet read; above
	// it the channel's message handler (Receive) waits, which holds back
	// the sender through SCTP's receive window
	// (DefaultChannelReceiveQueueLimit if 0; at least one maximum-size
	// message). A negative value sets no cap, for a handler that must not
	// block (a browser's event handler).
	ReceiveQueueLimit int
}

func (c ChannelConfig) resolve() (mulpdu int, sendLimit uint64, recvLimit int, err error) {
	mulpdu = c.MULPDU
	if mulpdu == 0 {
		mulpdu = wire.MaxDataChannelMULPDU
	}
	if mulpdu < wire.MinMULPDU || mulpdu > wire.MaxDataChannelMULPDU {
		return 0, 0, 0, fmt.Errorf("sctpddp: data channel MULPDU %d outside [%d, %d]", mulpdu, wire.MinMULPDU, wire.MaxDataChannelMULPDU)
	}
	msg := mulpdu + wire.SSNLen
	send := c.SendQueueLimit
	if send <= 0 {
		send = DefaultChannelSendQueueLimit
	}
	send = min(max(send, 2*msg), MaxSendQueueLimit)
	recv := c.ReceiveQueueLimit
	switch {
	case recv < 0:
		recv = 0 // the queue's "no bound"
	case recv == 0:
		recv = DefaultChannelReceiveQueueLimit
	default:
		recv = max(recv, msg)
	}
	return mulpdu, uint64(send), recv, nil
}

// Check reports whether c's values are valid.
func (c ChannelConfig) Check() error {
	_, _, _, err := c.resolve()
	return err
}

// ChannelStream is a DDP stream over a WebRTC data channel: a
// MessageStream for the session layer, so that ConnectStream,
// ReadInitiate and SessionRequest work over it as over an SCTP stream
// pair. The data channel is an SCTP stream pair of the PeerConnection's
// association (RFC 8831), run by pion natively and by the browser in
// js/wasm; the code that owns the channel feeds its events to the
// ChannelStream (Opened, Closed, Receive, BufferedAmountLow).
//
// Each data-channel message is one of RFC 5043's Payload Data Chunks:
// the DDP-SSN (§5.2.1) followed by a DDP Segment (§5.2.2), or the DDP-SSN
// followed by a DDP Stream Session Control message (§5.2.3). Messages are
// numbered with DDP-SSNs in submission order (its Chunker).
//
// # Deviation from RFC 5043: the PPID is implied by the content
//
// §5.2 tells the two kinds of chunk apart by their PPID (16 and 17). A
// data channel sends every binary message with the WebRTC Binary PPID
// (53) and a browser offers no way to choose another, so on a data channel
// the kind is read from the message's third octet instead
// (wire.DataChannelPPID). WriteSegmentv refuses a DDP Segment whose DDP
// Version is not 01b (wire.ErrDataChannelFraming).
//
// Other differences from an Association's Stream: the association has no
// DDP Adaptation Indication (§5.1), as on a Stream, and it is shared with
// the application's other data channels; a channel is recognised by its
// DCEP protocol string, wire.DataChannelProtocol, and its stream
// identifier. In a browser, the buffered amount counts only the bytes not
// yet handed to the browser's SCTP stack, not those in flight, so there
// the send queue cap bounds the chunks unacknowledged (§10), and
// NewSession's and a session control message's waits for acknowledgement
// (§6.6), only as far as the browser's own SCTP send buffer does.
//
// # Use
//
// Writes may be called from several goroutines (they are serialised, so
// DDP-SSN order is submission order); reads must come from one goroutine
// at a time. ReadMessage returns the messages in the order Receive was
// called with them (order among unordered messages is arrival order,
// which DDP's placement by DDP-SSN does not depend on). Once the channel
// has closed (Closed), ReadMessage returns ErrChannelClosed after the
// messages received before are read, so a session on the stream ends and
// its endpoint flushes.
type ChannelStream struct {
	*Chunker
	ch     Channel
	id     uint16
	mulpdu int

	q         *messageQueue
	interrupt chan struct{} // 1-buffered: a pending InterruptRead
	opened    chan struct{} // closed when the channel opens
	openOnce  sync.Once
	closed    chan struct{} // closed when the channel closes
	closeOnce sync.Once
}

// NewChannelStream makes a DDP stream of the data channel ch, whose SCTP
// stream identifier is id. It starts as the channel does, connecting:
// call Opened when the channel opens and Closed when it closes.
func NewChannelStream(ch Channel, id uint16, cfg ChannelConfig) (*ChannelStream, error) {
	mulpdu, sendLimit, recvLimit, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &ChannelStream{
		ch:        ch,
		id:        id,
		mulpdu:    mulpdu,
		q:         newMessageQueue(recvLimit),
		interrupt: make(chan struct{}, 1),
		opened:    make(chan struct{}),
		closed:    make(chan struct{}),
	}
	s.Chunker = NewChunker(ChunkerConfig{
		MULPDU:         mulpdu,
		ImpliedPPID:    true,
		SendQueueLimit: sendLimit,
		Send:           s.send,
		Buffered:       ch.BufferedAmount,
		Ready:          s.waitOpen,
		Done:           s.closed,
		Err:            func() error { return ErrChannelClosed },
		Gone:           s.gone,
	})
	return s, nil
}

// SetReadyState tells the stream the channel's readyState ("connecting",
// "open", "closing" or "closed", as RTCDataChannel and pion name them)
// when the stream is made for a channel that may have opened or closed
// already.
func (s *ChannelStream) SetReadyState(state string) {
	switch state {
	case "open":
		s.Opened()
	case "closing", "closed":
		s.Closed()
	}
}

// Opened tells the stream that the channel has opened: writes may go.
func (s *ChannelStream) Opened() { s.openOnce.Do(func() { close(s.opened) }) }

// Closed tells the stream that the channel is closing or has closed:
// writes fail with ErrChannelClosed, and reads do once the messages
// already received are read.
func (s *ChannelStream) Closed() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.q.close(ErrChannelClosed)
	})
}

// Receive hands the stream one message the channel received, in the order
// the channel delivered them; the stream keeps msg (the caller must not
// reuse it). text says the channel delivered it as a text message, which
// is none of RFC 5043's chunks. Receive blocks while the stream holds
// ChannelConfig.ReceiveQueueLimit bytes or more, until the reader makes
// room or the channel closes (then msg is dropped and Receive returns
// false).
func (s *ChannelStream) Receive(msg []byte, text bool) bool {
	return s.q.put(msg, text, s.gone)
}

// gone reports whether the channel has closed or is closing, so that
// messages need no longer be kept.
func (s *ChannelStream) gone() bool {
	select {
	case <-s.closed:
		return true
	default:
	}
	return s.ch.Closing()
}

// ID returns the data channel's SCTP stream identifier.
func (s *ChannelStream) ID() uint16 { return s.id }

// MULPDU returns the largest DDP Segment the stream carries (RFC 5043 §9).
func (s *ChannelStream) MULPDU() int { return s.mulpdu }

// NewSession starts a new DDP Stream Session on the stream
// (Chunker.NewSession, once the channel is open) and discards an
// InterruptRead meant for the previous session.
func (s *ChannelStream) NewSession(ctx context.Context) error {
	if err := s.Chunker.NewSession(ctx); err != nil {
		return err
	}
	select {
	case <-s.interrupt:
	default:
	}
	return nil
}

// send hands one message to the channel, unless it is closing.
func (s *ChannelStream) send(_ context.Context, msg []byte, _ wire.PPID) error {
	if s.gone() {
		return ErrChannelClosed
	}
	if err := s.ch.Send(msg); err != nil {
		if s.gone() {
			return ErrChannelClosed
		}
		return fmt.Errorf("sctpddp: data channel %d: %w", s.id, err)
	}
	return nil
}

// waitOpen blocks until the channel is open.
func (s *ChannelStream) waitOpen(ctx context.Context) error {
	select {
	case <-s.opened:
		return nil
	default:
	}
	select {
	case <-s.opened:
		return nil
	case <-s.closed:
		return ErrChannelClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InterruptRead makes a blocked ReadMessage, or the next one, return
// ErrReadInterrupted.
func (s *ChannelStream) InterruptRead() { signal(s.interrupt) }

// ReadMessage reads one whole message into buf and returns its length and
// the PPID its content implies (wire.DataChannelPPID). A buf too short
// for the message gives io.ErrShortBuffer and keeps the message for the
// next call. A DDP Segment Chunk whose segment exceeds the MULPDU
// (wire.ErrSegmentTooLarge, RFC 5043 §9) and a text message
// (wire.ErrUnexpectedPPID) are consumed and reported. When the channel
// has closed and every message received before has been read, it returns
// ErrChannelClosed.
func (s *ChannelStream) ReadMessage(ctx context.Context, buf []byte) (int, wire.PPID, error) {
	m, err := s.q.peek(ctx, s.interrupt)
	if err != nil {
		return 0, 0, err
	}
	if m.text {
		// Not one of our chunks (its PPID was WebRTC String): the session
		// ends as for an unknown PPID.
		s.q.pop()
		return 0, 0, fmt.Errorf("%w: a text message on data channel %d", wire.ErrUnexpectedPPID, s.id)
	}
	msg := m.data
	ppid := wire.DataChannelPPID(msg)
	if len(buf) < len(msg) {
		return len(msg), ppid, io.ErrShortBuffer
	}
	n := copy(buf, msg)
	s.q.pop()
	if ppid == wire.PPIDSegment && n >= wire.SSNLen {
		// RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments
		// that are larger than the maximum size specified."
		if err := wire.CheckSegmentSize(n-wire.SSNLen, s.mulpdu); err != nil {
			return n, ppid, err
		}
	}
	return n, ppid, nil
}
