// Package trace is the typed event stream of the iWARP layers: every layer
// reports what it does (a segment sent, a segment placed, a message
// delivered, a completion, a Terminate, a state change) as an Event to an
// Observer. The browser demo, pcap tracing, the CLI's JSON output and the
// tests all consume the same events.
//
// Observing costs nothing when no observer is attached: producers hold a
// nil Observer and test it before building an Event, and an Event is
// passed by value, so attaching one does not allocate either.
package trace

import (
	"fmt"

	"github.com/iwarpgo/iwarp/term"
)

// Kind says what happened.
type Kind uint8

// The kinds of event.
const (
	SegmentSent      Kind = iota + 1 // DDP hands a segment to the LLP: observed before the LLP has it, or, written at once (ddp.NowWriter), as soon as it has
	SegmentPlaced                    // DDP placed a received segment's payload
	MessageDelivered                 // DDP delivered a whole message to its ULP (RFC 5041 §5.4)
	Completion                       // RDMAP completes a work request (observed before the completion goes on its queue)
	Terminate                        // a Terminate was sent or received (Err says which triple)
	StateChange                      // a stream changed state (State)
	Error                            // an error was detected (Err)
	Disconnected                     // the LLP stream ended in order: the peer (or this end) closed it
	LLPLost                          // the LLP stream failed: reset, timeout, dead peer
	AtomicExecuted                   // RDMAP carried out a peer's Atomic Operation on local memory (STag, TO, Len 8; Opcode the AOpCode)
)

func (k Kind) String() string {
	switch k {
	case SegmentSent:
		return "segment-sent"
	case SegmentPlaced:
		return "segment-placed"
	case MessageDelivered:
		return "message-delivered"
	case Completion:
		return "completion"
	case Terminate:
		return "terminate"
	case StateChange:
		return "state"
	case Error:
		return "error"
	case Disconnected:
		return "disconnected"
	case LLPLost:
		return "llp-lost"
	case AtomicExecuted:
		return "atomic-executed"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one thing that happened on a stream. Which fields are set
// depends on Kind: segment events carry the DDP header fields (STag/TO for
// tagged, QN/MSN/MO for untagged), Len is the payload length of a segment
// or the length of a message or completion.
type Event struct {
	Kind   Kind
	Stream uint32 // the stream's identifier within its connection (SCTP stream, or 0)
	Seq    uint32 // the LLP's sequence number of the segment (DDP-SSN over SCTP)

	Tagged bool
	Last   bool
	Opcode uint8 // RDMAP opcode (the low nibble of RsvdULP[0])
	STag   uint32
	TO     uint64
	QN     uint32
	MSN    uint32
	MO     uint32
	Len    uint32

	WRID   uint64 // completions: the work request's id
	Status uint8  // completions: the status code
	State  string // state changes: the new state's name
	Err    *term.Error
}

// Observer receives events. Observe is called synchronously on the
// stream's own goroutine: it must return quickly and must not call back
// into the stream.
type Observer interface {
	Observe(Event)
}

// Func adapts a function to the Observer interface.
type Func func(Event)

// Observe calls f(e).
func (f Func) Observe(e Event) { f(e) }
