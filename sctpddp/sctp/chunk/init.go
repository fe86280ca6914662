package chunk

import (
	"encoding/binary"
	"errors"
)

// Offsets of the fixed fields of INIT and INIT ACK chunks, and their length
// with the chunk header.
const (
	initTagOff   = 4
	initARwndOff = 8
	initOSOff    = 12
	initMISOff   = 14
	initTSNOff   = 16

	initFixedLen = 20
)

// MinARwnd is the smallest a_rwnd an INIT or INIT ACK may carry (RFC 9260
// §3.3.2: "The Advertised Receiver Window Credit MUST NOT be smaller than
// 1500").
const MinARwnd = 1500

// Init is an Initiation (INIT) chunk (RFC 9260 §3.3.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 1    |  Chunk Flags  |      Chunk Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Initiate Tag                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Advertised Receiver Window Credit (a_rwnd)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Number of Outbound Streams   |   Number of Inbound Streams   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Initial TSN                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/              Optional/Variable-Length Parameters              /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Params holds the Optional/Variable-Length Parameters in wire form: built
// by appending parameters (IPv4Address.Append, SupportedExtensions.Append,
// AdaptationLayerIndication.Append, ...) to a byte slice, read with
// Params(i.Params). ParseInit checks every parameter's length; it does not
// act on them. The Chunk Flags are reserved ("SHOULD be set to 0 by the
// sender and ignored by the receiver").
//
// RFC 9260 §3.3.2.1.4 says the receiver of a Host Name Address parameter
// "MUST send an ABORT chunk and MAY include an Unresolvable Address error
// cause": the parameter is recognised (ParamHostNameAddress) so that the
// association can do so rather than treat it as unknown.
type Init struct {
	InitiateTag        uint32
	ARwnd              uint32 // Advertised Receiver Window Credit (a_rwnd)
	NumOutboundStreams uint16 // OS
	NumInboundStreams  uint16 // MIS
	InitialTSN         uint32
	Params             []byte
}

// Len returns the bytes Append adds, padding included.
func (i Init) Len() int { return padLen(initFixedLen + len(i.Params)) }

// Append appends the chunk and its padding to b.
func (i Init) Append(b []byte) []byte { return appendInit(b, TypeInit, i) }

// Check applies to the fixed fields the checks RFC 9260 §3.3.2 asks of the
// receiver of an INIT. It returns an error wrapping ErrZeroInitiateTag ("If
// the value of the Initiate Tag in a received INIT chunk is found to be 0,
// the receiver MUST silently discard the packet"), ErrSmallARwnd or
// ErrZeroStreams (for which the receiver "MUST discard the packet, SHOULD
// send a packet in response containing an ABORT chunk and using the
// Initiate Tag as the Verification Tag"), or nil.
func (i Init) Check() error { return checkInit(TypeInit, i) }

// ParseInit parses the INIT chunk at the start of b and returns it and the
// bytes it occupies with its padding. Params aliases b.
func ParseInit(b []byte) (Init, int, error) { return parseInit(b, TypeInit) }

// StateCookie returns the value of the first State Cookie parameter in a
// parameter list, and whether there is one.
func StateCookie(params []byte) ([]byte, bool) {
	it := Params(params)
	for it.Next() {
		if p := it.Param(); p.Type() == ParamStateCookie {
			return p.Value(), true
		}
	}
	return nil, false
}

func appendInit(b []byte, t Type, i Init) []byte {
	l := initFixedLen + len(i.Params)
	b = appendChunkHeader(b, t, 0, l)
	b = binary.BigEndian.AppendUint32(b, i.InitiateTag)
	b = binary.BigEndian.AppendUint32(b, i.ARwnd)
	b = binary.BigEndian.AppendUint16(b, i.NumOutboundStreams)
	b = binary.BigEndian.AppendUint16(b, i.NumInboundStreams)
	b = binary.BigEndian.AppendUint32(b, i.InitialTSN)
	b = append(b, i.Params...)
	return appendPad(b, l)
}

func parseInit(b []byte, t Type) (Init, int, error) {
	_, v, n, err := parseChunk(b, t, initFixedLen)
	if err != nil {
		return Init{}, 0, err
	}
	i := Init{
		InitiateTag:        binary.BigEndian.Uint32(b[initTagOff:]),
		ARwnd:              binary.BigEndian.Uint32(b[initARwndOff:]),
		NumOutboundStreams: binary.BigEndian.Uint16(b[initOSOff:]),
		NumInboundStreams:  binary.BigEndian.Uint16(b[initMISOff:]),
		InitialTSN:         binary.BigEndian.Uint32(b[initTSNOff:]),
	}
	if p := v[initFixedLen-chunkHeaderLen:]; len(p) > 0 {
		i.Params = p
	}
	if _, err := checkParams(i.Params); err != nil {
		return Init{}, 0, &ChunkError{Type: t, Err: err}
	}
	return i, n, nil
}

func checkInit(t Type, i Init) error {
	var err error
	switch {
	case i.InitiateTag == 0:
		err = ErrZeroInitiateTag
	case i.ARwnd < MinARwnd:
		err = ErrSmallARwnd
	case i.NumOutboundStreams == 0 || i.NumInboundStreams == 0:
		err = ErrZeroStreams
	default:
		return nil
	}
	return chunkErr(t, 0, err)
}

// ErrMissingStateCookie reports an INIT ACK without the State Cookie
// parameter RFC 9260 §3.3.3 makes mandatory (Table 8).
var ErrMissingStateCookie = errors.New("INIT ACK without State Cookie")
