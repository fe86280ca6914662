package wire

// SSN is a DDP Source Sequence Number (DDP-SSN), RFC 5043 §5.2.1: "A
// stream-specific sequence number assigned by the adaptation layer for each
// SCTP Data Chunk sent. This is the order that chunks were submitted to
// SCTP, no matter in what order they are actually sent or received."
//
// "The DDP-SSN MUST have the same value that the SCTP Stream Sequence Number
// (SSN) would have been assigned had ordered SCTP Payload Data Chunks been
// used rather than unordered." (§5.2.1) So, like the SCTP SSN of RFC 4960
// §6.5, it counts messages (not fragments) per outbound stream, starts at 0
// ("The DDP-SSN is reset to zero at the beginning of each DDP Stream
// Session", §6.1), and wraps from 65535 to 0.
//
// DDP-SSNs are compared with 16-bit serial number arithmetic (RFC 1982 with
// SERIAL_BITS = 16), which RFC 5043 §10 relies on: "The DDP-SSN can be used
// without special logic to determine the submission sequence when the
// maximum number of in-flight messages is less than 32768."
type SSN uint16

// MaxInFlight is the largest number of Data Chunks a sender may have
// unacknowledged on one stream, RFC 5043 §10: "the sending DDP must simply
// refrain from sending more than 32767 Data Chunks for a single stream
// without acknowledgment."
const MaxInFlight = 32767

// Next returns the DDP-SSN that follows s, wrapping from 65535 to 0.
func (s SSN) Next() SSN { return s + 1 }

// Less reports whether s was submitted before t, in 16-bit serial number
// arithmetic: t is 1 to 32767 steps after s. When t is exactly 32768 steps
// away the order is undefined (RFC 1982 §3.2) and Less is false both ways;
// a sender that keeps to MaxInFlight never produces that distance.
func (s SSN) Less(t SSN) bool {
	d := uint16(t - s)
	return d != 0 && d < 0x8000
}

// Distance returns how many DDP-SSNs t is after s, modulo 2^16: the number
// of Data Chunks submitted from s (inclusive) up to t (exclusive).
func (s SSN) Distance(t SSN) uint16 { return uint16(t - s) }

// InWindow is the receiver's validity check of RFC 5043 §10: "The receiver
// MAY perform a validity check on received DDP-SSNs to ensure that any gap
// could be accounted for by unreceived Data Chunks. Implementations SHOULD
// NOT allocate resources on the assumption that DDP-SSNs are valid without
// first performing such a validity check."
//
// next is the lowest DDP-SSN of the session not yet received. A sender
// never has more than MaxInFlight chunks unacknowledged, and every chunk
// before next has been received (so acknowledged or about to be), so any
// DDP-SSN it can have sent lies in [next, next+MaxInFlight). InWindow
// reports whether s does. A DDP-SSN before next is a duplicate; one beyond
// the window cannot be explained by chunks still in flight. "An invalid
// DDP-SSN MAY result in termination of the DDP stream." (§10)
func (s SSN) InWindow(next SSN) bool { return next.Distance(s) < MaxInFlight }

// CanSend reports whether a sender whose oldest unacknowledged Data Chunk
// on the stream has DDP-SSN oldest may submit the chunk numbered next
// without exceeding MaxInFlight (RFC 5043 §10). When nothing is
// unacknowledged, oldest equals next and CanSend is true.
func CanSend(next, oldest SSN) bool { return oldest.Distance(next) < MaxInFlight }
