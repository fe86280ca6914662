package rdmap

import (
	"encoding/binary"
	"errors"
)

// AtomicResponseLen is the length of the Atomic Operation Response
// Header of RFC 7306 Figure 6: a 32-bit Original Request Identifier and a
// 64-bit Original Remote Data Value. (§4's prose says "32 bytes long as
// specified in Figure 5"; Figure 5 is the AOpCode table, and Figure 6 and
// Appendix A.2 draw 12 octets, which is also what Wireshark decodes.)
const AtomicResponseLen = 12

// AtomicResponse is the Atomic Operation Response Header, RFC 7306
// §5.2.2 Figure 6. It immediately follows the untagged DDP header (QN 3,
// opcode 1011b).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Original Request Identifier                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Original Remote Data Value                 |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "The Original Request Identifier is set to the value specified in the
// Request Identifier field that was originally provided in the
// corresponding Atomic Operation Request Message." "The Original Remote
// Value specifies the original 64-bit value stored at the ULP Buffer
// address targeted by the Atomic Operation", big-endian on the wire.
type AtomicResponse struct {
	OrigReqID uint32 // Original Request Identifier
	OrigValue uint64 // Original Remote Data Value
}

// ErrShortAtomicResponse is returned for fewer than AtomicResponseLen
// octets.
var ErrShortAtomicResponse = errors.New("rdmap: Atomic Operation Response Header shorter than 12 octets")

// Len returns AtomicResponseLen.
func (r *AtomicResponse) Len() int { return AtomicResponseLen }

// Append appends the wire form of r to b.
func (r *AtomicResponse) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, r.OrigReqID)
	return binary.BigEndian.AppendUint64(b, r.OrigValue)
}

// ParseAtomicResponse decodes an Atomic Operation Response Header.
func ParseAtomicResponse(b []byte) (AtomicResponse, int, error) {
	if len(b) < AtomicResponseLen {
		return AtomicResponse{}, 0, ErrShortAtomicResponse
	}
	return AtomicResponse{
		OrigReqID: binary.BigEndian.Uint32(b[0:4]),
		OrigValue: binary.BigEndian.Uint64(b[4:12]),
	}, AtomicResponseLen, nil
}
