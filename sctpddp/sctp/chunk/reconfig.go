package chunk

// Reconfig is a Re-configuration (RE-CONFIG) chunk (RFC 6525 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Type = 130    |  Chunk Flags  |      Chunk Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                  Re-configuration Parameter                   /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/             Re-configuration Parameter (optional)             /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Params holds the parameters in wire form (OutgoingSSNResetRequest.Append
// and the others of reconfig_params.go), read with Params(r.Params).
// "Note that each RE-CONFIG chunk holds at least one parameter and at most
// two parameters": ParseReconfig rejects other counts with ErrParamCount.
// Which pairs are allowed (the ten combinations of §3.1; otherwise "the
// receiver SHOULD send an ERROR chunk with a Protocol Violation cause") is
// the association's to check.
type Reconfig struct {
	Params []byte
}

// Len returns the bytes Append adds, padding included.
func (r Reconfig) Len() int { return padLen(chunkHeaderLen + len(r.Params)) }

// Append appends the chunk and its padding to b.
func (r Reconfig) Append(b []byte) []byte {
	return appendChunk(b, TypeReconfig, 0, r.Params)
}

// ParseReconfig parses the RE-CONFIG chunk at the start of b and returns it
// and the bytes it occupies with its padding, checking its parameters'
// lengths. Params aliases b.
func ParseReconfig(b []byte) (Reconfig, int, error) {
	_, v, n, err := parseChunk(b, TypeReconfig, chunkHeaderLen+paramHeaderLen)
	if err != nil {
		return Reconfig{}, 0, err
	}
	count, err := checkParams(v)
	if err != nil {
		return Reconfig{}, 0, &ChunkError{Type: TypeReconfig, Err: err}
	}
	if count < 1 || count > 2 {
		return Reconfig{}, 0, chunkErr(TypeReconfig, 0, ErrParamCount)
	}
	return Reconfig{Params: v}, n, nil
}
