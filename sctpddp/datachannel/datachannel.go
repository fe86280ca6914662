package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/pion/webrtc/v4"
)

// DataChannelProtocol is the subprotocol string (RFC 8832's DCEP Protocol
// field, DataChannelInit.Protocol) that marks a WebRTC data channel as a
// DDP stream carrying RFC 5043's chunks.
const DataChannelProtocol = "iwarp-ddp"

// Limits and defaults of DataChannelConfig.
const (
	// MaxDataChannelMULPDU is the largest DDP Segment a data channel
	// carries: a 64 KiB message (pion's default largest SCTP message, and
	// well below Chromium's 256 KiB) less the DDP-SSN.
	MaxDataChannelMULPDU = 64<<10 - SSNLen
	// DefaultDataChannelSendQueueLimit caps the bytes a DataChannelStream
	// has buffered in the channel (BufferedAmount).
	DefaultDataChannelSendQueueLimit = 256 << 10
	// DefaultDataChannelReceiveQueueLimit caps the bytes received and not
	// yet read before the channel's read loop waits.
	DefaultDataChannelReceiveQueueLimit = 1 << 20
)

// Errors of the data-channel transport.
var (
	// ErrDataChannelClosed: the data channel or its PeerConnection closed.
	ErrDataChannelClosed = errors.New("sctpddp: data channel closed")
	// ErrNotDDPDataChannel: the channel was not made as NewDataChannelInit
	// makes one.
	ErrNotDDPDataChannel = errors.New("sctpddp: not a DDP data channel")
	// ErrDataChannelFraming: a DDP Segment whose DDP Version is not 01b,
	// which the peer could not tell from session control.
	ErrDataChannelFraming = errors.New("sctpddp: DDP Segment without DDP Version 01b cannot be framed on a data channel")
)

// DataChannelConfig configures a DataChannelStream. The zero value takes
// the defaults.
type DataChannelConfig struct {
	// MULPDU is the largest DDP Segment sent or accepted
	// (MaxDataChannelMULPDU if 0; at least MinMULPDU). Both ends should
	// use the same value.
	MULPDU int
	// SendQueueLimit caps the channel's BufferedAmount: writes block
	// while it would be exceeded (DefaultDataChannelSendQueueLimit if 0).
	// It is raised to two maximum-size messages and lowered to keep RFC
	// 5043 §10's limit of 32767 unacknowledged chunks.
	SendQueueLimit int
	// ReceiveQueueLimit caps the bytes received and not yet read; above
	// it the channel's read loop waits, which holds back the sender
	// through SCTP's receive window (DefaultDataChannelReceiveQueueLimit
	// if 0; at least one maximum-size message).
	ReceiveQueueLimit int
}

func (c DataChannelConfig) resolve() (mulpdu int, sendLimit uint64, recvLimit int, err error) {
	mulpdu = c.MULPDU
	if mulpdu == 0 {
		mulpdu = MaxDataChannelMULPDU
	}
	if mulpdu < MinMULPDU || mulpdu > MaxDataChannelMULPDU {
		return 0, 0, 0, fmt.Errorf("sctpddp: data channel MULPDU %d outside [%d, %d]", mulpdu, MinMULPDU, MaxDataChannelMULPDU)
	}
	msg := mulpdu + SSNLen
	send := c.SendQueueLimit
	if send <= 0 {
		send = DefaultDataChannelSendQueueLimit
	}
	send = min(max(send, 2*msg), maxSendQueueLimit)
	recv := c.ReceiveQueueLimit
	if recv <= 0 {
		recv = DefaultDataChannelReceiveQueueLimit
	}
	recv = max(recv, msg)
	return mulpdu, uint64(send), recv, nil
}

// NewDataChannelInit returns the options of a DDP data channel with stream
// identifier id: negotiated out of band (both peers create it with the
// same id, and no DCEP exchange is needed), unordered (RFC 5043 §10: "The
// adaptation layer MUST use the Unordered option on all Data Chunks"),
// reliable (neither MaxRetransmits nor MaxPacketLifeTime), and marked with
// DataChannelProtocol.
func NewDataChannelInit(id uint16) *webrtc.DataChannelInit {
	ordered, negotiated := false, true
	protocol := DataChannelProtocol
	return &webrtc.DataChannelInit{
		Ordered:    &ordered,
		Negotiated: &negotiated,
		ID:         &id,
		Protocol:   &protocol,
	}
}

// CreateDataChannel creates the DDP data channel with stream identifier id
// on pc (see NewDataChannelInit) and returns it as a DataChannelStream.
// The peer does the same with the same id. Call it before the channel
// can open (before the SDP exchange, or at once on a connected pc), so
// that no message arrives before the stream listens.
func CreateDataChannel(pc *webrtc.PeerConnection, id uint16, cfg DataChannelConfig) (*DataChannelStream, error) {
	if _, _, _, err := cfg.resolve(); err != nil {
		return nil, err
	}
	dc, err := pc.CreateDataChannel(DataChannelProtocol, NewDataChannelInit(id))
	if err != nil {
		return nil, err
	}
	s, err := NewDataChannelStream(dc, cfg)
	if err != nil {
		_ = dc.Close()
		return nil, err
	}
	return s, nil
}

// DataChannelStream is a DDP stream over a WebRTC data channel
// (pion/webrtc/v4): a MessageStream for the session layer, so that
// ConnectStream, ReadInitiate and SessionRequest work over it as over an
// SCTP Stream. The data channel is an SCTP stream pair of the
// PeerConnection's association (RFC 8831), run by pion natively and by
// the browser in js/wasm.
//
// Each data-channel message is one of RFC 5043's Payload Data Chunks:
// the DDP-SSN (§5.2.1) followed by a DDP Segment (§5.2.2), or the DDP-SSN
// followed by a DDP Stream Session Control message (§5.2.3). Messages are
// numbered with DDP-SSNs in submission order.
//
// # Deviation from RFC 5043: the PPID is implied by the content
//
// §5.2 tells the two kinds of chunk apart by their PPID (16 and 17). A
// data channel sends every binary message with the WebRTC Binary PPID
// (53) and a browser offers no way to choose another, so on a data channel
// the kind is read from the message's third octet instead: 0x00 (the high
// octet of a Function Code, whose defined values are 1 to 7) is session
// control; anything else is the DDP Control Field of a DDP Segment, whose
// DDP Version bits are 01b, so never 0x00. See DataChannelPPID.
// WriteSegmentv refuses a DDP Segment whose DDP Version is not 01b.
//
// Other differences from an Association's Stream: the association has no
// DDP Adaptation Indication (§5.1), as on a Stream, and it is shared with
// the application's other data channels; a channel is recognised by its
// DCEP protocol string, DataChannelProtocol, and its fixed stream
// identifier. In a browser, BufferedAmount counts only the bytes not yet
// handed to the browser's SCTP stack, not those in flight, so there the
// send queue cap bounds the chunks unacknowledged (§10) and NewSession's
// wait for acknowledgement (§6.6) only as far as the browser's own SCTP
// send buffer does.
//
// # Use
//
// The stream installs the channel's OnOpen, OnClose, OnMessage and
// OnBufferedAmountLow handlers; the application must not replace them.
// Writes may be called from several goroutines (they are serialised, so
// DDP-SSN order is submission order); reads must come from one goroutine
// at a time. ReadMessage returns the messages in the order the channel's
// OnMessage handler received them: pion calls it from one read loop per
// channel, in arrival order (order among unordered messages is arrival
// order, which DDP's placement by DDP-SSN does not depend on). Closing
// the channel (Close, or the channel's own Close) or its PeerConnection
// makes ReadMessage return an error once the messages received before are
// read, so a session on the stream ends and its endpoint flushes.
type DataChannelStream struct {
	dc     *webrtc.DataChannel
	id     uint16
	mulpdu int

	q         *messageQueue
	interrupt chan struct{} // 1-buffered: a pending InterruptRead
	low       chan struct{} // signalled by OnBufferedAmountLow
	opened    chan struct{} // closed when the channel opens
	openOnce  sync.Once
	closed    chan struct{} // closed when the channel closes
	closeOnce sync.Once

	wmu  sync.Mutex // serialises writes; guards the fields below
	next SSN        // DDP-SSN of the next message
	buf  []byte     // encoding buffer (the channel copies what it sends)
	room sendRoom   // the send queue cap (RFC 5043 §10)
}

// NewDataChannelStream makes dc, a DDP data channel (see
// NewDataChannelInit; negotiated or announced by DCEP), a
// DataChannelStream. dc must be unordered, reliable, carry
// DataChannelProtocol and have its stream identifier, and no message may
// have arrived on it yet: wrap it before it opens, or in the
// PeerConnection's OnDataChannel callback.
func NewDataChannelStream(dc *webrtc.DataChannel, cfg DataChannelConfig) (*DataChannelStream, error) {
	mulpdu, sendLimit, recvLimit, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	switch {
	case dc.Protocol() != DataChannelProtocol:
		return nil, fmt.Errorf("%w: protocol %q, want %q", ErrNotDDPDataChannel, dc.Protocol(), DataChannelProtocol)
	case dc.Ordered():
		return nil, fmt.Errorf("%w: ordered (RFC 5043 §10 requires unordered delivery)", ErrNotDDPDataChannel)
	case dc.MaxRetransmits() != nil || dc.MaxPacketLifeTime() != nil:
		return nil, fmt.Errorf("%w: partially reliable (DDP needs a reliable LLP)", ErrNotDDPDataChannel)
	case dc.ID() == nil:
		return nil, fmt.Errorf("%w: no stream identifier yet", ErrNotDDPDataChannel)
	}
	s := &DataChannelStream{
		dc:        dc,
		id:        *dc.ID(),
		mulpdu:    mulpdu,
		q:         newMessageQueue(recvLimit),
		interrupt: make(chan struct{}, 1),
		opened:    make(chan struct{}),
		closed:    make(chan struct{}),
	}
	s.room = sendRoom{limit: sendLimit, buffered: dc.BufferedAmount, low: make(chan struct{}, 1),
		closed: s.closed, gone: s.channelGone, closedErr: ErrDataChannelClosed}
	dc.SetBufferedAmountLowThreshold(sendLimit / 2)
	dc.OnBufferedAmountLow(func() { signal(s.room.low) })
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		s.q.put(m.Data, m.IsString, s.channelGone)
	})
	dc.OnOpen(s.markOpen)
	dc.OnClose(func() { s.markClosed(ErrDataChannelClosed) })
	switch dc.ReadyState() {
	case webrtc.DataChannelStateOpen:
		s.markOpen()
	case webrtc.DataChannelStateClosing, webrtc.DataChannelStateClosed:
		s.markClosed(ErrDataChannelClosed)
	}
	return s, nil
}

func (s *DataChannelStream) markOpen() { s.openOnce.Do(func() { close(s.opened) }) }

func (s *DataChannelStream) markClosed(err error) {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.q.close(err)
	})
}

// channelGone reports whether the channel has closed or is closing (its
// PeerConnection closed, or Close was called), so that messages need no
// longer be kept.
func (s *DataChannelStream) channelGone() bool {
	select {
	case <-s.closed:
		return true
	default:
	}
	st := s.dc.ReadyState()
	return st == webrtc.DataChannelStateClosing || st == webrtc.DataChannelStateClosed
}

// DataChannel returns the underlying data channel.
func (s *DataChannelStream) DataChannel() *webrtc.DataChannel { return s.dc }

// ID returns the data channel's SCTP stream identifier.
func (s *DataChannelStream) ID() uint16 { return s.id }

// MULPDU returns the largest DDP Segment the stream carries (RFC 5043 §9).
func (s *DataChannelStream) MULPDU() int { return s.mulpdu }

// NextSSN returns the DDP-SSN the next message will carry.
func (s *DataChannelStream) NextSSN() SSN {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.next
}

// BufferedAmount returns the channel's buffered amount: natively, the
// bytes queued or in flight, not yet acknowledged by the peer.
func (s *DataChannelStream) BufferedAmount() uint64 { return s.dc.BufferedAmount() }

// Close closes the data channel. ReadMessage returns the messages already
// received, then ErrDataChannelClosed; blocked writes return
// ErrDataChannelClosed.
func (s *DataChannelStream) Close() error {
	s.markClosed(ErrDataChannelClosed)
	return s.dc.Close()
}

// NewSession starts a new DDP Stream Session on the stream: it waits until
// the channel is open and every message of the previous session has been
// acknowledged (§6.6: "A DDP Stream Identifier MUST NOT be reused for
// another DDP Stream Session while any Data Chunk from a prior session
// might be outstanding."), resets the DDP-SSN (§6.1: "The DDP-SSN is reset
// to zero at the beginning of each DDP Stream Session.") and discards an
// InterruptRead meant for the previous session.
func (s *DataChannelStream) NewSession(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.waitOpen(ctx); err != nil {
		return err
	}
	if err := s.room.waitEmpty(ctx); err != nil {
		return err
	}
	s.next = 0
	select {
	case <-s.interrupt:
	default:
	}
	return nil
}

// WriteSegmentv sends one DDP Segment, its DDP Header hdr and payload
// slices, as one message with the next DDP-SSN, and returns that DDP-SSN.
// It blocks while the channel's buffered amount is at the cap, until ctx
// ends. The slices are copied; they may be reused when it returns.
func (s *DataChannelStream) WriteSegmentv(ctx context.Context, hdr []byte, payload [][]byte) (SSN, error) {
	n := segmentLen(hdr, payload)
	// RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments
	// that are larger than the maximum size specified."
	if err := CheckSegmentSize(n, s.mulpdu); err != nil {
		return 0, err
	}
	if len(hdr) == 0 || !validDataChannelSegment(hdr[0]) {
		return 0, ErrDataChannelFraming
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ssn := s.next
	b := appendSegmentChunk(s.buf[:0], ssn, hdr, payload)
	s.buf = b
	if err := s.send(ctx, b, false); err != nil {
		return 0, err
	}
	return ssn, nil
}

// WriteSessionControl sends a DDP Stream Session Control message with the
// next DDP-SSN (m.SSN is ignored) and returns that DDP-SSN.
func (s *DataChannelStream) WriteSessionControl(ctx context.Context, m SessionControl) (SSN, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m.SSN = s.next
	if err := m.Validate(); err != nil {
		return 0, err
	}
	s.buf = m.Append(s.buf[:0])
	if err := s.send(ctx, s.buf, true); err != nil {
		return 0, err
	}
	return m.SSN, nil
}

// send waits for the channel to open and for room, and sends msg; on
// success it advances the DDP-SSN. The caller holds wmu.
func (s *DataChannelStream) send(ctx context.Context, msg []byte, control bool) error {
	if err := s.waitOpen(ctx); err != nil {
		return err
	}
	if err := s.room.waitRoom(ctx, len(msg), control); err != nil {
		return err
	}
	if err := s.dc.Send(msg); err != nil {
		if s.channelGone() {
			return ErrDataChannelClosed
		}
		return fmt.Errorf("sctpddp: data channel %d: %w", s.id, err)
	}
	s.next = s.next.Next()
	s.room.sent(control)
	return nil
}

// waitOpen blocks until the channel is open.
func (s *DataChannelStream) waitOpen(ctx context.Context) error {
	select {
	case <-s.opened:
		return nil
	default:
	}
	select {
	case <-s.opened:
		return nil
	case <-s.closed:
		return ErrDataChannelClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InterruptRead makes a blocked ReadMessage, or the next one, return
// ErrReadInterrupted.
func (s *DataChannelStream) InterruptRead() { signal(s.interrupt) }

// ReadMessage reads one whole message into buf and returns its length and
// the PPID its content implies (DataChannelPPID). A buf too short for the
// message gives io.ErrShortBuffer and keeps the message for the next
// call. A DDP Segment Chunk whose segment exceeds the MULPDU
// (ErrSegmentTooLarge, RFC 5043 §9) and a text message (ErrUnexpectedPPID)
// are consumed and reported. When the channel has closed and every message
// received before has been read, it returns ErrDataChannelClosed.
func (s *DataChannelStream) ReadMessage(ctx context.Context, buf []byte) (int, PPID, error) {
	m, err := s.q.peek(ctx, s.interrupt)
	if err != nil {
		return 0, 0, err
	}
	if m.text {
		// Not one of our chunks (its PPID was WebRTC String): the session
		// ends as for an unknown PPID.
		s.q.pop()
		return 0, 0, fmt.Errorf("%w: a text message on data channel %d", ErrUnexpectedPPID, s.id)
	}
	msg := m.data
	ppid := DataChannelPPID(msg)
	if len(buf) < len(msg) {
		return len(msg), ppid, io.ErrShortBuffer
	}
	n := copy(buf, msg)
	s.q.pop()
	if ppid == PPIDSegment && n >= SSNLen {
		if err := CheckSegmentSize(n-SSNLen, s.mulpdu); err != nil {
			return n, ppid, err
		}
	}
	return n, ppid, nil
}
