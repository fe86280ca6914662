package chunk

import "encoding/binary"

// Header is a view of the SCTP common header at the start of a packet
// (RFC 9260 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Source Port Number       |    Destination Port Number    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Verification Tag                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Checksum                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The accessors read and write the slice in place; they may only be called
// on a Header for which IsValid reports true.
type Header []byte

// Offsets of the common header's fields, and its length.
const (
	srcPortOff  = 0
	dstPortOff  = 2
	vtagOff     = 4
	checksumOff = 8

	// HeaderLen is the length of the SCTP common header.
	HeaderLen = 12
)

// IsValid reports whether h is long enough to hold a common header.
func (h Header) IsValid() bool { return len(h) >= HeaderLen }

// SourcePort returns the Source Port Number.
func (h Header) SourcePort() uint16 { return binary.BigEndian.Uint16(h[srcPortOff:]) }

// DestinationPort returns the Destination Port Number.
func (h Header) DestinationPort() uint16 { return binary.BigEndian.Uint16(h[dstPortOff:]) }

// VerificationTag returns the Verification Tag.
func (h Header) VerificationTag() uint32 { return binary.BigEndian.Uint32(h[vtagOff:]) }

// Checksum returns the Checksum field as the value Checksum computes: the
// CRC32c is stored in the byte order of RFC 9260 Appendix A, which is
// little-endian for the value hash/crc32 returns.
func (h Header) Checksum() uint32 { return binary.LittleEndian.Uint32(h[checksumOff:]) }

// SetSourcePort sets the Source Port Number.
func (h Header) SetSourcePort(p uint16) { binary.BigEndian.PutUint16(h[srcPortOff:], p) }

// SetDestinationPort sets the Destination Port Number.
func (h Header) SetDestinationPort(p uint16) { binary.BigEndian.PutUint16(h[dstPortOff:], p) }

// SetVerificationTag sets the Verification Tag.
func (h Header) SetVerificationTag(v uint32) { binary.BigEndian.PutUint32(h[vtagOff:], v) }

// SetChecksum stores c, a value as Checksum computes it, in the Checksum
// field.
func (h Header) SetChecksum(c uint32) { binary.LittleEndian.PutUint32(h[checksumOff:], c) }

// AppendHeader appends a common header with a zero Checksum, to be filled
// in by SetPacketChecksum once the packet's chunks follow it.
func AppendHeader(b []byte, srcPort, dstPort uint16, vtag uint32) []byte {
	b = binary.BigEndian.AppendUint16(b, srcPort)
	b = binary.BigEndian.AppendUint16(b, dstPort)
	b = binary.BigEndian.AppendUint32(b, vtag)
	return append(b, 0, 0, 0, 0)
}
