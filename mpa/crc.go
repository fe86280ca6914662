package mpa

import (
	"encoding/binary"
	"hash/crc32"
)

// CRCLen is the length of the CRC field that ends every FPDU.
const CRCLen = 4

// crcTable is CRC32c (Castagnoli). hash/crc32 recognises this table and
// uses the CPU's CRC32 instruction where there is one.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC32c of b: "the CRC field in the MPA FPDU MUST be
// computed using the CRC32c polynomial in the manner described in the
// iSCSI Protocol [iSCSI] document for Header and Data Digests."
// (RFC 5044 §4.4). That is the reflected polynomial 0x1EDC6F41 with
// initial value and final XOR of all ones, which is what hash/crc32
// computes for crc32.Castagnoli.
//
// On the wire the value is sent least significant octet first (PutCRC):
// RFC 5044 Figure 5's FPDU has CRC 0x83992352 and shows the octets
// 52 23 99 83. This is iSCSI's digest order too (RFC 3720 Appendix B.4).
func CRC(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// crcUpdate extends a running CRC32c (started at 0) with b.
func crcUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, crcTable, b) }

// PutCRC stores crc in b[0:4] in wire order (see CRC).
func PutCRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// WireCRC returns the CRC stored in b[0:4] in wire order (see CRC).
func WireCRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
