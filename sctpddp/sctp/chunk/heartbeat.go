package chunk

// Heartbeat is a Heartbeat Request (HEARTBEAT) chunk (RFC 9260 §3.3.5),
// whose value is one Heartbeat Info parameter:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 4    |  Chunk Flags  |       Heartbeat Length        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/          Heartbeat Information TLV (Variable-Length)          /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Heartbeat Info Type = 1    |        HB Info Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                Sender-Specific Heartbeat Info                 /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Info is the Sender-Specific Heartbeat Info; "When a HEARTBEAT chunk is
// being used for path verification purposes, it MUST include a random
// nonce of length 64 bits or longer."
type Heartbeat struct {
	Info []byte
}

// Len returns the bytes Append adds, padding included.
func (h Heartbeat) Len() int { return heartbeatLen(h.Info) }

// Append appends the chunk and its padding to b.
func (h Heartbeat) Append(b []byte) []byte { return appendHeartbeat(b, TypeHeartbeat, h.Info) }

// ParseHeartbeat parses the HEARTBEAT chunk at the start of b and returns it
// and the bytes it occupies with its padding. Info aliases b. The value
// must be exactly one Heartbeat Info parameter (its padding may or may not
// be counted in the Chunk Length).
func ParseHeartbeat(b []byte) (Heartbeat, int, error) {
	info, n, err := parseHeartbeat(b, TypeHeartbeat)
	return Heartbeat{Info: info}, n, err
}

func heartbeatLen(info []byte) int {
	return padLen(chunkHeaderLen + paramHeaderLen + len(info))
}

func appendHeartbeat(b []byte, t Type, info []byte) []byte {
	l := chunkHeaderLen + paramHeaderLen + len(info)
	b = appendChunkHeader(b, t, 0, l)
	b = appendParamHeader(b, ParamHeartbeatInfo, paramHeaderLen+len(info))
	b = append(b, info...)
	return appendPad(b, l)
}

func parseHeartbeat(b []byte, t Type) ([]byte, int, error) {
	_, v, n, err := parseChunk(b, t, chunkHeaderLen+paramHeaderLen)
	if err != nil {
		return nil, 0, err
	}
	p, pn, err := parseParamOf(v, ParamHeartbeatInfo)
	if err != nil {
		return nil, 0, &ChunkError{Type: t, Err: err}
	}
	if pn != len(v) {
		return nil, 0, chunkErr(t, 0, ErrLength)
	}
	info := p.Value()
	if len(info) == 0 {
		info = nil
	}
	return info, n, nil
}
