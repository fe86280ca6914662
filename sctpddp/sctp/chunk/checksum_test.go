package chunk

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The CRC32c test vectors of RFC 3720 §B.4 (iSCSI, which uses the same
// CRC32c and byte order as SCTP): 32-byte messages with the CRC bytes in
// the order they are transmitted. They are computed with Appendix A's
// algorithm and compared with hash/crc32's; the all-zero message is also a
// packet whose Checksum field is already 0, so SetPacketChecksum must
// write its vector's bytes.
func TestCRC32cVectors(t *testing.T) {
	inc, dec := make([]byte, 32), make([]byte, 32)
	for i := range 32 {
		inc[i], dec[i] = byte(i), byte(31-i)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		wire string
	}{
		{"32 bytes of zeroes", make([]byte, 32), "aa36918a"},
		{"32 bytes of ones", bytes.Repeat([]byte{0xff}, 32), "43aba862"},
		{"32 incrementing bytes", inc, "4e79dd46"},
		{"32 decrementing bytes", dec, "5cdb3f11"},
	} {
		var got [4]byte
		binary.LittleEndian.PutUint32(got[:], crc32c(c.msg))
		if want := hexBytes(t, c.wire); !bytes.Equal(got[:], want) {
			t.Errorf("%s: %x, want %x", c.name, got, want)
		}
		if crc32.Checksum(c.msg, castagnoli) != crc32c(c.msg) {
			t.Errorf("%s: hash/crc32 disagrees with Appendix A", c.name)
		}
	}
	if crc32c([]byte("123456789")) != 0xe3069283 {
		t.Error("CRC32c check value of \"123456789\"")
	}
	// The field is taken as 0 however it is set.
	pkt := make([]byte, 32)
	want := Checksum(pkt)
	binary.BigEndian.PutUint32(pkt[8:], 0xdeadbeef)
	if Checksum(pkt) != want {
		t.Error("Checksum depends on the Checksum field")
	}
	SetPacketChecksum(pkt)
	if !bytes.Equal(pkt[8:12], hexBytes(t, "aa36918a")) {
		t.Errorf("32-byte zero packet: field %x, want the 32-zero-byte vector aa36918a", pkt[8:12])
	}
	if err := VerifyChecksum(pkt); err != nil {
		t.Error(err)
	}
	pkt[31] ^= 1
	wantErr(t, "a bit flipped", VerifyChecksum(pkt), ErrChecksum)
	wantErr(t, "11 bytes", VerifyChecksum(pkt[:11]), ErrTruncated)
}

// crc32c is the CRC32c of b by Appendix A's algorithm, before its final
// byte swap.
func crc32c(b []byte) uint32 { return ^appendixA(b, false) }

// appendixA is RFC 9260 Appendix A's sample code in Go: the table built by
// build_crc_table from reflect_32, generate_crc32c with its final byte
// swap and the htonl of insert_crc32. It returns the Checksum field as a
// big-endian 32-bit value read from the wire, or, when swap is false, the
// CRC register at the end, before the complement and the byte swap.
func appendixA(buf []byte, swap bool) uint32 {
	const poly = 0x1EDC6F41
	reflect32 := func(b uint32) uint32 {
		var rw uint32
		for i := range 32 {
			if b&1 != 0 {
				rw |= 1 << (31 - i)
			}
			b >>= 1
		}
		return rw
	}
	var table [256]uint32
	for i := range table {
		rb := reflect32(uint32(i))
		for range 8 {
			if rb&0x80000000 != 0 {
				rb = rb<<1 ^ poly
			} else {
				rb <<= 1
			}
		}
		table[i] = reflect32(rb)
	}
	crc := uint32(0xffffffff)
	for _, d := range buf {
		crc = crc>>8 ^ table[(crc^uint32(d))&0xff]
	}
	if !swap {
		return crc
	}
	result := ^crc
	b0, b1, b2, b3 := result&0xff, result>>8&0xff, result>>16&0xff, result>>24&0xff
	return b0<<24 | b1<<16 | b2<<8 | b3
}

// TestChecksumAppendixA checks the bytes SetPacketChecksum writes against
// those RFC 9260 Appendix A's insert_crc32 writes: htonl of
// generate_crc32c's byte-swapped result, over the packet with the field 0.
func TestChecksumAppendixA(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		pkt := make([]byte, 12+4*r.IntN(100))
		for i := range pkt {
			pkt[i] = byte(r.Uint32())
		}
		clear(pkt[8:12])
		var want [4]byte
		binary.BigEndian.PutUint32(want[:], appendixA(pkt, true))
		SetPacketChecksum(pkt)
		if !bytes.Equal(pkt[8:12], want[:]) {
			t.Fatalf("packet of %d bytes: field %x, Appendix A writes %x", len(pkt), pkt[8:12], want)
		}
	}
}
