package chunk

import "encoding/binary"

// Offsets of the I-DATA chunk's fields, and the length of its header.
const (
	idataTSNOff = 4
	idataSIDOff = 8
	idataMIDOff = 12
	idataPPIOff = 16 // PPID or FSN

	// IDataHeaderLen is the length of an I-DATA chunk without its user
	// data.
	IDataHeaderLen = 20
)

// IData is an I-DATA chunk (RFC 8260 §2.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 64   |  Res  |I|U|B|E|       Length = Variable       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              TSN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Stream Identifier      |           Reserved            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Message Identifier                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Payload Protocol Identifier / Fragment Sequence Number     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                           User Data                           /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "If the B bit is set, this field contains the PPID of the user message
// ... In this case, the FSN is implicitly considered to be 0. If the B bit
// is not set, this field contains the FSN." Append writes PPID when
// FlagBeginning is set and FSN otherwise; ParseIData fills the one the B
// bit selects and leaves the other 0. The Reserved field "MUST be set to 0
// by the sender and MUST be ignored by the receiver."
type IData struct {
	Flags    DataFlags
	TSN      uint32
	StreamID uint16 // Stream Identifier (SID)
	MID      uint32 // Message Identifier
	PPID     uint32 // Payload Protocol Identifier, with the B bit
	FSN      uint32 // Fragment Sequence Number, without the B bit
	// UserData aliases the packet after ParseIData; Append copies it.
	UserData []byte
}

// Len returns the bytes Append adds: header, user data and padding.
func (d IData) Len() int { return padLen(IDataHeaderLen + len(d.UserData)) }

// Append appends the chunk, its user data and its padding to b.
func (d IData) Append(b []byte) []byte {
	l := IDataHeaderLen + len(d.UserData)
	b = d.appendHeader(b, l)
	b = append(b, d.UserData...)
	return appendPad(b, l)
}

// AppendReserve is Data.AppendReserve for I-DATA: it appends the chunk for n
// bytes of user data and returns where they go.
func (d IData) AppendReserve(b []byte, n int) (out, userData []byte) {
	l := IDataHeaderLen + n
	b = d.appendHeader(b, l)
	return reserve(b, n, padLen(l)-l)
}

func (d IData) appendHeader(b []byte, length int) []byte {
	b = appendChunkHeader(b, TypeIData, uint8(d.Flags&dataFlagsMask), length)
	b = binary.BigEndian.AppendUint32(b, d.TSN)
	b = binary.BigEndian.AppendUint16(b, d.StreamID)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint32(b, d.MID)
	if d.Flags&FlagBeginning != 0 {
		return binary.BigEndian.AppendUint32(b, d.PPID)
	}
	return binary.BigEndian.AppendUint32(b, d.FSN)
}

// ParseIData parses the I-DATA chunk at the start of b and returns it and
// the bytes it occupies with its padding. UserData aliases b. As ParseData,
// it returns the header fields with ErrNoUserData for a chunk without user
// data.
func ParseIData(b []byte) (IData, int, error) {
	flags, v, n, err := parseChunk(b, TypeIData, IDataHeaderLen)
	if err != nil {
		return IData{}, 0, err
	}
	d := IData{
		Flags:    DataFlags(flags) & dataFlagsMask,
		TSN:      binary.BigEndian.Uint32(b[idataTSNOff:]),
		StreamID: binary.BigEndian.Uint16(b[idataSIDOff:]),
		MID:      binary.BigEndian.Uint32(b[idataMIDOff:]),
		UserData: v[IDataHeaderLen-chunkHeaderLen:],
	}
	if d.Flags&FlagBeginning != 0 {
		d.PPID = binary.BigEndian.Uint32(b[idataPPIOff:])
	} else {
		d.FSN = binary.BigEndian.Uint32(b[idataPPIOff:])
	}
	if len(d.UserData) == 0 {
		d.UserData = nil
		return d, n, chunkErr(TypeIData, 0, ErrNoUserData)
	}
	return d, n, nil
}
