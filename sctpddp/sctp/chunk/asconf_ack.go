package chunk

// ASCONFAck is an Address Configuration Acknowledgment (ASCONF-ACK) chunk
// (RFC 5061 §4.1.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Type = 0x80   |  Chunk Flags  |      Chunk Length             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Sequence Number                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 ASCONF Parameter Response#1                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                             ....                              /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 ASCONF Parameter Response#N                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Params holds the ASCONF Parameter Responses (ErrorCauseIndication,
// SuccessIndication) in wire form; it may be empty: "a sender of an
// ASCONF-ACK MAY indicate complete success of all TLVs in an ASCONF by
// returning only the Chunk Type, Chunk Flags, Chunk Length (set to 8), and
// the Sequence Number."
type ASCONFAck struct {
	SequenceNumber uint32
	Params         []byte
}

// Len returns the bytes Append adds, padding included.
func (a ASCONFAck) Len() int { return padLen(8 + len(a.Params)) }

// Append appends the chunk and its padding to b.
func (a ASCONFAck) Append(b []byte) []byte {
	return appendSeqParamsChunk(b, TypeASCONFAck, a.SequenceNumber, a.Params)
}

// ParseASCONFAck parses the ASCONF-ACK chunk at the start of b and returns
// it and the bytes it occupies with its padding, checking its parameters'
// lengths. Params aliases b.
func ParseASCONFAck(b []byte) (ASCONFAck, int, error) {
	seq, params, n, err := parseSeqParamsChunk(b, TypeASCONFAck, 8)
	if err != nil {
		return ASCONFAck{}, 0, err
	}
	return ASCONFAck{SequenceNumber: seq, Params: params}, n, nil
}
