package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// ErrSSNOutOfOrder is returned by WriteMessage for a message whose DDP-SSN
// is not the stream's next one.
var ErrSSNOutOfOrder = errors.New("sctpddp: DDP-SSN out of submission order")

// ChunkerConfig says how a Chunker hands its messages to the transport
// under it (an SCTP stream pair, a WebRTC data channel).
type ChunkerConfig struct {
	// MULPDU is the largest DDP Segment sent (RFC 5043 §9).
	MULPDU int
	// ImpliedPPID is set for a transport that carries no PPID, a data
	// channel: the receiver reads it from the content
	// (wire.DataChannelPPID), so a DDP Segment must have DDP Version 01b
	// (wire.DataChannelFramable).
	ImpliedPPID bool
	// SendQueueLimit caps the bytes queued or in flight: a write waits
	// while one more message would exceed it. At most MaxSendQueueLimit,
	// unless Unacked is set.
	SendQueueLimit uint64
	// Send queues one whole message with its PPID; the transport copies
	// it. It may wait for room in the transport until ctx ends.
	Send func(ctx context.Context, msg []byte, ppid wire.PPID) error
	// Sendv, if not nil, queues one message given as slices that the
	// transport gathers as it copies them; a DDP Segment then goes to it
	// as its DDP-SSN, DDP Header and payload slices, with no copy of the
	// Chunker's own.
	Sendv func(ctx context.Context, parts [][]byte, ppid wire.PPID) error
	// Buffered returns the bytes queued or in flight.
	Buffered func() uint64
	// Window, if not nil, lowers the cap to what the transport's path
	// takes now (an SCTP association's congestion-controlled send
	// window); it is asked at each write.
	Window func() uint64
	// Unacked, if not nil, returns the number of messages queued or in
	// flight, and RFC 5043 §10's limit is kept by that count instead of
	// by the byte cap: SendQueueLimit may then exceed MaxSendQueueLimit.
	Unacked func() int
	// Ready, if not nil, blocks until the transport can send (a data
	// channel that is opening).
	Ready func(ctx context.Context) error
	// Done is closed when the transport can no longer send; Err then says
	// why, and is what writes return.
	Done <-chan struct{}
	Err  func() error
	// Gone, if not nil, reports an end of the transport that Done may not
	// show yet; it is asked while a write waits for room.
	Gone func() bool
}

// A Chunker is the send side of one DDP stream, shared by every
// MessageStream: it numbers the messages with DDP-SSNs in submission
// order (RFC 5043 §5.2.1: "This is the order that chunks were submitted
// to SCTP, no matter in what order they are actually sent or received."),
// frames each as a DDP Segment Chunk (§5.2.2) or a DDP Stream Session
// Control message (§5.2.3), checks it against the MULPDU, and keeps what
// the transport holds unacknowledged under a cap that also keeps §10's
// limit of 32767 chunks in flight. A session control message waits until
// the one before it has been acknowledged (§6.6).
//
// Its methods may be called from several goroutines; writes are
// serialised, so DDP-SSN order is submission order. A write copies the
// message into the Chunker's buffer and the transport copies it again,
// or, with Sendv, the transport alone gathers a DDP Segment's slices; so
// the caller's slices may be reused when it returns. Nothing is
// allocated per message once the buffer has grown to the largest one.
type Chunker struct {
	cfg ChunkerConfig

	mu    sync.Mutex // serialises writes; guards the fields below
	next  wire.SSN   // DDP-SSN of the next message
	buf   []byte     // encoding buffer
	parts [][]byte   // a DDP Segment's slices, for Sendv
	room  sendRoom
}

// NewChunker returns a Chunker that sends as cfg says, starting at
// DDP-SSN 0.
func NewChunker(cfg ChunkerConfig) *Chunker {
	c := &Chunker{cfg: cfg}
	limit := cfg.SendQueueLimit
	if cfg.Unacked == nil {
		limit = min(limit, MaxSendQueueLimit)
	}
	c.room = sendRoom{limit: limit, buffered: cfg.Buffered, window: cfg.Window, unacked: cfg.Unacked,
		low: make(chan struct{}, 1), done: cfg.Done, gone: cfg.Gone}
	return c
}

// SendQueueLimit returns the cap on the bytes queued or in flight.
func (c *Chunker) SendQueueLimit() uint64 { return c.room.limit }

// BufferedAmountLow tells the Chunker that the transport's buffered
// amount has dropped (a buffered-amount-low event), so that a write
// waiting for room looks again at once. Set the event's threshold to half
// SendQueueLimit.
func (c *Chunker) BufferedAmountLow() { signal(c.room.low) }

// NextSSN returns the DDP-SSN the next message will carry.
func (c *Chunker) NextSSN() wire.SSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// NewSession starts a new DDP Stream Session: it waits until the
// transport can send and every Data Chunk of the previous session has been
// acknowledged (§6.6: "A DDP Stream Identifier MUST NOT be reused for
// another DDP Stream Session while any Data Chunk from a prior session
// might be outstanding.") and resets the DDP-SSN (§6.1: "The DDP-SSN is
// reset to zero at the beginning of each DDP Stream Session.").
func (c *Chunker) NewSession(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return err
	}
	if err := c.room.waitEmpty(ctx); err != nil {
		return c.closedErr(err)
	}
	c.next = 0
	return nil
}

// WriteSegmentv sends one DDP Segment, its DDP Header hdr and payload
// slices, as a DDP Segment Chunk with the next DDP-SSN, and returns that
// DDP-SSN. It blocks while the send queue is at its cap, until ctx ends.
func (c *Chunker) WriteSegmentv(ctx context.Context, hdr []byte, payload [][]byte) (wire.SSN, error) {
	// RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP Segments
	// that are larger than the maximum size specified."
	if err := wire.CheckSegmentSize(wire.SegmentLen(hdr, payload), c.cfg.MULPDU); err != nil {
		return 0, err
	}
	if c.cfg.ImpliedPPID && !wire.DataChannelFramable(hdr) {
		return 0, wire.ErrDataChannelFraming
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ssn := c.next
	if c.cfg.Sendv != nil {
		// The DDP-SSN and the header in c.buf, the payload where the
		// caller holds it.
		c.buf = wire.AppendSegmentv(c.buf[:0], ssn, hdr, nil)
		c.parts = append(append(c.parts[:0], c.buf), payload...)
		err := c.send(ctx, wire.PPIDSegment, len(c.buf)+wire.SegmentLen(nil, payload), nil, c.parts)
		clear(c.parts) // keep no reference to the caller's payload
		if err != nil {
			return 0, err
		}
		return ssn, nil
	}
	c.buf = wire.AppendSegmentv(c.buf[:0], ssn, hdr, payload)
	if err := c.send(ctx, wire.PPIDSegment, len(c.buf), c.buf, nil); err != nil {
		return 0, err
	}
	return ssn, nil
}

// WriteSessionControl sends a DDP Stream Session Control message with the
// next DDP-SSN (m.SSN is ignored) and returns that DDP-SSN. It waits until
// the session's previous control message, if any, has been acknowledged.
func (c *Chunker) WriteSessionControl(ctx context.Context, m wire.SessionControl) (wire.SSN, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.SSN = c.next
	if err := m.Validate(); err != nil {
		return 0, err
	}
	c.buf = m.Append(c.buf[:0])
	if err := c.send(ctx, wire.PPIDSessionControl, len(c.buf), c.buf, nil); err != nil {
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
func (c *Chunker) WriteMessage(ctx context.Context, ppid wire.PPID, msg []byte) error {
	var ssn wire.SSN
	switch ppid {
	case wire.PPIDSegment:
		sc, _, err := wire.ParseSegmentChunk(msg)
		if err != nil {
			return err
		}
		if err := wire.CheckSegmentSize(len(sc.Segment), c.cfg.MULPDU); err != nil {
			return err
		}
		if c.cfg.ImpliedPPID && !wire.DataChannelFramable(sc.Segment) {
			return wire.ErrDataChannelFraming
		}
		ssn = sc.SSN
	case wire.PPIDSessionControl:
		m, _, err := wire.ParseSessionControl(msg)
		if err != nil {
			return err
		}
		ssn = m.SSN
	default:
		// RFC 5043 §5.1: "An SCTP Association that has had the DDP
		// Adaptation Indication negotiated will carry only SCTP Data
		// Chunks as defined in this document."
		return fmt.Errorf("%w: %v", wire.ErrUnexpectedPPID, ppid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ssn != c.next {
		return fmt.Errorf("%w: message has %d, next is %d", ErrSSNOutOfOrder, ssn, c.next)
	}
	return c.send(ctx, ppid, len(msg), msg, nil)
}

// send waits until the transport can send and has room, and queues the
// message of n octets, msg or (through Sendv) parts; on success it
// advances the DDP-SSN. The caller holds mu.
func (c *Chunker) send(ctx context.Context, ppid wire.PPID, n int, msg []byte, parts [][]byte) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	control := ppid == wire.PPIDSessionControl
	if control && c.room.ctlSinceDrain > 0 {
		// "A DDP Stream Session Control message MUST NOT be sent if it
		// may be received before a prior DDP Stream Session Control
		// message within the same DDP Stream Session." (RFC 5043 §6.6)
		// Chunks are unordered, so one may overtake another until it is
		// acknowledged: wait until nothing is unacknowledged.
		if err := c.room.waitEmpty(ctx); err != nil {
			return c.closedErr(err)
		}
	}
	if err := c.room.waitRoom(ctx, n, control); err != nil {
		return c.closedErr(err)
	}
	var err error
	if parts != nil {
		err = c.cfg.Sendv(ctx, parts, ppid)
	} else {
		err = c.cfg.Send(ctx, msg, ppid)
	}
	if err != nil {
		return err
	}
	c.next = c.next.Next()
	c.room.sent(control)
	return nil
}

func (c *Chunker) ready(ctx context.Context) error {
	if c.cfg.Ready == nil {
		return nil
	}
	return c.cfg.Ready(ctx)
}

// closedErr turns the room's errClosed into the transport's reason.
func (c *Chunker) closedErr(err error) error {
	if err == errClosed {
		return c.cfg.Err()
	}
	return err
}

// controlReserve is how many session control messages may be sent between
// two moments when nothing is buffered (see sendRoom).
const controlReserve = 1024

// MaxSendQueueLimit is the largest send queue cap that keeps RFC 5043
// §10's limit of 32767 unacknowledged chunks (see Chunker).
const MaxSendQueueLimit = (wire.MaxInFlight - controlReserve) * wire.MinSegmentChunkLen

// recheckInterval bounds a wait for send-queue room when no
// buffered-amount-low signal arrives (while waiting for the queue to drain
// completely, or after the stream closed under the writer).
const recheckInterval = 2 * time.Millisecond

// errClosed is what sendRoom's waits return when the transport has ended.
var errClosed = errors.New("sctpddp: transport ended")

// sendRoom keeps what a stream has queued or in flight under a cap, for
// every kind of transport. The cap also keeps RFC 5043 §10's limit: "the
// sending DDP must simply refrain from sending more than 32767 Data Chunks
// for a single stream without acknowledgment. Note that it MUST NOT rely
// upon ULP flow control for this purpose." Every message is one Data
// Chunk (it fits the MULPDU) of at least wire.MinSegmentChunkLen bytes,
// except control messages, of which at most controlReserve are sent
// between two moments when the queue is empty. So unacknowledged chunks
// number at most limit/MinSegmentChunkLen + controlReserve <= MaxInFlight.
// A transport that counts its unacknowledged messages (unacked) has the
// count kept below MaxInFlight - controlReserve instead, control messages
// below MaxInFlight, and a byte cap of any size.
//
// Its fields are guarded by the Chunker's mutex.
type sendRoom struct {
	limit    uint64          // cap, bytes
	buffered func() uint64   // queued + in flight
	window   func() uint64   // lowers the cap; may be nil
	unacked  func() int      // messages queued + in flight; may be nil
	low      chan struct{}   // signalled when the buffered amount drops
	done     <-chan struct{} // closed when the stream can no longer send
	gone     func() bool     // an end done may not show yet; may be nil

	ctlSinceDrain int
	timer         *time.Timer
}

// waitRoom blocks until a message of n bytes fits under the cap.
func (r *sendRoom) waitRoom(ctx context.Context, n int, control bool) error {
	for {
		b := r.buffered()
		if b == 0 {
			r.ctlSinceDrain = 0
		}
		if b+uint64(n) <= r.cap(n) && r.chunksOK(control) && (!control || r.ctlSinceDrain < controlReserve) {
			return nil
		}
		if err := r.wait(ctx); err != nil {
			return err
		}
	}
}

// cap is the byte cap for a message of n bytes: the limit, lowered to
// the window when there is one, but never below one message.
func (r *sendRoom) cap(n int) uint64 {
	if r.window == nil {
		return r.limit
	}
	return min(r.limit, max(r.window(), uint64(n)))
}

// chunksOK reports whether RFC 5043 §10's count allows one more message.
func (r *sendRoom) chunksOK(control bool) bool {
	if r.unacked == nil {
		return true
	}
	if control {
		return r.unacked() < wire.MaxInFlight
	}
	return r.unacked() < wire.MaxInFlight-controlReserve
}

// waitEmpty blocks until nothing is queued or in flight.
func (r *sendRoom) waitEmpty(ctx context.Context) error {
	for r.buffered() != 0 {
		if err := r.wait(ctx); err != nil {
			return err
		}
	}
	r.ctlSinceDrain = 0
	return nil
}

// sent counts a message just queued.
func (r *sendRoom) sent(control bool) {
	if control {
		r.ctlSinceDrain++
	}
}

// wait blocks until the buffered amount may have dropped.
func (r *sendRoom) wait(ctx context.Context) error {
	if r.timer == nil {
		r.timer = time.NewTimer(recheckInterval)
	} else {
		r.timer.Reset(recheckInterval)
	}
	defer r.timer.Stop()
	select {
	case <-r.low:
		return nil
	case <-r.timer.C:
		if r.gone != nil && r.gone() {
			return errClosed
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return errClosed
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
