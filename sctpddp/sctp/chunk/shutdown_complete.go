package chunk

// ShutdownComplete is a Shutdown Complete (SHUTDOWN COMPLETE) chunk (RFC
// 9260 §3.3.13), which has no parameters:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 14   |  Reserved   |T|          Length = 4           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// T is as in Abort: set when the Verification Tag is reflected.
type ShutdownComplete struct {
	T bool
}

// Len returns the bytes Append adds.
func (ShutdownComplete) Len() int { return chunkHeaderLen }

// Append appends the chunk to b.
func (s ShutdownComplete) Append(b []byte) []byte {
	var flags uint8
	if s.T {
		flags = flagT
	}
	return appendChunkHeader(b, TypeShutdownComplete, flags, chunkHeaderLen)
}

// ParseShutdownComplete parses the SHUTDOWN COMPLETE chunk at the start of
// b; its Length must be 4.
func ParseShutdownComplete(b []byte) (ShutdownComplete, int, error) {
	flags, _, n, err := parseFixedChunk(b, TypeShutdownComplete, chunkHeaderLen)
	if err != nil {
		return ShutdownComplete{}, 0, err
	}
	return ShutdownComplete{T: flags&flagT != 0}, n, nil
}
