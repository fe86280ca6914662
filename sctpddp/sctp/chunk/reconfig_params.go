package chunk

import "encoding/binary"

// The Re-configuration parameters of RFC 6525 §4, carried in RE-CONFIG
// chunks.

// StreamList is a list of 16-bit Stream Numbers in wire form, as the SSN
// Reset Requests carry them. An empty list asks for all streams: "If no
// streams are listed, then all streams are to be reset."
type StreamList []byte

// Len returns the number of streams.
func (l StreamList) Len() int { return len(l) / 2 }

// At returns the i-th Stream Number.
func (l StreamList) At(i int) uint16 { return binary.BigEndian.Uint16(l[2*i:]) }

// AppendStream appends a Stream Number to the list.
func (l StreamList) AppendStream(sid uint16) StreamList {
	return binary.BigEndian.AppendUint16(l, sid)
}

// OutgoingSSNResetRequest is the Outgoing SSN Reset Request parameter (RFC
// 6525 §4.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Parameter Type = 13       | Parameter Length = 16 + 2 * N |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Re-configuration Request Sequence Number            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Re-configuration Response Sequence Number           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Sender's Last Assigned TSN                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Stream Number 1 (optional)   |    Stream Number 2 (optional) |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                            ......                             /
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Stream Number N-1 (optional) |    Stream Number N (optional) |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type OutgoingSSNResetRequest struct {
	RequestSeq    uint32 // Re-configuration Request Sequence Number
	ResponseSeq   uint32 // Re-configuration Response Sequence Number
	SenderLastTSN uint32 // Sender's Last Assigned TSN
	Streams       StreamList
}

// Len returns the bytes Append adds, padding included.
func (p OutgoingSSNResetRequest) Len() int { return padLen(16 + len(p.Streams)) }

// Append appends the parameter and its padding to b.
func (p OutgoingSSNResetRequest) Append(b []byte) []byte {
	l := 16 + len(p.Streams)
	b = appendParamHeader(b, ParamOutgoingSSNResetRequest, l)
	b = binary.BigEndian.AppendUint32(b, p.RequestSeq)
	b = binary.BigEndian.AppendUint32(b, p.ResponseSeq)
	b = binary.BigEndian.AppendUint32(b, p.SenderLastTSN)
	b = append(b, p.Streams...)
	return appendPad(b, l)
}

// ParseOutgoingSSNResetRequest parses the Outgoing SSN Reset Request
// parameter at the start of b ("the value MUST be 16 + 2 * N"). Streams
// aliases b.
func ParseOutgoingSSNResetRequest(b []byte) (OutgoingSSNResetRequest, int, error) {
	p, n, err := parseParamOf(b, ParamOutgoingSSNResetRequest)
	if err != nil {
		return OutgoingSSNResetRequest{}, 0, err
	}
	v := p.Value()
	r := OutgoingSSNResetRequest{
		RequestSeq:    binary.BigEndian.Uint32(v),
		ResponseSeq:   binary.BigEndian.Uint32(v[4:]),
		SenderLastTSN: binary.BigEndian.Uint32(v[8:]),
	}
	if len(v) > 12 {
		r.Streams = StreamList(v[12:])
	}
	return r, n, nil
}

// IncomingSSNResetRequest is the Incoming SSN Reset Request parameter (RFC
// 6525 §4.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Parameter Type = 14       |  Parameter Length = 8 + 2 * N |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Re-configuration Request Sequence Number             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Stream Number 1 (optional)   |    Stream Number 2 (optional) |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                            ......                             /
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Stream Number N-1 (optional) |    Stream Number N (optional) |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IncomingSSNResetRequest struct {
	RequestSeq uint32 // Re-configuration Request Sequence Number
	Streams    StreamList
}

// Len returns the bytes Append adds, padding included.
func (p IncomingSSNResetRequest) Len() int { return padLen(8 + len(p.Streams)) }

// Append appends the parameter and its padding to b.
func (p IncomingSSNResetRequest) Append(b []byte) []byte {
	l := 8 + len(p.Streams)
	b = appendParamHeader(b, ParamIncomingSSNResetRequest, l)
	b = binary.BigEndian.AppendUint32(b, p.RequestSeq)
	b = append(b, p.Streams...)
	return appendPad(b, l)
}

// ParseIncomingSSNResetRequest parses the Incoming SSN Reset Request
// parameter at the start of b ("the value MUST be 8 + 2 * N"). Streams
// aliases b.
func ParseIncomingSSNResetRequest(b []byte) (IncomingSSNResetRequest, int, error) {
	p, n, err := parseParamOf(b, ParamIncomingSSNResetRequest)
	if err != nil {
		return IncomingSSNResetRequest{}, 0, err
	}
	v := p.Value()
	r := IncomingSSNResetRequest{RequestSeq: binary.BigEndian.Uint32(v)}
	if len(v) > 4 {
		r.Streams = StreamList(v[4:])
	}
	return r, n, nil
}

// SSNTSNResetRequest is the SSN/TSN Reset Request parameter (RFC 6525
// §4.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Parameter Type = 15       |      Parameter Length = 8     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Re-configuration Request Sequence Number              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type SSNTSNResetRequest struct {
	RequestSeq uint32 // Re-configuration Request Sequence Number
}

// Len returns the bytes Append adds.
func (p SSNTSNResetRequest) Len() int { return 8 }

// Append appends the parameter to b.
func (p SSNTSNResetRequest) Append(b []byte) []byte {
	return appendParamUint32(b, ParamSSNTSNResetRequest, p.RequestSeq)
}

// ParseSSNTSNResetRequest parses the SSN/TSN Reset Request parameter at the
// start of b ("the value MUST be 8").
func ParseSSNTSNResetRequest(b []byte) (SSNTSNResetRequest, int, error) {
	p, n, err := parseParamOf(b, ParamSSNTSNResetRequest)
	if err != nil {
		return SSNTSNResetRequest{}, 0, err
	}
	return SSNTSNResetRequest{RequestSeq: binary.BigEndian.Uint32(p.Value())}, n, nil
}

// ReconfigResult is the Result of a Re-configuration Response (RFC 6525
// §4.4, Table 3).
type ReconfigResult uint32

const (
	ResultSuccessNothingToDo ReconfigResult = 0 // Success - Nothing to do
	ResultSuccessPerformed   ReconfigResult = 1 // Success - Performed
	ResultDenied             ReconfigResult = 2 // Denied
	ResultErrorWrongSSN      ReconfigResult = 3 // Error - Wrong SSN
	ResultErrorInProgress    ReconfigResult = 4 // Error - Request already in progress
	ResultErrorBadSequence   ReconfigResult = 5 // Error - Bad Sequence Number
	ResultInProgress         ReconfigResult = 6 // In progress
)

var reconfigResultNames = [...]string{
	"Success - Nothing to do",
	"Success - Performed",
	"Denied",
	"Error - Wrong SSN",
	"Error - Request already in progress",
	"Error - Bad Sequence Number",
	"In progress",
}

func (r ReconfigResult) String() string {
	if int(r) < len(reconfigResultNames) {
		return reconfigResultNames[r]
	}
	return "Result " + uitoa(uint32(r))
}

// ReconfigResponse is the Re-configuration Response parameter (RFC 6525
// §4.4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Parameter Type = 16       |      Parameter Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Re-configuration Response Sequence Number             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Result                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Sender's Next TSN (optional)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Receiver's Next TSN (optional)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "Either both optional fields (Sender's Next TSN and Receiver's Next TSN)
// MUST be present, or no field": HasNextTSNs says which, and the Parameter
// Length is 20 or 12 accordingly.
type ReconfigResponse struct {
	ResponseSeq     uint32 // Re-configuration Response Sequence Number
	Result          ReconfigResult
	HasNextTSNs     bool
	SenderNextTSN   uint32 // Sender's Next TSN, with HasNextTSNs
	ReceiverNextTSN uint32 // Receiver's Next TSN, with HasNextTSNs
}

// Len returns the bytes Append adds.
func (p ReconfigResponse) Len() int {
	if p.HasNextTSNs {
		return 20
	}
	return 12
}

// Append appends the parameter to b.
func (p ReconfigResponse) Append(b []byte) []byte {
	b = appendParamHeader(b, ParamReconfigResponse, p.Len())
	b = binary.BigEndian.AppendUint32(b, p.ResponseSeq)
	b = binary.BigEndian.AppendUint32(b, uint32(p.Result))
	if p.HasNextTSNs {
		b = binary.BigEndian.AppendUint32(b, p.SenderNextTSN)
		b = binary.BigEndian.AppendUint32(b, p.ReceiverNextTSN)
	}
	return b
}

// ParseReconfigResponse parses the Re-configuration Response parameter at
// the start of b ("the value MUST be 12 if the optional fields are not
// present and 20 otherwise").
func ParseReconfigResponse(b []byte) (ReconfigResponse, int, error) {
	p, n, err := parseParamOf(b, ParamReconfigResponse)
	if err != nil {
		return ReconfigResponse{}, 0, err
	}
	v := p.Value()
	r := ReconfigResponse{
		ResponseSeq: binary.BigEndian.Uint32(v),
		Result:      ReconfigResult(binary.BigEndian.Uint32(v[4:])),
	}
	if len(v) == 16 {
		r.HasNextTSNs = true
		r.SenderNextTSN = binary.BigEndian.Uint32(v[8:])
		r.ReceiverNextTSN = binary.BigEndian.Uint32(v[12:])
	}
	return r, n, nil
}

// AddStreamsRequest is the Add Outgoing Streams Request parameter (RFC 6525
// §4.5, type 17) or, with Incoming, the Add Incoming Streams Request
// parameter (§4.6, type 18); they share one layout:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Parameter Type = 17       |      Parameter Length = 12    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Re-configuration Request Sequence Number             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Number of new streams    |         Reserved              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Reserved "SHOULD be set to 0 by the sender and ignored by the receiver".
type AddStreamsRequest struct {
	Incoming      bool   // type 18 rather than 17
	RequestSeq    uint32 // Re-configuration Request Sequence Number
	NumNewStreams uint16 // Number of new streams
}

func (p AddStreamsRequest) paramType() ParamType {
	if p.Incoming {
		return ParamAddIncomingStreams
	}
	return ParamAddOutgoingStreams
}

// Len returns the bytes Append adds.
func (p AddStreamsRequest) Len() int { return 12 }

// Append appends the parameter to b.
func (p AddStreamsRequest) Append(b []byte) []byte {
	b = appendParamHeader(b, p.paramType(), 12)
	b = binary.BigEndian.AppendUint32(b, p.RequestSeq)
	b = binary.BigEndian.AppendUint16(b, p.NumNewStreams)
	return append(b, 0, 0)
}

// ParseAddStreamsRequest parses the Add Outgoing or Add Incoming Streams
// Request parameter at the start of b ("the value MUST be 12").
func ParseAddStreamsRequest(b []byte) (AddStreamsRequest, int, error) {
	p, n, err := ParseParam(b)
	if err != nil {
		return AddStreamsRequest{}, 0, err
	}
	t := p.Type()
	if t != ParamAddOutgoingStreams && t != ParamAddIncomingStreams {
		return AddStreamsRequest{}, 0, paramErr(t, 0, ErrWrongType)
	}
	v := p.Value()
	return AddStreamsRequest{
		Incoming:      t == ParamAddIncomingStreams,
		RequestSeq:    binary.BigEndian.Uint32(v),
		NumNewStreams: binary.BigEndian.Uint16(v[4:]),
	}, n, nil
}

// uitoa formats v in decimal without fmt.
func uitoa(v uint32) string {
	var buf [10]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(buf[i:])
		}
	}
}
