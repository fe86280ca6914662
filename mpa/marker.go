package mpa

import (
	"encoding/binary"
)

// Marker geometry, RFC 5044 §4.2-4.3.
const (
	// MarkerLen is the length of a Marker.
	MarkerLen = 4
	// MarkerInterval is the Marker spacing: "MPA senders MUST insert a
	// Marker into the data stream at a 512-octet periodic interval in the
	// TCP Sequence Number Space." (RFC 5044 §4.3)
	MarkerInterval = 512
)

// Marker is an MPA Marker (RFC 5044 §4.2, Figure 3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           RESERVED            |            FPDUPTR            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// FPDUPTR is "the number of octets in the TCP stream from the beginning of
// the ULPDU Length field to the first octet of the entire Marker", or 0
// when the Marker falls between FPDUs.
type Marker struct {
	// Reserved "MUST be set to zero on transmit and ignored on receive
	// (except for CRC calculation)." Append sends it as given; ParseMarker
	// reports it as received.
	Reserved uint16
	// FPDUPTR as received; use Offset for arithmetic.
	FPDUPTR uint16
}

// Len returns MarkerLen.
func (m *Marker) Len() int { return MarkerLen }

// Append appends the encoded Marker to b.
func (m *Marker) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, m.Reserved)
	return binary.BigEndian.AppendUint16(b, m.FPDUPTR)
}

// Offset returns FPDUPTR with its two low bits cleared: "The least
// significant two bits MUST always be set to zero at the transmitter, and
// the receivers MUST always treat these as zero for calculations."
// (RFC 5044 §4.2)
func (m *Marker) Offset() int { return int(m.FPDUPTR &^ 3) }

// ParseMarker decodes a Marker from the start of b.
func ParseMarker(b []byte) (Marker, int, error) {
	if len(b) < MarkerLen {
		return Marker{}, 0, errShortFPDU
	}
	return Marker{
		Reserved: binary.BigEndian.Uint16(b[0:2]),
		FPDUPTR:  binary.BigEndian.Uint16(b[2:4]),
	}, MarkerLen, nil
}

// putMarker writes a Marker with the given FPDUPTR into b[0:4].
func putMarker(b []byte, fpduptr uint16) {
	b[0], b[1] = 0, 0
	binary.BigEndian.PutUint16(b[2:4], fpduptr)
}

// markerDue reports whether a Marker begins at stream position pos, pos
// being counted from SeqStart, the first octet of Full Operation: "the
// first octet of the Marker is at octet sequence number SeqNum if the
// remainder of (SeqNum - SeqStart) mod 512 is zero." (RFC 5044 §4.3)
func markerDue(pos uint64) bool { return pos%MarkerInterval == 0 }

// toNextMarker returns the number of octets from pos to the next Marker
// position (MarkerInterval when a Marker is due at pos).
func toNextMarker(pos uint64) int { return MarkerInterval - int(pos%MarkerInterval) }

// FPDULen returns the number of octets the FPDU at the start of b takes on
// the stream (a Marker before it and the Markers inside included), b's
// first octet being at stream position pos (counted from SeqStart); ok is
// false while b is too short to hold the FPDU's ULPDU_Length field. The
// length field is not checked.
func FPDULen(b []byte, pos uint64, o Options) (n int, ok bool) {
	at := 0
	if o.Markers && markerDue(pos) {
		// A Marker between FPDUs belongs to the next one (§4.3).
		at = MarkerLen
	}
	if len(b) < at+LengthFieldLen {
		return 0, false
	}
	return WireLen(int(binary.BigEndian.Uint16(b[at:])), pos, o.Markers), true
}

// ulpduLength returns the ULPDU_Length field of the FPDU at the start of
// b (len(b) >= MarkerLen + LengthFieldLen when a Marker precedes it).
func ulpduLength(b []byte, pos uint64, o Options) int {
	if o.Markers && markerDue(pos) {
		b = b[MarkerLen:]
	}
	return int(binary.BigEndian.Uint16(b))
}

// WireLen returns the number of octets an FPDU carrying an ULPDU of
// ulpduLen octets occupies on the stream when it begins at stream position
// pos (counted from SeqStart), Markers included when markers is true.
func WireLen(ulpduLen int, pos uint64, markers bool) int {
	n := LengthFieldLen + ulpduLen + PadLen(ulpduLen) + CRCLen
	if !markers {
		return n
	}
	// A Marker due at pos precedes the FPDU and belongs to it; one due
	// where the CRC ends belongs to the next FPDU. Every Marker inside
	// adds MarkerLen octets and pushes the rest of the FPDU further.
	total := 0
	for n > 0 {
		if markerDue(pos) {
			total += MarkerLen
			pos += MarkerLen
		}
		c := min(n, toNextMarker(pos))
		total += c
		pos += uint64(c)
		n -= c
	}
	return total
}
