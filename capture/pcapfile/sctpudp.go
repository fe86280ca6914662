package pcapfile

import (
	"encoding/binary"
	"hash/crc32"
)

// SCTPTunnelingPort is the UDP port IANA assigned to SCTP over UDP
// (RFC 6951 §5.1, "sctp-tunneling").
const SCTPTunnelingPort = 9899

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpInUDP returns the SCTP packet a UDP datagram encapsulates as RFC
// 6951 §5 does it (the SCTP common header right after the UDP header),
// or nil. Any port may carry it, so the packet must prove itself: its
// CRC32c (RFC 9260 §6.8, stored little-endian as Appendix A maps it)
// must be right, or, on port 9899, be zero (RFC 9653's zero checksum)
// with chunks that fill the packet exactly.
func sctpInUDP(udp []byte) []byte {
	if len(udp) < 8+12+4 {
		return nil
	}
	sp, dp := binary.BigEndian.Uint16(udp[0:2]), binary.BigEndian.Uint16(udp[2:4])
	b := udp[8:]
	if n := int(binary.BigEndian.Uint16(udp[4:6])); n >= 8+12 && n <= len(udp) {
		b = udp[8:n]
	}
	sum := binary.LittleEndian.Uint32(b[8:12])
	if sum == sctpChecksum(b) {
		return b
	}
	if sum == 0 && (sp == SCTPTunnelingPort || dp == SCTPTunnelingPort) && chunksFill(b[12:]) {
		return b
	}
	return nil
}

// sctpChecksum is the CRC32c of an SCTP packet with its Checksum field
// taken as zero.
func sctpChecksum(b []byte) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:8])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, b[12:])
}

// chunksFill reports whether b is a whole number of well-formed chunks.
func chunksFill(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	for len(b) >= 4 {
		n := int(binary.BigEndian.Uint16(b[2:4]))
		if n < 4 || n > len(b) {
			return false
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	return len(b) == 0
}
