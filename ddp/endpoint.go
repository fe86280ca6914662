package ddp

import (
	"errors"
	"fmt"
)

// Endpoint is the upper end of a DDP stream as a transport sees it: what
// a transport needs to connect a ULP stream (an RDMAP queue pair) to its
// LLP stream. rdmap.QueuePair implements it; a transport package never
// imports rdmap.
type Endpoint interface {
	// Stream is the DDP stream the transport's receive loop feeds.
	Stream() *Stream
	// ReadLimits returns the IRD and ORD the endpoint offers (RFC 5040
	// §6.1), for the transport's negotiation (RFC 6581 §9).
	ReadLimits() (ird, ord int)
	// SetORD lowers the ORD to what the peer's IRD allows, before Start.
	SetORD(ord int) error
	// Start makes the endpoint send over llp: the LLP stream is in RDMA
	// mode (RFC 5040 §6.1).
	Start(llp LLP) error
	// Terminated is closed when the endpoint has stopped on an error and
	// its Terminate (if any) is with the LLP: the transport then closes
	// the LLP stream gracefully (RFC 5040 §6.2.1).
	Terminated() <-chan struct{}
}

// Poller is implemented by an LLP whose receive work a goroutine that
// waits for the stream's completions can do itself: the network then wakes
// the waiter directly, instead of waking the LLP's receive goroutine which
// then wakes the waiter. On a small machine that second hand-off is a
// large part of a small message's round trip.
type Poller interface {
	// Poll receives on the calling goroutine until done reports true, and
	// then returns true. It returns false when it cannot go on without
	// blocking for long (then the LLP's own goroutine receives, and the
	// caller waits for it as usual). done must be cheap and safe to call
	// from any goroutine.
	Poll(done func() bool) bool
}

// Next returns the sequence number of the next segment to deliver: every
// segment before it has been placed and delivered. Only the receive
// goroutine may call it; an unordered LLP uses it to widen its short
// sequence numbers (SCTP's 16-bit DDP-SSN) to the stream's 32-bit ones.
func (s *Stream) Next() uint32 { return s.next }

// Window returns the stream's reassembly window in segments.
func (s *Stream) Window() int { return int(s.window) }

// SetWindow sets the reassembly window before the first segment arrives:
// the transport knows how many segments its LLP may have in flight.
func (s *Stream) SetWindow(n int) error {
	if n < 1 || n > 1<<16 {
		return fmt.Errorf("ddp: window of %d segments outside [1, 65536]", n)
	}
	if s.next != 0 || s.active {
		return errors.New("ddp: SetWindow after segments arrived")
	}
	for _, sl := range s.slots {
		if sl.placed {
			return errors.New("ddp: SetWindow after segments arrived")
		}
	}
	s.window = uint32(n)
	s.slots = make([]slot, n)
	return nil
}
