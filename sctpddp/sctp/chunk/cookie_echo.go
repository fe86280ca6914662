package chunk

// CookieEcho is a Cookie Echo (COOKIE ECHO) chunk (RFC 9260 §3.3.11):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 10   |  Chunk Flags  |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                            Cookie                             /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "This field MUST contain the exact cookie received in the State Cookie
// parameter from the previous INIT ACK chunk."
type CookieEcho struct {
	Cookie []byte
}

// Len returns the bytes Append adds, padding included.
func (c CookieEcho) Len() int { return padLen(chunkHeaderLen + len(c.Cookie)) }

// Append appends the chunk and its padding to b.
func (c CookieEcho) Append(b []byte) []byte {
	return appendChunk(b, TypeCookieEcho, 0, c.Cookie)
}

// ParseCookieEcho parses the COOKIE ECHO chunk at the start of b and returns
// it and the bytes it occupies with its padding. Cookie aliases b.
func ParseCookieEcho(b []byte) (CookieEcho, int, error) {
	_, v, n, err := parseChunk(b, TypeCookieEcho, chunkHeaderLen)
	if err != nil {
		return CookieEcho{}, 0, err
	}
	var c CookieEcho
	if len(v) > 0 {
		c.Cookie = v
	}
	return c, n, nil
}
