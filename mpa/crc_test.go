package mpa

import (
	"bytes"
	"testing"
)

// The CRC examples of RFC 3720 Appendix B.4 (iSCSI), which RFC 5044 §4.4
// points to, with the CRC octets in the order iSCSI sends them.
func TestCRCiSCSIVectors(t *testing.T) {
	inc := make([]byte, 32)
	dec := make([]byte, 32)
	for i := range inc {
		inc[i] = byte(i)
		dec[i] = byte(31 - i)
	}
	cases := []struct {
		name string
		in   []byte
		wire []byte
	}{
		{"32 zeros", make([]byte, 32), []byte{0xaa, 0x36, 0x91, 0x8a}},
		{"32 ones", bytes.Repeat([]byte{0xff}, 32), []byte{0x43, 0xab, 0xa8, 0x62}},
		{"incrementing", inc, []byte{0x4e, 0x79, 0xdd, 0x46}},
		{"decrementing", dec, []byte{0x5c, 0xdb, 0x3f, 0x11}},
	}
	for _, tc := range cases {
		var got [4]byte
		PutCRC(got[:], CRC(tc.in))
		if !bytes.Equal(got[:], tc.wire) {
			t.Errorf("%s: CRC octets %x, want %x", tc.name, got, tc.wire)
		}
		if WireCRC(tc.wire) != CRC(tc.in) {
			t.Errorf("%s: WireCRC disagrees", tc.name)
		}
	}
}

// RFC 5044 Figure 5: the CRC covers the Marker before the ULPDU_Length
// field, the field and the ULPDU; it is sent as 52 23 99 83.
func TestCRCFigure5(t *testing.T) {
	covered := fig5[:len(fig5)-4]
	if got := CRC(covered); got != 0x83992352 || WireCRC(fig5[len(fig5)-4:]) != got {
		t.Fatalf("CRC %#08x, wire %x", got, fig5[len(fig5)-4:])
	}
}

func TestCRCIncremental(t *testing.T) {
	b := fig6[:len(fig6)-4]
	for i := range len(b) + 1 {
		if c := crcUpdate(crcUpdate(0, b[:i]), b[i:]); c != CRC(b) {
			t.Fatalf("split at %d: %#x", i, c)
		}
	}
}
