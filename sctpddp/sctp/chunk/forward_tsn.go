package chunk

import "encoding/binary"

// ForwardTSN is a FORWARD TSN chunk (RFC 3758 §3.2), by which the data
// sender moves the receiver's cumulative TSN forward past abandoned DATA
// chunks:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 192  |  Flags = 0x00 |        Length = Variable      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      New Cumulative TSN                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Stream-1              |       Stream Sequence-1       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               /
//	/                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Stream-N              |       Stream Sequence-N       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Streams holds the (Stream, Stream Sequence) pairs in wire form.
type ForwardTSN struct {
	NewCumulativeTSN uint32
	Streams          ForwardTSNStreams
}

// Len returns the bytes Append adds.
func (f ForwardTSN) Len() int { return 8 + len(f.Streams) }

// Append appends the chunk to b.
func (f ForwardTSN) Append(b []byte) []byte {
	b = appendChunkHeader(b, TypeForwardTSN, 0, f.Len())
	b = binary.BigEndian.AppendUint32(b, f.NewCumulativeTSN)
	return append(b, f.Streams...)
}

// ParseForwardTSN parses the FORWARD TSN chunk at the start of b. Its Length
// must be 8 plus 4 bytes per stream. Streams aliases b.
func ParseForwardTSN(b []byte) (ForwardTSN, int, error) {
	_, v, n, err := parseChunk(b, TypeForwardTSN, 8)
	if err != nil {
		return ForwardTSN{}, 0, err
	}
	if (len(v)-4)%4 != 0 {
		return ForwardTSN{}, 0, chunkErr(TypeForwardTSN, 0, ErrLength)
	}
	f := ForwardTSN{NewCumulativeTSN: binary.BigEndian.Uint32(v)}
	if len(v) > 4 {
		f.Streams = ForwardTSNStreams(v[4:])
	}
	return f, n, nil
}

// ForwardTSNStream is one entry of a FORWARD TSN: the largest Stream
// Sequence Number skipped on a stream.
type ForwardTSNStream struct {
	StreamID uint16 // Stream
	SSN      uint16 // Stream Sequence
}

// ForwardTSNStreams is a FORWARD TSN's list of entries in wire form, 4
// bytes each.
type ForwardTSNStreams []byte

// Len returns the number of entries.
func (l ForwardTSNStreams) Len() int { return len(l) / 4 }

// At returns the i-th entry.
func (l ForwardTSNStreams) At(i int) ForwardTSNStream {
	return ForwardTSNStream{
		StreamID: binary.BigEndian.Uint16(l[4*i:]),
		SSN:      binary.BigEndian.Uint16(l[4*i+2:]),
	}
}

// AppendStream appends an entry to the list.
func (l ForwardTSNStreams) AppendStream(streamID, ssn uint16) ForwardTSNStreams {
	l = binary.BigEndian.AppendUint16(l, streamID)
	return binary.BigEndian.AppendUint16(l, ssn)
}
