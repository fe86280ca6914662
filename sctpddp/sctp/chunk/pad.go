package chunk

// padLen returns n rounded up to a multiple of 4: RFC 9260 §3.2 and §3.2.1
// have chunks and parameters padded to 4-byte boundaries.
func padLen(n int) int { return (n + 3) &^ 3 }

// PaddedLen returns the bytes a chunk or parameter of length n occupies on
// the wire: n rounded up to a multiple of 4.
func PaddedLen(n int) int { return padLen(n) }

var zeroPad [3]byte

// appendPad appends the zero bytes that pad a chunk or parameter of length n
// ("the sender MUST pad the chunk with all zero bytes ... MUST NOT pad with
// more than 3 bytes", RFC 9260 §3.2).
func appendPad(b []byte, n int) []byte {
	return append(b, zeroPad[:padLen(n)-n]...)
}
