package chunk

// CookieAck is a Cookie Acknowledgement (COOKIE ACK) chunk (RFC 9260
// §3.3.12):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 11   |  Chunk Flags  |          Length = 4           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type CookieAck struct{}

// Len returns the bytes Append adds.
func (CookieAck) Len() int { return chunkHeaderLen }

// Append appends the chunk to b.
func (CookieAck) Append(b []byte) []byte {
	return appendChunkHeader(b, TypeCookieAck, 0, chunkHeaderLen)
}

// ParseCookieAck parses the COOKIE ACK chunk at the start of b; its Length
// must be 4.
func ParseCookieAck(b []byte) (CookieAck, int, error) {
	_, _, n, err := parseFixedChunk(b, TypeCookieAck, chunkHeaderLen)
	return CookieAck{}, n, err
}
