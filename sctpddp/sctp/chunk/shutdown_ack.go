package chunk

// ShutdownAck is a Shutdown Acknowledgement (SHUTDOWN ACK) chunk (RFC 9260
// §3.3.9), which has no parameters:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 8    |  Chunk Flags  |          Length = 4           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type ShutdownAck struct{}

// Len returns the bytes Append adds.
func (ShutdownAck) Len() int { return chunkHeaderLen }

// Append appends the chunk to b.
func (ShutdownAck) Append(b []byte) []byte {
	return appendChunkHeader(b, TypeShutdownAck, 0, chunkHeaderLen)
}

// ParseShutdownAck parses the SHUTDOWN ACK chunk at the start of b; its
// Length must be 4.
func ParseShutdownAck(b []byte) (ShutdownAck, int, error) {
	_, _, n, err := parseFixedChunk(b, TypeShutdownAck, chunkHeaderLen)
	return ShutdownAck{}, n, err
}
