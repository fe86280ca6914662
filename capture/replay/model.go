package replay

import "github.com/iwarpgo/iwarp/capture"

// MaxShown bounds the octets of one buffer that the model keeps for
// drawing: a buffer's extent may be megabytes, the page draws at most this
// many cells of it.
const MaxShown = 512

// Model is a capture as the page plays it.
type Model struct {
	Conns   []Conn   `json:"conns"`
	Streams []Stream `json:"streams"`
	Buffers []Buffer `json:"buffers"`
	// Events are in capture order (iwarp dump's order), one per record.
	Events []Event `json:"-"`
	// Segments counts the events that are FPDUs or DDP Segments.
	Segments int `json:"segments"`
	// Delivered counts the messages delivered.
	Delivered int `json:"delivered"`
	// Errors counts the records that could not be decoded (EventError):
	// octets missing from a stream, as a snaplen cut or a lost packet
	// leaves it, or a frame or FPDU that does not parse.
	Errors int `json:"errors"`
}

// Conn is an MPA/TCP connection or an SCTP association.
type Conn struct {
	ID        int    `json:"id"` // from 1, over both transports
	Transport string `json:"transport"`
	// CaptureConn is the connection's number in iwarp dump ("c1"),
	// which counts each transport from 1.
	CaptureConn int `json:"capture_conn"`
	// Initiator sent the MPA Request (tcp) or the first message (sctp).
	Initiator string `json:"initiator"`
	Responder string `json:"responder"`
	Request   *Frame `json:"request,omitempty"`
	Reply     *Frame `json:"reply,omitempty"`
	// CRC and the Markers of each direction, as the frames negotiated
	// them (RFC 5044 §7.1): CRCs are used when either end asks, Markers
	// towards an end that asks for them.
	CRC                bool `json:"crc"`
	MarkersToInitiator bool `json:"markers_to_initiator"`
	MarkersToResponder bool `json:"markers_to_responder"`
}

// Frame is an MPA Request or Reply Frame's fields (RFC 5044 §7.1, with
// RFC 6581's enhanced startup).
type Frame struct {
	Reply    bool   `json:"reply"`
	Rev      uint8  `json:"rev"`
	Markers  bool   `json:"markers"`
	CRC      bool   `json:"crc"`
	Reject   bool   `json:"reject"`
	Enhanced bool   `json:"enhanced"`
	IRD      uint16 `json:"ird,omitempty"`
	ORD      uint16 `json:"ord,omitempty"`
	// PeerToPeer and the RTR kinds of RFC 6581 §9.2.
	PeerToPeer bool `json:"peer_to_peer,omitempty"`
	SendRTR    bool `json:"send_rtr,omitempty"`
	WriteRTR   bool `json:"write_rtr,omitempty"`
	ReadRTR    bool `json:"read_rtr,omitempty"`
	// PrivateData is the ULP's private data (after the enhanced data).
	PrivateData []byte `json:"private_data"`
}

// Stream is one direction of a DDP stream: the segments one end sends
// to the other on one connection (and, over SCTP, one stream).
type Stream struct {
	ID         int     `json:"id"` // from 1
	Conn       int     `json:"conn"`
	Src        string  `json:"src"`
	Dst        string  `json:"dst"`
	SCTPStream *uint16 `json:"sctp_stream,omitempty"`
	Segments   int     `json:"segments"`
	Messages   int     `json:"messages"` // delivered
}

// Buffer is a place segments land in, in the memory of Owner (the
// receiving end): a tagged buffer (an STag's, from Base for Len octets, as
// far as the traffic shows it) or an untagged receive buffer (the one QN
// and MSN select, MO 0 to Len).
type Buffer struct {
	ID     int    `json:"id"` // from 1
	Conn   int    `json:"conn"`
	Owner  string `json:"owner"`
	Tagged bool   `json:"tagged"`
	STag   uint32 `json:"stag"`
	Base   uint64 `json:"base"`
	QN     uint32 `json:"qn"`
	MSN    uint32 `json:"msn"`
	Len    uint64 `json:"len"`
	// Shown is how many octets from the start the model keeps.
	Shown int `json:"shown"`
}

// Event kinds.
const (
	EventFrame   = "frame"   // an MPA Request or Reply Frame
	EventControl = "control" // a DDP Stream Session Control message
	EventSegment = "segment" // an FPDU or DDP Segment
	EventError   = "error"   // what could not be decoded
)

// Event is one record of the capture as the page plays it.
type Event struct {
	I      int             `json:"i"` // index in Model.Events
	Kind   string          `json:"kind"`
	Rec    *capture.Record `json:"rec"`
	Conn   int             `json:"conn"`
	Stream int             `json:"stream,omitempty"`
	// T is seconds from the first record.
	T float64 `json:"t"`
	// Seq is the segment's place in its stream's send order: the FPDU's
	// index over MPA, the unwrapped DDP-SSN over SCTP.
	Seq int64 `json:"seq"`
	// Buffer is where the payload lands (0: nowhere, as for a bad CRC,
	// a duplicate or a segment of zero octets), at Offset from its start.
	Buffer int    `json:"buffer,omitempty"`
	Offset uint64 `json:"offset"`
	// Delivered lists the segments (event indices) whose messages this
	// segment's placement delivers, in order.
	Delivered []int `json:"delivered,omitempty"`
	// Message is the index of the first segment of this segment's
	// message; Answers the event this one names: a Read Response's
	// Read Request, an Atomic Response's Atomic Request, a Terminate's
	// terminated segment (-1: none).
	Message int `json:"message"`
	Answers int `json:"answers"`
	// RTR marks the zero-length FPDU that ends RFC 6581's enhanced
	// startup.
	RTR bool `json:"rtr,omitempty"`
	// Terminated is the DDP header a Terminate carries, as read.
	Terminated *TerminatedHeader `json:"terminated,omitempty"`
	// Why says, in plain words, why nothing was placed or delivered.
	Why string `json:"why,omitempty"`
	// Refused marks a segment that a Terminate names: its receiver found
	// it in error and placed and delivered nothing of it.
	Refused bool `json:"refused,omitempty"`

	payload []byte
}

// TerminatedHeader is the DDP header (and the reading) a Terminate Message
// carries (RFC 5040 §4.8).
type TerminatedHeader struct {
	capture.DDP // the header's fields, in the JSON beside the others
	// Siw is true when the header was found through Linux siw's layout
	// of the Terminate Control (its M, D, R bits in the reserved octet).
	Siw bool `json:"siw,omitempty"`
	// Layer, EType and ECode are the triple as that reading gives it.
	Layer uint8  `json:"layer"`
	EType uint8  `json:"etype"`
	ECode uint8  `json:"ecode"`
	Name  string `json:"name"`
}

// Payload returns the octets a segment event carries after its DDP
// header; the slice aliases the model.
func (e *Event) Payload() []byte { return e.payload }
