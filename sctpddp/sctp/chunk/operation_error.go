package chunk

// OperationError is an Operation Error (ERROR) chunk (RFC 9260 §3.3.10):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 9    |  Chunk Flags  |            Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                   one or more Error Causes                    /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Causes holds the error causes in wire form, as in Abort. The chunk "is
// not considered fatal in and of itself".
type OperationError struct {
	Causes []byte
}

// Len returns the bytes Append adds, padding included.
func (e OperationError) Len() int { return padLen(chunkHeaderLen + len(e.Causes)) }

// Append appends the chunk and its padding to b.
func (e OperationError) Append(b []byte) []byte {
	return appendChunk(b, TypeError, 0, e.Causes)
}

// ParseOperationError parses the ERROR chunk at the start of b and returns
// it and the bytes it occupies with its padding, checking each error
// cause's length. Causes aliases b. An ERROR chunk without causes, which
// the sender should not send ("It contains one or more error causes"), is
// accepted: it asks nothing of the receiver.
func ParseOperationError(b []byte) (OperationError, int, error) {
	_, v, n, err := parseChunk(b, TypeError, chunkHeaderLen)
	if err != nil {
		return OperationError{}, 0, err
	}
	if err := checkCauses(v); err != nil {
		return OperationError{}, 0, &ChunkError{Type: TypeError, Err: err}
	}
	var e OperationError
	if len(v) > 0 {
		e.Causes = v
	}
	return e, n, nil
}
