package chunk

import (
	"encoding/binary"
	"slices"
)

// DataFlags are the Chunk Flags of DATA (RFC 9260 §3.3.1) and I-DATA (RFC
// 8260 §2.1) chunks: the I, U, B and E bits. The 4 Res bits are "set to 0 on
// transmit and ignored on receipt"; ParseData and ParseIData clear them and
// Append methods write them as 0.
type DataFlags uint8

const (
	FlagEnding    DataFlags = 1 << 0 // E bit: the last fragment of a user message
	FlagBeginning DataFlags = 1 << 1 // B bit: the first fragment of a user message
	FlagUnordered DataFlags = 1 << 2 // U bit: an unordered DATA chunk
	FlagImmediate DataFlags = 1 << 3 // I bit: the sender asks for a SACK without delay (RFC 7053)

	dataFlagsMask = FlagEnding | FlagBeginning | FlagUnordered | FlagImmediate
)

// Offsets of the DATA chunk's fields, and the length of its header.
const (
	dataTSNOff  = 4
	dataSIDOff  = 8
	dataSSNOff  = 10
	dataPPIDOff = 12

	// DataHeaderLen is the length of a DATA chunk without its user data.
	DataHeaderLen = 16
)

// Data is a Payload Data (DATA) chunk (RFC 9260 §3.3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 0    |  Res  |I|U|B|E|            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              TSN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Stream Identifier S      |   Stream Sequence Number n    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Payload Protocol Identifier                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                 User Data (seq n of Stream S)                 /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// PPID is carried as the upper layer gives it ("this field is not touched by
// an SCTP implementation"); this package writes and reads it big-endian,
// the byte order of RFC 5043's DDP PPIDs 16 and 17.
type Data struct {
	Flags    DataFlags
	TSN      uint32
	StreamID uint16 // Stream Identifier S
	SSN      uint16 // Stream Sequence Number n
	PPID     uint32 // Payload Protocol Identifier
	// UserData aliases the packet after ParseData; Append copies it.
	UserData []byte
}

// Len returns the bytes Append adds: header, user data and padding.
func (d Data) Len() int { return padLen(DataHeaderLen + len(d.UserData)) }

// Append appends the chunk, its user data and its padding to b.
//
// RFC 9260 §3.3.1 says the user data length "MUST be greater than 0";
// Append does not check, the association never sends empty user data.
func (d Data) Append(b []byte) []byte {
	l := DataHeaderLen + len(d.UserData)
	b = d.appendHeader(b, l)
	b = append(b, d.UserData...)
	return appendPad(b, l)
}

// AppendReserve appends the chunk for n bytes of user data without copying
// any: it writes the header (d.UserData is ignored), extends b by n bytes
// and the padding, and returns the extended buffer and the n bytes where the
// user data goes, for the caller to fill (a DDP header and the payload it
// precedes, say) before the packet is sent. The padding is zeroed; the user
// data bytes are left as the buffer held them. b grows only when its
// capacity is short.
func (d Data) AppendReserve(b []byte, n int) (out, userData []byte) {
	l := DataHeaderLen + n
	b = d.appendHeader(b, l)
	return reserve(b, n, padLen(l)-l)
}

func (d Data) appendHeader(b []byte, length int) []byte {
	b = appendChunkHeader(b, TypeData, uint8(d.Flags&dataFlagsMask), length)
	b = binary.BigEndian.AppendUint32(b, d.TSN)
	b = binary.BigEndian.AppendUint16(b, d.StreamID)
	b = binary.BigEndian.AppendUint16(b, d.SSN)
	return binary.BigEndian.AppendUint32(b, d.PPID)
}

// reserve extends b by n bytes left as they are and pad zero bytes, and
// returns the extended buffer and the n bytes.
func reserve(b []byte, n, pad int) (out, slot []byte) {
	start := len(b)
	b = slices.Grow(b, n+pad)
	b = b[:start+n+pad]
	clear(b[start+n:])
	return b, b[start : start+n : start+n]
}

// ParseData parses the DATA chunk at the start of b and returns it and the
// bytes it occupies with its padding. UserData aliases b.
//
// A chunk with no user data (Length 16) returns its header fields with an
// error wrapping ErrNoUserData, so that the association can send the No User
// Data error cause with its TSN.
func ParseData(b []byte) (Data, int, error) {
	flags, v, n, err := parseChunk(b, TypeData, DataHeaderLen)
	if err != nil {
		return Data{}, 0, err
	}
	d := Data{
		Flags:    DataFlags(flags) & dataFlagsMask,
		TSN:      binary.BigEndian.Uint32(b[dataTSNOff:]),
		StreamID: binary.BigEndian.Uint16(b[dataSIDOff:]),
		SSN:      binary.BigEndian.Uint16(b[dataSSNOff:]),
		PPID:     binary.BigEndian.Uint32(b[dataPPIDOff:]),
		UserData: v[DataHeaderLen-chunkHeaderLen:],
	}
	// RFC 9260 §3.3.1: "A DATA chunk with a User Data field of length L
	// will have the Length field set to (16 + L) ... where L MUST be
	// greater than 0."
	if len(d.UserData) == 0 {
		d.UserData = nil
		return d, n, chunkErr(TypeData, 0, ErrNoUserData)
	}
	return d, n, nil
}
