package capture

import "time"

// Record kinds.
const (
	KindMPARequest     = "mpa_request"
	KindMPAReply       = "mpa_reply"
	KindFPDU           = "fpdu"            // tcp
	KindSegment        = "segment"         // sctp: a DDP Segment
	KindSessionControl = "session_control" // sctp: DDP Stream Session Control
	KindError          = "error"           // what could not be decoded; the note says why
)

// CRC states of an FPDU.
const (
	CRCGood = "good"
	CRCBad  = "bad"
	CRCOff  = "off" // the connection negotiated no CRCs
)

// Record is one MPA startup frame, FPDU, DDP Segment or session control
// message of a capture, or what could not be decoded. Its JSON encoding
// is a line of "iwarp dump --json".
type Record struct {
	N          int             `json:"n"` // from 1, in the order of Decode's result
	Time       time.Time       `json:"time"`
	Conn       int             `json:"conn"`      // the connection or association, from 1 in each transport
	Transport  string          `json:"transport"` // "tcp" or "sctp"
	Src        string          `json:"src"`
	Dst        string          `json:"dst"`
	Kind       string          `json:"kind"`
	Len        int             `json:"len"`           // octets: of the frame, the FPDU, or the SCTP message
	CRC        string          `json:"crc,omitempty"` // FPDUs
	SCTPStream *uint16         `json:"sctp_stream,omitempty"`
	DDPSSN     *uint16         `json:"ddp_ssn,omitempty"`
	Function   string          `json:"function,omitempty"` // session control
	DDP        *DDP            `json:"ddp,omitempty"`
	Opcode     *uint8          `json:"opcode,omitempty"`
	Op         string          `json:"op,omitempty"`
	PayloadLen *int            `json:"payload_len,omitempty"`
	ReadReq    *ReadRequest    `json:"read_request,omitempty"`
	Terminate  *Terminate      `json:"terminate,omitempty"`
	Atomic     *Atomic         `json:"atomic,omitempty"`
	AtomicResp *AtomicResponse `json:"atomic_response,omitempty"`
	Immediate  *uint64         `json:"immediate_data,omitempty"`
	InvSTag    *uint32         `json:"invalidate_stag,omitempty"`
	Note       string          `json:"note"`
	// Raw is the record's octets as they were decoded: the MPA Request
	// or Reply Frame, the DDP Segment an FPDU or DATA chunk carried
	// (Markers, CRC and DDP-SSN removed), or the session control
	// message. It aliases the capture's reassembled data.
	Raw []byte `json:"-"`

	order int // tie-break within one instant: stream position
}

// DDP is a DDP header's fields.
type DDP struct {
	Tagged bool   `json:"tagged"`
	Last   bool   `json:"last"`
	STag   uint32 `json:"stag"`
	TO     uint64 `json:"to"`
	QN     uint32 `json:"qn"`
	MSN    uint32 `json:"msn"`
	MO     uint32 `json:"mo"`
}

// ReadRequest is an RDMA Read Request's fields.
type ReadRequest struct {
	SinkSTag uint32 `json:"sink_stag"`
	SinkTO   uint64 `json:"sink_to"`
	Size     uint32 `json:"size"`
	SrcSTag  uint32 `json:"src_stag"`
	SrcTO    uint64 `json:"src_to"`
}

// Atomic is an Atomic Request's header (RFC 7306 Figure 4). Add or Swap
// Data and Mask are named as its AOpCode uses them.
type Atomic struct {
	AOpCode     uint8   `json:"aopcode"`
	AOp         string  `json:"aop"`
	RequestID   uint32  `json:"request_id"`
	STag        uint32  `json:"stag"`
	TO          uint64  `json:"to"`
	AddData     *uint64 `json:"add_data,omitempty"`
	AddMask     *uint64 `json:"add_mask,omitempty"`
	SwapData    *uint64 `json:"swap_data,omitempty"`
	SwapMask    *uint64 `json:"swap_mask,omitempty"`
	CompareData uint64  `json:"compare_data"`
	CompareMask uint64  `json:"compare_mask"`
}

// AtomicResponse is an Atomic Response's header (RFC 7306 Figure 6).
type AtomicResponse struct {
	OrigRequestID uint32 `json:"original_request_id"`
	OrigValue     uint64 `json:"original_value"`
}

// Terminate is a Terminate message's error: its Layer, Error Type and
// Error Code, and their names.
type Terminate struct {
	Layer     uint8  `json:"layer"`
	EType     uint8  `json:"etype"`
	ECode     uint8  `json:"ecode"`
	LayerName string `json:"layer_name"`
	Name      string `json:"name"`
}
