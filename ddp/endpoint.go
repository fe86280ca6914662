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
	Start(llp LLP, how Start) error
	// Terminated is closed when the endpoint has stopped and has nothing
	// more to send: after an error, once its Terminate (if any) has been
	// written. The transport then closes the LLP stream gracefully (RFC
	// 5040 §6.2.1).
	Terminated() <-chan struct{}
}

// Start says how a stream starts, as the transport's set-up settled it.
type Start struct {
	// RTR, other than RTRNone, is an RTR indication the endpoint sends
	// before anything else (RFC 6581 §9.2: "The RDMA connection initiator
	// MUST NOT allow any later FULPDUs to be transmitted before the RTR
	// indication").
	RTR RTR
	// ReceiveFirst says that the LLP sends nothing before it has received
	// a segment ("MPA Responder mode implementations MUST receive and
	// validate at least one FPDU before sending any FPDUs or Markers",
	// RFC 5044 §7.1.2 rule 4): its writes wait until then, and the
	// endpoint must not make a posting goroutine wait on them.
	ReceiveFirst bool
}

// How an LLP stream ends, as the LLP reports it with Stream.Close. Neither
// is a Terminate triple: there is no stream left to carry one.
var (
	// ErrDisconnected: the peer closed the LLP stream in an orderly way
	// with no Terminate before it (a TCP FIN between FPDUs, a DDP Stream
	// Session Terminate, an SCTP SHUTDOWN), or this end closed it.
	ErrDisconnected = errors.New("iwarp: the peer disconnected")
	// ErrLLPLost: the LLP stream failed (a reset, a timeout, a stream cut
	// inside a segment, a dead peer). Errors wrap it with their cause.
	ErrLLPLost = errors.New("iwarp: the lower layer's stream was lost")
)

// Lost returns an error that wraps ErrLLPLost and cause.
func Lost(cause error) error {
	if cause == nil || errors.Is(cause, ErrLLPLost) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrLLPLost, cause)
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
	if s.next != 0 {
		return errors.New("ddp: SetWindow after segments arrived")
	}
	for _, sl := range s.slots {
		if sl.placed {
			return errors.New("ddp: SetWindow after segments arrived")
		}
	}
	s.window = uint32(n)
	s.slots = make([]slot, initialSlots(n))
	return nil
}
