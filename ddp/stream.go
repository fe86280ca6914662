package ddp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

// ULP is what the Data Sink side of a DDP stream asks of its upper layer
// (RDMAP). All methods are called on the stream's receive goroutine (the
// one calling Begin, End and Receive).
type ULP interface {
	// CheckSegment validates the ULP's own fields of an incoming segment
	// (RDMAP: the opcode, its version and whether the opcode fits the
	// buffer model and queue) after DDP's checks of the untagged fields
	// and before any placement. A non-nil error stops the stream.
	CheckSegment(h *Header) *term.Error

	// TaggedBuffer resolves the STag of a non-zero-length tagged segment
	// to memory that allows this segment's placement. It reports an
	// unknown or invalidated STag, or one whose rights do not allow the
	// placement, as term.DDPInvalidSTag, and one that belongs to another
	// stream or protection domain as term.DDPSTagNotAssociated. DDP
	// itself checks the bounds and the TO wrap.
	TaggedBuffer(h *Header) (TaggedBuffer, *term.Error)

	// Deliver hands the ULP a whole message, in the order the Data Source
	// sent it (RFC 5041 §5.3-5.4). For an untagged message, buf is the
	// posted buffer it consumed; d is valid only during the call.
	Deliver(d *Delivery)

	// Fault reports the stream's first error: one found by DDP's or the
	// ULP's checks of an incoming segment, or one reported by the LLP
	// through Fail. It is called once; after it, the stream places and
	// delivers nothing more.
	Fault(f *Fault)
}

// Delivery is one delivered DDP message.
type Delivery struct {
	Header Header // the last segment's header (Last is set)
	// Len is the ULP Message Length: for an untagged message MO + payload
	// of the last segment (RFC 5041 §5.4); for a tagged message the sum of
	// its segments' payloads.
	Len     uint32
	LastLen uint32 // the last segment's payload length
	Buffer  Buffer // untagged only: the consumed buffer
}

// Fault describes what stopped a stream, with what RDMAP's Terminate
// needs to report it (RFC 5040 §4.8): the offending segment's DDP header
// exactly as received and its length.
type Fault struct {
	// Err is a *term.Error for an error found by DDP's, the ULP's or the
	// LLP's checks (Local) or reported by the peer's Terminate (Remote);
	// or, when the LLP stream ended (Stream.Close), an error that wraps
	// ErrDisconnected or ErrLLPLost.
	Err       error
	Header    [MaxHeaderLen]byte // the Terminated DDP Header, if HeaderLen > 0
	HeaderLen int                // 0 when no segment is associated
	SegLen    int                // DDP segment length: header plus payload
	Parsed    Header             // Header decoded, when HeaderLen > 0
}

// Term returns the fault's Terminate triple, or nil when the LLP stream
// ended.
func (f *Fault) Term() *term.Error {
	te, _ := f.Err.(*term.Error)
	return te
}

// ErrStopped is returned by Receive for every segment after the stream's
// first error: "DDP MUST silently drop any subsequent incoming DDP
// Segments." (RFC 5041 §7.1).
var ErrStopped = errors.New("ddp: stream stopped after an error; segment dropped")

// ErrWindow is returned by Receive for a segment sequence number outside
// the stream's reassembly window: an LLP error, for the LLP to report.
var ErrWindow = errors.New("ddp: segment sequence number outside the reassembly window")

// Config sets up a Stream.
type Config struct {
	// Queues is the number of untagged queues (QN 0 .. Queues-1). RDMAP
	// uses 4 (RFC 5040's three and RFC 7306's Atomic Response queue).
	Queues int
	// QueueDepth is the most buffers that may be posted to one queue.
	QueueDepth int
	// Window is the most segments that may be outstanding between the
	// oldest undelivered one and the newest placed one: 1 suffices for an
	// LLP that hands segments over in order (MPA/TCP); an unordered LLP
	// (SCTP) needs its in-flight limit.
	Window int
	// ID names the stream in events.
	ID uint32
	// ULP is the upper layer. Required.
	ULP ULP
	// Observer, if not nil, receives an event for every placement,
	// delivery and error.
	Observer trace.Observer
}

// queue is one untagged buffer queue: a ring of posted buffers, the
// oldest first, and the MSN that the oldest one will take.
type queue struct {
	bufs    []Buffer
	lens    []int
	head    int
	count   int
	headMSN uint32
	source  BufferSource
	share   uint32 // with a source: the most of its buffers the queue holds at once
}

// BufferSource supplies a queue's buffers on demand: a shared receive
// queue that several streams draw from.
type BufferSource interface {
	// TakeBuffer removes and returns the next buffer, if there is one.
	TakeBuffer() (Buffer, bool)
}

// SetSource makes queue qn draw buffers from src when a segment arrives
// for an MSN that has no buffer yet, in MSN order: the stream's next new
// message takes the source's next buffer. The queue holds at most share
// of them at once (at least one, at most its QueueDepth), and no more
// than the stream's window, which bounds the messages a peer can have in
// flight: a segment whose MSN lies further ahead is outside the legal
// MSN range. Several streams draw from one source, and "the combination
// of the RNIC and the Privileged Resource Manager MUST be able to detect
// if the Remote Peer is attempting to consume more than its fair share of
// resources" (RFC 5040 §8.1.2 item 8): the stream that asks for more is
// stopped, and the buffers stay with the others.
func (s *Stream) SetSource(qn uint32, src BufferSource, share int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := &s.queues[qn]
	q.source = src
	q.share = uint32(min(max(share, 1), len(q.bufs)))
}

// slot records one placed segment until it is delivered.
type slot struct {
	placed bool
	h      Header
	n      uint32
}

// Stream is the Data Sink side of one DDP stream: it checks every incoming
// segment as RFC 5041 §7.1 requires, places its payload, and delivers
// whole messages in order.
//
// Placement and delivery are separate (RFC 5041 §5.3-5.4): the LLP hands
// each segment with its sequence number on the stream (its position in the
// TCP byte stream's FPDU order, or the DDP-SSN over SCTP). Segments may
// come in any order inside the window; each is placed at once, and a
// message is delivered when it and every earlier segment have been placed.
//
// Receive is called by one goroutine, the LLP's receive loop, with
// segments the LLP has verified (MPA's CRC, DTLS's record protection):
// nothing reaches a buffer before that. Fail and Close may be called from
// any goroutine, and so may Post: mu guards the queues.
type Stream struct {
	ulp    ULP
	obs    trace.Observer
	id     uint32
	window uint32

	mu      sync.Mutex // guards queues
	queues  []queue
	placing sync.Mutex // held from a segment's checks to the end of its placement (Quiesce)
	stopped atomic.Bool
	done    chan struct{} // closed when the stream stops

	slots    []slot   // a ring of a power-of-two length, grown up to the window as segments get ahead
	next     uint32   // sequence number of the next segment to deliver
	msgLen   uint64   // payload delivered so far of the current tagged message
	current  Header   // header of the segment being received
	delivery Delivery // reused for every delivery
}

// NewStream returns a stream ready to receive.
func NewStream(cfg Config) (*Stream, error) {
	if cfg.ULP == nil {
		return nil, errors.New("ddp: Config.ULP is required")
	}
	if cfg.Queues < 0 || cfg.QueueDepth < 0 || cfg.Window < 1 || cfg.Window > 1<<16 {
		return nil, fmt.Errorf("ddp: bad stream config (queues %d, depth %d, window %d)", cfg.Queues, cfg.QueueDepth, cfg.Window)
	}
	s := &Stream{
		ulp: cfg.ULP, obs: cfg.Observer, id: cfg.ID, window: uint32(cfg.Window),
		queues: make([]queue, cfg.Queues),
		slots:  make([]slot, initialSlots(cfg.Window)),
		done:   make(chan struct{}),
	}
	for i := range s.queues {
		s.queues[i] = queue{bufs: make([]Buffer, cfg.QueueDepth), lens: make([]int, cfg.QueueDepth), headMSN: 1}
	}
	return s, nil
}

// ErrQueueFull is returned by Post when a queue already holds QueueDepth
// buffers.
var ErrQueueFull = errors.New("ddp: untagged queue is full")

// Post adds an untagged buffer to queue qn. Buffers are consumed in the
// order they are posted: the first takes the MSN one, the next two, and so
// on (RFC 5041 §4.3, §5.1.2).
func (s *Stream) Post(qn uint32, b Buffer) error {
	if s.stopped.Load() {
		return ErrStopped
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(qn) >= len(s.queues) {
		return fmt.Errorf("ddp: queue number %d is not one of this stream's %d queues", qn, len(s.queues))
	}
	q := &s.queues[qn]
	if q.count == len(q.bufs) {
		return ErrQueueFull
	}
	i := (q.head + q.count) % len(q.bufs)
	q.bufs[i] = b
	q.lens[i] = b.Len()
	q.count++
	return nil
}

// Posted returns how many buffers are waiting on queue qn.
func (s *Stream) Posted(qn uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(qn) >= len(s.queues) {
		return 0
	}
	return s.queues[qn].count
}

// Drain removes and returns every buffer still posted, in posting order
// per queue: after a stream stops, the ULP flushes them.
func (s *Stream) Drain(qn uint32) []Buffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(qn) >= len(s.queues) {
		return nil
	}
	q := &s.queues[qn]
	out := make([]Buffer, 0, q.count)
	for ; q.count > 0; q.count-- {
		out = append(out, q.bufs[q.head])
		q.bufs[q.head] = Buffer{}
		q.head = (q.head + 1) % len(q.bufs)
		q.headMSN++
	}
	return out
}

// Receive checks the segment seg, whose sequence number on the stream is
// seq, as RFC 5041 §7.1 requires (and the ULP's checks), places its
// payload and delivers every message that is now complete and in order.
// seg must have been verified by the LLP. On an error nothing has been
// placed: the stream has stopped and Fault has been called (ErrStopped
// and ErrWindow excepted, which do not stop it: ErrWindow is the LLP's to
// report).
func (s *Stream) Receive(seq uint32, seg []byte) error {
	if s.isStopped() {
		return ErrStopped
	}
	h, hl, err := ParseHeader(seg)
	if err != nil {
		e := term.DDPLocalCatastrophic.With("%v", err)
		n := 0
		if len(seg) > 0 {
			n = min(len(seg), Control(seg[0]).HeaderLen())
		}
		s.stop(e, seg[:n], len(seg))
		return e
	}
	if d := seq - s.next; d >= s.window {
		return ErrWindow
	}
	n := len(seg) - hl
	// s.current rather than h: a pointer to it handed to the ULP does not
	// make every segment's header escape to the heap.
	s.current = h
	s.placing.Lock()
	if s.isStopped() {
		// Stopped since the check above: a ULP that stops the stream and
		// then calls Quiesce knows that nothing is placed after it.
		s.placing.Unlock()
		return ErrStopped
	}
	t, terr := s.check(&s.current, n)
	if terr == nil {
		t.write(seg[hl:])
	}
	s.placing.Unlock()
	if terr != nil {
		s.stop(terr, seg[:hl], len(seg))
		return terr
	}
	if d := seq - s.next; d >= uint32(len(s.slots)) {
		s.grow(d + 1)
	}
	sl := &s.slots[seq&uint32(len(s.slots)-1)]
	sl.placed, sl.h, sl.n = true, s.current, uint32(n)
	if s.obs != nil {
		s.obs.Observe(segmentEvent(trace.SegmentPlaced, s.id, seq, &s.current, uint32(n)))
	}
	s.deliver()
	return nil
}

// check makes the checks of RFC 5041 §7.1 and the ULP's, in that order,
// and resolves the target.
func (s *Stream) check(h *Header, n int) (target, *term.Error) {
	// "The value of DV MUST be the same for all the DDP Segments
	// transmitted or received on a DDP Stream." This stream speaks only
	// version one.
	if h.DV != Version {
		if h.Tagged {
			return target{}, term.DDPTaggedInvalidVersion.With("DDP version %d", h.DV)
		}
		return target{}, term.DDPUntaggedInvalidVersion.With("DDP version %d", h.DV)
	}
	if h.Tagged {
		if e := s.ulp.CheckSegment(h); e != nil {
			return target{}, e
		}
		// "Only the DDP Control and RsvdULP Fields MUST be valid for a
		// zero-length Tagged DDP Segment. The STag and TO fields MUST NOT
		// be checked for a zero-length Tagged DDP Message." (§5.2)
		if n == 0 {
			return target{}, nil
		}
		return s.checkTagged(h, n)
	}
	t, e := s.checkUntagged(h, n)
	if e != nil {
		return target{}, e
	}
	if e := s.ulp.CheckSegment(h); e != nil {
		return target{}, e
	}
	return t, nil
}

func (s *Stream) checkTagged(h *Header, n int) (target, *term.Error) {
	// 1-2: "The STag is valid for this stream" and "has an associated
	// buffer that allows Placement of the payload": the ULP owns STags.
	tb, e := s.ulp.TaggedBuffer(h)
	if e != nil {
		return target{}, e
	}
	// 3: "The TO falls in the range of legal offsets registered for the
	// STag."
	if h.TO < tb.Base || h.TO-tb.Base >= uint64(len(tb.Mem)) {
		return target{}, term.DDPBaseBounds.With("TO %#x outside STag %#08x's range [%#x, %#x)", h.TO, h.STag, tb.Base, tb.Base+uint64(len(tb.Mem)))
	}
	// 5: "A 64-bit unsigned sum of the DDP Segment payload length and the
	// TO does not wrap."
	if h.TO+uint64(n) < h.TO {
		return target{}, term.DDPTOWrap.With("TO %#x plus %d octets wraps", h.TO, n)
	}
	// 4: "The sum of the DDP Segment payload length and the TO falls in
	// the range of legal offsets registered for the STag."
	off := h.TO - tb.Base
	if off+uint64(n) > uint64(len(tb.Mem)) {
		return target{}, term.DDPBaseBounds.With("%d octets at TO %#x overrun STag %#08x's range [%#x, %#x)", n, h.TO, h.STag, tb.Base, tb.Base+uint64(len(tb.Mem)))
	}
	return target{flat: tb.Mem[off : off+uint64(n)]}, nil
}

func (s *Stream) checkUntagged(h *Header, n int) (target, *term.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// 1: "The QN is valid for this stream."
	if h.QN >= uint32(len(s.queues)) {
		return target{}, term.DDPInvalidQN.With("QN %d", h.QN)
	}
	q := &s.queues[h.QN]
	// 2 and 5: the MSN must name a posted buffer. "The legal range is
	// defined as being between the MSN value assigned to the first
	// available buffer for a specific QN and the MSN value assigned to the
	// last available buffer". An MSN that a buffer could have been posted
	// for, but was not, has no buffer available; one already consumed, or
	// further ahead than the queue can ever hold, is outside the range.
	d := h.MSN - q.headMSN
	if q.source != nil {
		if share := min(q.share, s.window); d >= share {
			return target{}, term.DDPMSNRange.With("QN %d MSN %d: %d messages ahead of MSN %d, beyond this stream's share of %d shared buffers", h.QN, h.MSN, d, q.headMSN, share)
		}
		for d >= uint32(q.count) {
			b, ok := q.source.TakeBuffer()
			if !ok {
				break
			}
			i := (q.head + q.count) % len(q.bufs)
			q.bufs[i], q.lens[i] = b, b.Len()
			q.count++
		}
	}
	switch {
	case d < uint32(q.count):
	case d < uint32(len(q.bufs)):
		return target{}, term.DDPNoBuffer.With("QN %d MSN %d: no buffer posted (%d posted from MSN %d)", h.QN, h.MSN, q.count, q.headMSN)
	default:
		return target{}, term.DDPMSNRange.With("QN %d MSN %d outside [%d, %d)", h.QN, h.MSN, q.headMSN, q.headMSN+uint32(q.count))
	}
	i := (q.head + int(d)) % len(q.bufs)
	size := q.lens[i]
	// Checks 3 and 4 apply to non-zero-length segments (§7.1). A
	// zero-length one places nothing, but its MO still may not lie
	// beyond the buffer: the message it ends would be MO octets long
	// (Delivery.Len), longer than the buffer the ULP reads it from.
	if n == 0 {
		if uint64(h.MO) > uint64(size) {
			return target{}, term.DDPInvalidMO.With("QN %d MSN %d: a zero-length segment at MO %d, beyond a %d-octet buffer", h.QN, h.MSN, h.MO, size)
		}
		return target{}, nil
	}
	// 3: "The MO falls in the range of legal offsets associated with the
	// Untagged Buffer."
	if uint64(h.MO) >= uint64(size) {
		return target{}, term.DDPInvalidMO.With("QN %d MSN %d: MO %d outside a %d-octet buffer", h.QN, h.MSN, h.MO, size)
	}
	// 4: "The sum of the DDP Segment payload length and the MO falls in
	// the range of legal offsets associated with the Untagged Buffer."
	if uint64(h.MO)+uint64(n) > uint64(size) {
		return target{}, term.DDPMessageTooLong.With("QN %d MSN %d: %d octets at MO %d overrun a %d-octet buffer", h.QN, h.MSN, n, h.MO, size)
	}
	return target{sgl: q.bufs[i].SGL, off: int(h.MO)}, nil
}

// initialSlots is the ring a stream starts with: enough for an ordered LLP
// and for a few segments in flight; an unordered LLP's stream grows it as
// segments arrive ahead, so that an idle session costs little whatever its
// window.
func initialSlots(window int) int { return min(nextPow2(window), 16) }

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// grow makes the ring hold at least n slots from s.next on, keeping each
// slot's place relative to its sequence number.
func (s *Stream) grow(n uint32) {
	old := s.slots
	ring := make([]slot, nextPow2(int(n)))
	for i := uint32(0); i < uint32(len(old)); i++ {
		seq := s.next + i
		ring[seq&uint32(len(ring)-1)] = old[seq&uint32(len(old)-1)]
	}
	s.slots = ring
}

// deliver hands over, in order, every message whose segments and all
// earlier ones are placed (RFC 5041 §5.4).
func (s *Stream) deliver() {
	for !s.isStopped() {
		sl := &s.slots[s.next&uint32(len(s.slots)-1)]
		if !sl.placed {
			return
		}
		sl.placed = false
		s.next++
		s.msgLen += uint64(sl.n)
		if !sl.h.Last {
			continue
		}
		d := &s.delivery
		*d = Delivery{Header: sl.h, Len: uint32(s.msgLen), LastLen: sl.n}
		s.msgLen = 0
		if !sl.h.Tagged {
			d.Len = sl.h.MO + sl.n
			if e := s.consume(d); e != nil {
				var raw [MaxHeaderLen]byte
				s.stop(e, sl.h.Append(raw[:0]), UntaggedHeaderLen+int(sl.n))
				return
			}
		}
		if s.obs != nil {
			ev := segmentEvent(trace.MessageDelivered, s.id, s.next-1, &d.Header, d.Len)
			ev.WRID = d.Buffer.ID
			s.obs.Observe(ev)
		}
		s.ulp.Deliver(d)
	}
}

// consume takes the buffer of a delivered untagged message off its queue.
// Messages on a queue are delivered in MSN order, so it is the oldest; a
// peer that numbered its messages out of order is caught here.
func (s *Stream) consume(d *Delivery) *term.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := &s.queues[d.Header.QN]
	if q.count == 0 || d.Header.MSN != q.headMSN {
		return term.DDPMSNRange.With("QN %d: message MSN %d delivered where MSN %d was due", d.Header.QN, d.Header.MSN, q.headMSN)
	}
	d.Buffer = q.bufs[q.head]
	q.bufs[q.head] = Buffer{}
	q.head = (q.head + 1) % len(q.bufs)
	q.count--
	q.headMSN++
	return nil
}

// Quiesce returns once no segment is being placed: a segment whose
// target buffer was resolved (ULP.TaggedBuffer) before the call has been
// written by then, and one checked after it sees what the ULP changed
// before it. The ULP calls it when it revokes access to memory, so that
// "the network interface can no longer modify an Advertised Buffer after
// the ULP revokes remote access rights for an STag" (RFC 5040 §8.1.1
// item 6). Once the stream has stopped, Quiesce also means that nothing
// more is placed at all: the ULP may then flush its posted buffers. It
// may be called from any goroutine, the stream's receive goroutine
// included outside Receive's checks (in Deliver, say).
func (s *Stream) Quiesce() {
	s.placing.Lock()
	s.placing.Unlock()
}

// Fail stops the stream for an error found outside DDP's checks: an LLP
// error (a CRC error) or an RDMAP error found on a delivered message. The
// ULP's Fault is called if this is the stream's first error.
func (s *Stream) Fail(e *term.Error) { s.stop(e, nil, 0) }

// FailSegment is Fail for an error that is associated with a segment
// whose header and length the Terminate should carry.
func (s *Stream) FailSegment(e *term.Error, hdr []byte, segLen int) { s.stop(e, hdr, segLen) }

// Close stops the stream because its LLP stream ended: err wraps
// ErrDisconnected (an orderly close) or ErrLLPLost. Nothing is placed
// after it; the ULP's Fault is called if the stream had not stopped.
func (s *Stream) Close(err error) {
	if !errors.Is(err, ErrDisconnected) && !errors.Is(err, ErrLLPLost) {
		err = Lost(err)
	}
	s.stop(err, nil, 0)
}

// Stopped reports whether the stream has stopped.
func (s *Stream) Stopped() bool { return s.isStopped() }

// Done is closed when the stream stops: a transport that waits for it
// can bound the time its last writes take.
func (s *Stream) Done() <-chan struct{} { return s.done }

func (s *Stream) isStopped() bool { return s.stopped.Load() }

func (s *Stream) stop(err error, hdr []byte, segLen int) {
	if !s.stopped.CompareAndSwap(false, true) {
		return
	}
	f := Fault{Err: err, SegLen: segLen}
	if len(hdr) > 0 {
		f.HeaderLen = copy(f.Header[:], hdr)
		if h, hl, err := ParseHeader(f.Header[:f.HeaderLen]); err == nil {
			f.Parsed, f.HeaderLen = h, hl
		}
	}
	if s.obs != nil {
		ev := trace.Event{Kind: trace.Error, Stream: s.id, Err: f.Term()}
		switch {
		case ev.Err != nil:
		case errors.Is(err, ErrDisconnected):
			ev.Kind = trace.Disconnected
		default:
			ev.Kind = trace.LLPLost
		}
		s.obs.Observe(ev)
	}
	s.ulp.Fault(&f)
	close(s.done)
}
