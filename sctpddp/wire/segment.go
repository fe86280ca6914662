package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/iwarpgo/iwarp/ddp"
)

// Lengths of the DDP Segment Chunk, RFC 5043 §5.2.2.
const (
	// SSNLen is the length of the DDP-SSN field that starts every Payload
	// Data Chunk of this adaptation (§5.2.1: "All SCTP Payload Data Chunks
	// used by this adaptation layer include a DDP Source Sequence Number").
	SSNLen = 2

	// MinSegmentChunkLen is the shortest valid DDP Segment Chunk: a DDP-SSN
	// and a tagged DDP Header (RFC 5041 §4.2, 112 bits) with no payload. A
	// DDP Segment "includes a DDP Header and ULP Payload (if present)" (RFC
	// 5043 §2), so it is never shorter than its header.
	MinSegmentChunkLen = SSNLen + ddp.TaggedHeaderLen
)

// SegmentChunk is the user data of a DDP Segment Chunk, an SCTP DATA chunk
// with PPID 16 (RFC 5043 §5.2.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          DDP-SSN              |         DDP Segment           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               |
//	|                                                               |
//	|                         ...                                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "DDP Segments are as defined in [RFC5041]." The chunk has no length
// field and no reserved bits: the SCTP message boundary ends the segment.
type SegmentChunk struct {
	SSN SSN
	// Segment is the DDP Segment: DDP Header, then ULP payload. After
	// ParseSegmentChunk it aliases the parsed buffer and is valid as long
	// as that buffer is.
	Segment []byte
}

// Len returns the encoded length: 2 + len(Segment).
func (c SegmentChunk) Len() int { return SSNLen + len(c.Segment) }

// Append appends the encoded chunk to b.
func (c SegmentChunk) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(c.SSN))
	return append(b, c.Segment...)
}

// ParseSegmentChunk decodes the user data of one PPID 16 message. The
// whole of b is the chunk (one SCTP message is one chunk), so on success it
// consumes len(b) bytes. It checks only the framing of RFC 5043: the
// DDP-SSN is present and the DDP Segment is at least as long as the DDP
// Header its T flag announces (CheckSegment). The DDP Header itself is for
// DDP to check.
func ParseSegmentChunk(b []byte) (SegmentChunk, int, error) {
	if len(b) < SSNLen {
		return SegmentChunk{}, 0, fmt.Errorf("%w: DDP Segment Chunk of %d bytes, need the 2-byte DDP-SSN and a DDP Header", ErrTruncated, len(b))
	}
	if err := CheckSegment(b[SSNLen:]); err != nil {
		return SegmentChunk{}, 0, err
	}
	return SegmentChunk{
		SSN:     SSN(binary.BigEndian.Uint16(b)),
		Segment: b[SSNLen:len(b):len(b)],
	}, len(b), nil
}

// CheckSegment reports whether seg can be a DDP Segment: it is at least as
// long as the DDP Header (tagged, RFC 5041 §4.2, or untagged, §4.3) that
// the T flag of its DDP Control Field announces.
func CheckSegment(seg []byte) error {
	if len(seg) == 0 {
		return fmt.Errorf("%w: empty DDP Segment, need a DDP Header", ErrTruncated)
	}
	if need := ddp.Control(seg[0]).HeaderLen(); len(seg) < need {
		return fmt.Errorf("%w: DDP Segment of %d bytes is shorter than its %d-byte DDP Header", ErrTruncated, len(seg), need)
	}
	return nil
}

// AppendSegmentv appends the DDP Segment Chunk of a segment given as its
// DDP Header and payload slices (ddp.LLP's gather write) to b: the
// DDP-SSN, then hdr and each payload slice.
func AppendSegmentv(b []byte, ssn SSN, hdr []byte, payload [][]byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(ssn))
	b = append(b, hdr...)
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

// SegmentLen returns the length of a DDP Segment given as its DDP Header
// and payload slices.
func SegmentLen(hdr []byte, payload [][]byte) int {
	n := len(hdr)
	for _, p := range payload {
		n += len(p)
	}
	return n
}
