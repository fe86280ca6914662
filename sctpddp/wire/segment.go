package sctpddp

import (
	"encoding/binary"
	"fmt"
)

// Lengths of the DDP Segment Chunk, RFC 5043 §5.2.2.
const (
	// SSNLen is the length of the DDP-SSN field that starts every Payload
	// Data Chunk of this adaptation (§5.2.1: "All SCTP Payload Data Chunks
	// used by this adaptation layer include a DDP Source Sequence Number").
	SSNLen = 2

	// Minimum DDP Header lengths, RFC 5041 §4.2 (tagged, 112 bits) and
	// §4.3 (untagged, 144 bits). A DDP Segment "includes a DDP Header and
	// ULP Payload (if present)" (RFC 5043 §2), so it is never shorter than
	// its header. They are repeated here so that this package does not
	// depend on the DDP engine for framing.
	taggedHeaderLen   = 14
	untaggedHeaderLen = 18

	// MinSegmentChunkLen is the shortest valid DDP Segment Chunk: a DDP-SSN
	// and a tagged DDP Header with no payload.
	MinSegmentChunkLen = SSNLen + taggedHeaderLen
)

// ddpControlT is the T (tagged) flag of the DDP Control Field, the first
// bit of a DDP Segment (RFC 5041 §4.1, Figure 3).
const ddpControlT = 0x80

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
// Header its T flag announces. The DDP Header itself is for DDP to check.
func ParseSegmentChunk(b []byte) (SegmentChunk, int, error) {
	if len(b) < SSNLen+1 {
		return SegmentChunk{}, 0, fmt.Errorf("%w: DDP Segment Chunk of %d bytes, need the 2-byte DDP-SSN and a DDP Header", ErrTruncated, len(b))
	}
	need := untaggedHeaderLen
	if b[SSNLen]&ddpControlT != 0 {
		need = taggedHeaderLen
	}
	if len(b)-SSNLen < need {
		return SegmentChunk{}, 0, fmt.Errorf("%w: DDP Segment of %d bytes is shorter than its %d-byte DDP Header", ErrTruncated, len(b)-SSNLen, need)
	}
	return SegmentChunk{
		SSN:     SSN(binary.BigEndian.Uint16(b)),
		Segment: b[SSNLen:len(b):len(b)],
	}, len(b), nil
}

// appendSegmentChunk appends the DDP Segment Chunk of a segment given as
// its DDP header and payload slices (ddp.LLP's gather write) to b.
func appendSegmentChunk(b []byte, ssn SSN, hdr []byte, payload [][]byte) []byte {
	b = append(b, byte(ssn>>8), byte(ssn))
	b = append(b, hdr...)
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

// segmentLen is the length of a segment given as header and payload.
func segmentLen(hdr []byte, payload [][]byte) int {
	n := len(hdr)
	for _, p := range payload {
		n += len(p)
	}
	return n
}
