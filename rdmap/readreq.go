package rdmap

import (
	"encoding/binary"
	"errors"
)

// ReadRequestLen is the length of the RDMA Read Request Header.
const ReadRequestLen = 28

// ReadRequest is the RDMA Read Request Header, RFC 5040 §4.4, Figure 6. It
// immediately follows the untagged DDP header (QN 1).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Data Sink STag (SinkSTag)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	+                  Data Sink Tagged Offset (SinkTO)             +
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  RDMA Read Message Size (RDMARDSZ)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Data Source STag (SrcSTag)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	+                 Data Source Tagged Offset (SrcTO)             +
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type ReadRequest struct {
	SinkSTag uint32
	SinkTO   uint64
	RDMARDSZ uint32
	SrcSTag  uint32
	SrcTO    uint64
}

// ErrShortReadRequest is returned for fewer than ReadRequestLen octets.
var ErrShortReadRequest = errors.New("rdmap: RDMA Read Request Header shorter than 28 octets")

// Len returns ReadRequestLen.
func (r *ReadRequest) Len() int { return ReadRequestLen }

// Append appends the wire form of r to b.
func (r *ReadRequest) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, r.SinkSTag)
	b = binary.BigEndian.AppendUint64(b, r.SinkTO)
	b = binary.BigEndian.AppendUint32(b, r.RDMARDSZ)
	b = binary.BigEndian.AppendUint32(b, r.SrcSTag)
	return binary.BigEndian.AppendUint64(b, r.SrcTO)
}

// ParseReadRequest decodes an RDMA Read Request Header.
func ParseReadRequest(b []byte) (ReadRequest, int, error) {
	if len(b) < ReadRequestLen {
		return ReadRequest{}, 0, ErrShortReadRequest
	}
	return ReadRequest{
		SinkSTag: binary.BigEndian.Uint32(b[0:4]),
		SinkTO:   binary.BigEndian.Uint64(b[4:12]),
		RDMARDSZ: binary.BigEndian.Uint32(b[12:16]),
		SrcSTag:  binary.BigEndian.Uint32(b[16:20]),
		SrcTO:    binary.BigEndian.Uint64(b[20:28]),
	}, ReadRequestLen, nil
}
