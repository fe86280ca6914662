package chunk

// InitAck is an Initiation Acknowledgement (INIT ACK) chunk (RFC 9260
// §3.3.3). Its fields are those of Init and keep their meaning:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Type = 2    |  Chunk Flags  |         Chunk Length          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Initiate Tag                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Advertised Receiver Window Credit               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Number of Outbound Streams   |   Number of Inbound Streams   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Initial TSN                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/              Optional/Variable-Length Parameters              /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Its parameters add the mandatory State Cookie (RawParam of type
// ParamStateCookie; StateCookie finds it) and Unrecognized Parameter
// (RawParam of type ParamUnrecognizedParameter, whose value is the complete
// unrecognized TLV, Param from ParamIter).
type InitAck Init

// Len returns the bytes Append adds, padding included.
func (i InitAck) Len() int { return Init(i).Len() }

// Append appends the chunk and its padding to b.
func (i InitAck) Append(b []byte) []byte { return appendInit(b, TypeInitAck, Init(i)) }

// Check applies the checks of RFC 9260 §3.3.3 to the fixed fields as
// Init.Check does (there, an endpoint in COOKIE-WAIT "MUST destroy the TCB
// and SHOULD send an ABORT chunk"), and returns an error wrapping
// ErrMissingStateCookie if the State Cookie parameter is absent.
func (i InitAck) Check() error {
	if err := checkInit(TypeInitAck, Init(i)); err != nil {
		return err
	}
	if _, ok := StateCookie(i.Params); !ok {
		return chunkErr(TypeInitAck, 0, ErrMissingStateCookie)
	}
	return nil
}

// ParseInitAck parses the INIT ACK chunk at the start of b and returns it
// and the bytes it occupies with its padding. Params aliases b.
func ParseInitAck(b []byte) (InitAck, int, error) {
	i, n, err := parseInit(b, TypeInitAck)
	return InitAck(i), n, err
}
