package chunk

import "encoding/binary"

// IForwardTSN is an I-FORWARD-TSN chunk (RFC 8260 §2.3.1), the FORWARD TSN
// of associations that use I-DATA:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 194  | Flags = 0x00  |      Length = Variable        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       New Cumulative TSN                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       Stream Identifier       |          Reserved           |U|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Message Identifier                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                                                               /
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       Stream Identifier       |          Reserved           |U|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Message Identifier                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Streams holds the entries in wire form. The Reserved bits "MUST be set to
// 0 by the sender and MUST be ignored by the receiver": AppendStream writes
// 0 and At ignores them.
type IForwardTSN struct {
	NewCumulativeTSN uint32
	Streams          IForwardTSNStreams
}

// Len returns the bytes Append adds.
func (f IForwardTSN) Len() int { return 8 + len(f.Streams) }

// Append appends the chunk to b.
func (f IForwardTSN) Append(b []byte) []byte {
	b = appendChunkHeader(b, TypeIForwardTSN, 0, f.Len())
	b = binary.BigEndian.AppendUint32(b, f.NewCumulativeTSN)
	return append(b, f.Streams...)
}

// ParseIForwardTSN parses the I-FORWARD-TSN chunk at the start of b. Its
// Length must be 8 plus 8 bytes per stream. Streams aliases b.
func ParseIForwardTSN(b []byte) (IForwardTSN, int, error) {
	_, v, n, err := parseChunk(b, TypeIForwardTSN, 8)
	if err != nil {
		return IForwardTSN{}, 0, err
	}
	if (len(v)-4)%8 != 0 {
		return IForwardTSN{}, 0, chunkErr(TypeIForwardTSN, 0, ErrLength)
	}
	f := IForwardTSN{NewCumulativeTSN: binary.BigEndian.Uint32(v)}
	if len(v) > 4 {
		f.Streams = IForwardTSNStreams(v[4:])
	}
	return f, n, nil
}

// IForwardTSNStream is one entry of an I-FORWARD-TSN: the largest Message
// Identifier skipped on a stream, for ordered or (U) unordered messages.
type IForwardTSNStream struct {
	StreamID  uint16
	Unordered bool // U bit
	MID       uint32
}

// IForwardTSNStreams is an I-FORWARD-TSN's list of entries in wire form, 8
// bytes each.
type IForwardTSNStreams []byte

// Len returns the number of entries.
func (l IForwardTSNStreams) Len() int { return len(l) / 8 }

// At returns the i-th entry.
func (l IForwardTSNStreams) At(i int) IForwardTSNStream {
	e := l[8*i:]
	return IForwardTSNStream{
		StreamID:  binary.BigEndian.Uint16(e),
		Unordered: e[3]&1 != 0,
		MID:       binary.BigEndian.Uint32(e[4:]),
	}
}

// AppendStream appends an entry to the list.
func (l IForwardTSNStreams) AppendStream(s IForwardTSNStream) IForwardTSNStreams {
	var u byte
	if s.Unordered {
		u = 1
	}
	l = binary.BigEndian.AppendUint16(l, s.StreamID)
	l = append(l, 0, u)
	return binary.BigEndian.AppendUint32(l, s.MID)
}
