package chunk

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var zeroChecksum [4]byte

// Checksum returns the CRC32c of packet as RFC 9260 §6.8 defines it: over
// the whole packet, common header and all chunks, with the Checksum field
// taken as 0. It reads packet only (the field is not zeroed in place), and
// does not allocate. packet must hold at least a common header.
//
// The value is that of Appendix A's generate_crc32c before its final byte
// swap: the polynomial is Castagnoli's, the register starts at all ones and
// the result is complemented, which is what hash/crc32 computes. Stored
// little-endian (Header.SetChecksum), its bytes go on the wire in the order
// Appendix A's "mapped back into SCTP transport-level bytes" asks for.
func Checksum(packet []byte) uint32 {
	c := crc32.Update(0, castagnoli, packet[:checksumOff])
	c = crc32.Update(c, castagnoli, zeroChecksum[:])
	return crc32.Update(c, castagnoli, packet[checksumOff+4:])
}

// SetPacketChecksum computes the CRC32c of packet and stores it in the
// common header's Checksum field (RFC 9260 §6.8: "put the resultant value
// into the checksum field in the common header and leave the rest of the
// bits unchanged"). packet must hold at least a common header.
func SetPacketChecksum(packet []byte) {
	Header(packet).SetChecksum(Checksum(packet))
}

// VerifyChecksum checks packet's CRC32c (RFC 9260 §6.8: "If it is not, the
// receiver MUST treat the packet as an invalid SCTP packet"). It returns
// ErrTruncated for a packet shorter than a common header and ErrChecksum
// for a mismatch.
//
// A packet whose Checksum field is 0 fails unless its CRC32c happens to be
// 0: accepting zero checksums (RFC 9653) is the association's decision, made
// once both ends have sent the Zero Checksum Acceptable parameter; it tests
// Header.Checksum() == 0 before calling VerifyChecksum. pion/sctp, whose
// reading of RFC 9653 this package follows, checks the CRC32c of a packet
// whose first chunk is INIT or COOKIE ECHO even then.
func VerifyChecksum(packet []byte) error {
	if len(packet) < HeaderLen {
		return ErrTruncated
	}
	if Header(packet).Checksum() != Checksum(packet) {
		return ErrChecksum
	}
	return nil
}
