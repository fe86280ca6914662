package chunk

import "encoding/binary"

// ASCONF is an Address Configuration Change (ASCONF) chunk (RFC 5061
// §4.1.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Type = 0xC1   |  Chunk Flags  |      Chunk Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Sequence Number                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Address Parameter                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     ASCONF Parameter #1                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                             ....                              /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     ASCONF Parameter #N                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Params holds the Address Parameter and the ASCONF Parameters in wire
// form (IPv4Address.Append, then AddressRequest.Append...). The Address
// Parameter "MUST be present in every ASCONF message": ParseASCONF rejects
// a chunk whose first parameter is not an IPv4 or IPv6 Address with
// ErrParamCount. The chunk "MUST be sent in an authenticated way by using
// the mechanism defined in [RFC4895]"; this package does not implement
// AUTH, so the association does not accept ASCONF from the wire.
type ASCONF struct {
	SequenceNumber uint32
	Params         []byte
}

// Len returns the bytes Append adds, padding included.
func (a ASCONF) Len() int { return padLen(8 + len(a.Params)) }

// Append appends the chunk and its padding to b.
func (a ASCONF) Append(b []byte) []byte {
	return appendSeqParamsChunk(b, TypeASCONF, a.SequenceNumber, a.Params)
}

// ParseASCONF parses the ASCONF chunk at the start of b and returns it and
// the bytes it occupies with its padding, checking its parameters'
// lengths. Params aliases b.
func ParseASCONF(b []byte) (ASCONF, int, error) {
	seq, params, n, err := parseSeqParamsChunk(b, TypeASCONF, 8+8)
	if err != nil {
		return ASCONF{}, 0, err
	}
	if t := Param(params).Type(); t != ParamIPv4Address && t != ParamIPv6Address {
		return ASCONF{}, 0, chunkErr(TypeASCONF, 0, ErrParamCount)
	}
	return ASCONF{SequenceNumber: seq, Params: params}, n, nil
}

func appendSeqParamsChunk(b []byte, t Type, seq uint32, params []byte) []byte {
	l := 8 + len(params)
	b = appendChunkHeader(b, t, 0, l)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = append(b, params...)
	return appendPad(b, l)
}

func parseSeqParamsChunk(b []byte, t Type, minLen int) (uint32, []byte, int, error) {
	_, v, n, err := parseChunk(b, t, minLen)
	if err != nil {
		return 0, nil, 0, err
	}
	params := v[4:]
	if _, err := checkParams(params); err != nil {
		return 0, nil, 0, &ChunkError{Type: t, Err: err}
	}
	if len(params) == 0 {
		params = nil
	}
	return binary.BigEndian.Uint32(v), params, n, nil
}
