package rdmap

import (
	"encoding/binary"
	"errors"
)

// ImmediateDataLen is the length of the Immediate Data Header: "For an
// Immediate Data or Immediate Data with SE Message, the Local Peer's RDMAP
// Layer MUST request that the DDP layer transmit 8 bytes of data" (RFC
// 7306 §6.3).
const ImmediateDataLen = 8

// ImmediateData is the Immediate Data Header of the Immediate Data and
// Immediate Data with SE Messages, RFC 7306 §6.2 Figure 7. It is the whole
// of the message after the untagged DDP header (QN 0, opcode 1000b or
// 1001b): "The first 8 bytes of the data following the DDP header
// contains the Immediate Data."
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Immediate Data                         |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The 8 octets are the ULP's; this package carries them as a big-endian
// 64-bit number (Completion.Imm), so that the octets on the wire are the
// number's, most significant first.
type ImmediateData struct {
	Data uint64
}

// ErrShortImmediateData is returned for fewer than ImmediateDataLen
// octets.
var ErrShortImmediateData = errors.New("rdmap: Immediate Data shorter than 8 octets")

// Len returns ImmediateDataLen.
func (d *ImmediateData) Len() int { return ImmediateDataLen }

// Append appends the wire form of d to b.
func (d *ImmediateData) Append(b []byte) []byte { return binary.BigEndian.AppendUint64(b, d.Data) }

// ParseImmediateData decodes the Immediate Data Header.
func ParseImmediateData(b []byte) (ImmediateData, int, error) {
	if len(b) < ImmediateDataLen {
		return ImmediateData{}, 0, ErrShortImmediateData
	}
	return ImmediateData{Data: binary.BigEndian.Uint64(b[:8])}, ImmediateDataLen, nil
}
