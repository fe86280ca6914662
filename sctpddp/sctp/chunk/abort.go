package chunk

// flagT is the T bit of the ABORT and SHUTDOWN COMPLETE chunks' flags.
const flagT = 1

// Abort is an Abort Association (ABORT) chunk (RFC 9260 §3.3.7):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 6    |  Reserved   |T|            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                   zero or more Error Causes                   /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "The T bit is set to 0 if the sender filled in the Verification Tag
// expected by the peer. If the Verification Tag is reflected, the T bit
// MUST be set to 1." Causes holds the error causes in wire form: built by
// appending causes (RawCause.Append, NoUserData.Append, ...) to a byte
// slice, read with Causes(a.Causes).
type Abort struct {
	T      bool
	Causes []byte
}

// Len returns the bytes Append adds, padding included.
func (a Abort) Len() int { return padLen(chunkHeaderLen + len(a.Causes)) }

// Append appends the chunk and its padding to b.
func (a Abort) Append(b []byte) []byte {
	var flags uint8
	if a.T {
		flags = flagT
	}
	return appendChunk(b, TypeAbort, flags, a.Causes)
}

// ParseAbort parses the ABORT chunk at the start of b and returns it and the
// bytes it occupies with its padding, checking each error cause's length.
// Causes aliases b. (RFC 9260 §3.3.7: "If an endpoint receives an ABORT
// chunk with a format error or no TCB is found, it MUST silently discard
// it.")
func ParseAbort(b []byte) (Abort, int, error) {
	flags, v, n, err := parseChunk(b, TypeAbort, chunkHeaderLen)
	if err != nil {
		return Abort{}, 0, err
	}
	if err := checkCauses(v); err != nil {
		return Abort{}, 0, &ChunkError{Type: TypeAbort, Err: err}
	}
	a := Abort{T: flags&flagT != 0}
	if len(v) > 0 {
		a.Causes = v
	}
	return a, n, nil
}
