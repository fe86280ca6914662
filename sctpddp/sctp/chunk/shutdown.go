package chunk

import "encoding/binary"

// Shutdown is a Shutdown Association (SHUTDOWN) chunk (RFC 9260 §3.3.8):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 7    |  Chunk Flags  |          Length = 8           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Cumulative TSN Ack                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type Shutdown struct {
	CumulativeTSNAck uint32
}

// Len returns the bytes Append adds.
func (s Shutdown) Len() int { return 8 }

// Append appends the chunk to b.
func (s Shutdown) Append(b []byte) []byte {
	b = appendChunkHeader(b, TypeShutdown, 0, 8)
	return binary.BigEndian.AppendUint32(b, s.CumulativeTSNAck)
}

// ParseShutdown parses the SHUTDOWN chunk at the start of b; its Length
// must be 8.
func ParseShutdown(b []byte) (Shutdown, int, error) {
	_, v, n, err := parseFixedChunk(b, TypeShutdown, 8)
	if err != nil {
		return Shutdown{}, 0, err
	}
	return Shutdown{CumulativeTSNAck: binary.BigEndian.Uint32(v)}, n, nil
}
