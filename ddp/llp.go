package ddp

import "context"

// A NowWriter is an LLP that can sometimes write a segment without
// waiting: RDMAP's receive side then answers a Read or Atomic Request
// itself, because handing the answer to the send goroutine costs a
// goroutine wake-up, on a small machine most of the request's round trip.
type NowWriter interface {
	// WriteNow writes one segment, as WriteSegment and Flush would, if
	// the LLP can take it at once, and reports whether it did; false
	// means it wrote nothing. It is called only while no segment is kept
	// for a Flush, on the LLP's receive side while it delivers a segment
	// (Stream.Receive), and it never waits for room: if both ends'
	// receive sides waited to write, neither would read again. When it
	// returns it keeps no reference to hdr or the payload.
	WriteNow(hdr []byte, payload [][]byte) (bool, error)
}

// A Poller is an LLP whose receive work a goroutine waiting for this
// stream's segments (a completion queue's waiter) can do itself, so that
// the network wakes that goroutine directly rather than the LLP's
// receive goroutine, which would then have to wake it.
type Poller interface {
	// Poll receives on the calling goroutine until done reports true
	// (it then returns true), ctx ends or the stream ends. It returns
	// false at once when another goroutine holds the receive work: the
	// LLP may keep the request, to hand that work over once done
	// reports true. done must be cheap and safe to call from any
	// goroutine.
	Poll(ctx context.Context, done func() bool) bool

	// Unpoll says that the caller now waits without receiving, or stops
	// waiting: the LLP forgets its request and makes sure that its
	// receive work is not left to nobody.
	Unpoll()
}
