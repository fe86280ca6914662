package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// fig5 is RFC 5044 Figure 5, the first FPDU of a stream with Markers and
// CRCs: a Marker, ULPDU_Length 0x2a, a DDP Send (control 0x41 0x43),
// Queue 0, MSN 1, MO 0, 24 octets of zeros, CRC32c 52 23 99 83.
var fig5 = cat(
	[]byte{0, 0, 0, 0},                         // Marker
	[]byte{0x00, 0x2a},                         // ULPDU_Length
	[]byte{0x41, 0x43, 0, 0, 0, 0},             // DDP control, RDMAP control, reserved
	[]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, // QN 0, MSN 1, MO 0
	make([]byte, 24),                           // Send data
	[]byte{0x52, 0x23, 0x99, 0x83},             // CRC
)

// fig6 is RFC 5044 Figure 6, the second FPDU of that stream, at octet
// 0x1ec, with a Marker at 0x200 whose FPDUPTR is 0x14.
var fig6 = cat(
	[]byte{0x00, 0x2a},
	[]byte{0x41, 0x43, 0, 0, 0, 0},
	[]byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0}, // MSN 2
	[]byte{0, 0, 0, 0x14},                      // Marker at 0x200
	make([]byte, 24),
	[]byte{0x84, 0x92, 0x58, 0x98},
)

// sendULPDU is the 42-octet DDP segment of Figures 5 and 6.
func sendULPDU(msn uint32) []byte {
	u := make([]byte, 42)
	u[0], u[1] = 0x41, 0x43
	binary.BigEndian.PutUint32(u[10:14], msn)
	return u
}

var markersCRC = Options{Markers: true, CRC: true}

func TestFPDUFigures(t *testing.T) {
	cases := []struct {
		name string
		pos  uint64
		wire []byte
		msn  uint32
	}{
		{"figure 5", 0, fig5, 1},
		{"figure 6", 0x1ec, fig6, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendFPDU(nil, tc.pos, markersCRC, sendULPDU(tc.msn))
			if err != nil || !bytes.Equal(got, tc.wire) {
				t.Fatalf("AppendFPDU %v:\n got %x\nwant %x", err, got, tc.wire)
			}
			u, n, err := ParseFPDU(nil, tc.wire, tc.pos, markersCRC)
			if err != nil || n != len(tc.wire) || !bytes.Equal(u, sendULPDU(tc.msn)) {
				t.Fatalf("ParseFPDU: %x %d %v", u, n, err)
			}
			for i := range len(tc.wire) {
				if _, n, err := ParseFPDU(nil, tc.wire[:i], tc.pos, markersCRC); err != ErrShortFPDU || n != 0 {
					t.Fatalf("prefix %d: %d %v", i, n, err)
				}
			}
			// Every single-bit flip is caught by the CRC (or the length
			// check, or the Marker check of a Marker with a valid CRC).
			for i := range len(tc.wire) {
				for bit := range 8 {
					b := bytes.Clone(tc.wire)
					b[i] ^= 1 << bit
					_, _, err := ParseFPDU(nil, b, tc.pos, markersCRC)
					if err == nil {
						// Only the two low FPDUPTR bits and the
						// Marker's reserved field are ignored... but
						// they are still covered by the CRC.
						t.Fatalf("flip octet %d bit %d accepted", i, bit)
					}
				}
			}
		})
	}
	// The whole stream of Figure 5, the FPDU between, and Figure 6.
	var stream []byte
	stream, _ = AppendFPDU(stream, 0, markersCRC, sendULPDU(1))
	mid := make([]byte, 0x1ec-len(stream)-6)
	stream, _ = AppendFPDU(stream, uint64(len(stream)), markersCRC, mid)
	if len(stream) != 0x1ec {
		t.Fatalf("the FPDU between ends at %#x", len(stream))
	}
	stream, _ = AppendFPDU(stream, uint64(len(stream)), markersCRC, sendULPDU(2))
	if !bytes.Equal(stream[0x1ec:], fig6) {
		t.Fatalf("second FPDU differs")
	}
}

// Figure 4's layout: ULPDU_Length 0x0010, ten ULPDU octets, a Marker with
// FPDUPTR 0x000C, six more octets, two PAD octets, the CRC.
func TestFPDUFigure4(t *testing.T) {
	u := make([]byte, 16)
	for i := range u {
		u[i] = byte(0xa0 + i)
	}
	got, err := AppendFPDU(nil, 512-12, markersCRC, u)
	if err != nil {
		t.Fatal(err)
	}
	want := cat([]byte{0, 0x10}, u[:10], []byte{0, 0, 0, 0x0c}, u[10:], []byte{0, 0})
	if !bytes.Equal(got[:len(want)], want) || len(got) != len(want)+4 {
		t.Fatalf("got %x\nwant %x + CRC", got, want)
	}
	if WireCRC(got[len(want):]) != CRC(want) {
		t.Fatal("CRC")
	}
}

// Markers in every position the stream can put them relative to an FPDU.
func TestFPDUMarkerPlacement(t *testing.T) {
	u := make([]byte, 1200)
	for i := range u {
		u[i] = byte(i)
	}
	cases := []struct {
		name    string
		pos     uint64
		ulpdu   []byte
		markers []int // offsets of Markers in the encoded FPDU
		ptrs    []uint16
	}{
		// Between FPDUs: the Marker precedes the ULPDU_Length field.
		{"before ULPDU_Length", 512, u[:20], []int{0}, []uint16{0}},
		// Right after the ULPDU_Length field.
		{"after ULPDU_Length", 508, u[:20], []int{4}, []uint16{4}},
		// Inside the ULPDU.
		{"inside ULPDU", 400, u[:200], []int{112}, []uint16{112}},
		// Right after the ULPDU when there is no PAD, before the CRC.
		{"before CRC", 4, u[:506], []int{508}, []uint16{508}},
		// After a PAD, before the CRC: ULPDU 15 + PAD 3.
		{"after PAD", 512 - 2 - 15 - 3, u[:15], []int{20}, []uint16{20}},
		// Just after the CRC: belongs to the next FPDU, not this one.
		{"after CRC", 512 - 2 - 18 - 4, u[:18], nil, nil},
		// Two Markers in one FPDU pointing at the same field.
		{"two inside", 500, u[:1000], []int{12, 12 + 512}, []uint16{12, 12 + 512}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendFPDU(nil, tc.pos, markersCRC, tc.ulpdu)
			if err != nil {
				t.Fatal(err)
			}
			// Reconstruct: take out the Markers at the expected offsets.
			var plain []byte
			last := 0
			for i, off := range tc.markers {
				if (tc.pos+uint64(off))%512 != 0 {
					t.Fatalf("test bug: Marker offset %d not on the grid", off)
				}
				m, _, _ := ParseMarker(got[off:])
				if m.FPDUPTR != tc.ptrs[i] || m.Reserved != 0 {
					t.Fatalf("Marker %d: %+v want FPDUPTR %d", i, m, tc.ptrs[i])
				}
				plain = append(plain, got[last:off]...)
				last = off + 4
			}
			plain = append(plain, got[last:]...)
			want, _ := AppendFPDU(nil, 0, Options{CRC: false}, tc.ulpdu)
			if !bytes.Equal(plain[:len(plain)-4], want[:len(want)-4]) {
				t.Fatalf("without Markers:\n got %x\nwant %x", plain, want)
			}
			if len(got) != WireLen(len(tc.ulpdu), tc.pos, true) {
				t.Fatalf("length %d, WireLen %d", len(got), WireLen(len(tc.ulpdu), tc.pos, true))
			}
			// The CRC covers everything before it, Markers included.
			if WireCRC(got[len(got)-4:]) != CRC(got[:len(got)-4]) {
				t.Fatal("CRC does not cover the Markers")
			}
			back, n, err := ParseFPDU(nil, got, tc.pos, markersCRC)
			if err != nil || n != len(got) || !bytes.Equal(back, tc.ulpdu) {
				t.Fatalf("ParseFPDU: %d %v", n, err)
			}
		})
	}
}

func TestParseFPDUErrors(t *testing.T) {
	good, _ := AppendFPDU(nil, 0x1ec, markersCRC, sendULPDU(2))
	t.Run("crc", func(t *testing.T) {
		b := bytes.Clone(good)
		b[30] ^= 0xff
		_, _, err := ParseFPDU(nil, b, 0x1ec, markersCRC)
		if !errors.Is(err, term.MPACRCError) {
			t.Fatal(err)
		}
		// With CRCs off the field "MUST NOT be checked".
		if _, _, err := ParseFPDU(nil, b, 0x1ec, Options{Markers: true}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("marker with valid crc", func(t *testing.T) {
		b := bytes.Clone(good)
		b[0x200-0x1ec+3] = 0x18 // FPDUPTR 0x18 instead of 0x14
		PutCRC(b[len(b)-4:], CRC(b[:len(b)-4]))
		_, _, err := ParseFPDU(nil, b, 0x1ec, markersCRC)
		if !errors.Is(err, term.MPAMarkerMismatch) {
			t.Fatal(err)
		}
		// The two low bits are treated as zero.
		b[0x200-0x1ec+3] = 0x17
		PutCRC(b[len(b)-4:], CRC(b[:len(b)-4]))
		if _, _, err := ParseFPDU(nil, b, 0x1ec, markersCRC); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("marker with bad crc is a crc error", func(t *testing.T) {
		b := bytes.Clone(good)
		b[0x200-0x1ec+3] = 0x18
		if _, _, err := ParseFPDU(nil, b, 0x1ec, markersCRC); !errors.Is(err, term.MPACRCError) {
			t.Fatal(err)
		}
	})
	t.Run("nonzero marker before FPDU", func(t *testing.T) {
		b := bytes.Clone(fig5)
		b[3] = 4
		PutCRC(b[len(b)-4:], CRC(b[:len(b)-4]))
		if _, _, err := ParseFPDU(nil, b, 0, markersCRC); !errors.Is(err, term.MPAMarkerMismatch) {
			t.Fatal(err)
		}
	})
	t.Run("length", func(t *testing.T) {
		for _, l := range []int{0, 1, 13} {
			b, _ := AppendFPDU(nil, 0, Options{CRC: true}, make([]byte, l))
			if _, _, err := ParseFPDU(nil, b, 0, Options{CRC: true}); !errors.Is(err, term.MPAInvalidFrame) {
				t.Fatalf("ULPDU_Length %d: %v", l, err)
			}
		}
		b, _ := AppendFPDU(nil, 0, Options{CRC: true}, make([]byte, 100))
		if _, _, err := ParseFPDU(nil, b, 0, Options{CRC: true, MaxULPDU: 99}); !errors.Is(err, term.MPAInvalidFrame) {
			t.Fatal(err)
		}
		if _, _, err := ParseFPDU(nil, b, 0, Options{CRC: true, MaxULPDU: 100}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		if _, err := AppendFPDU(nil, 0, Options{}, make([]byte, MaxULPDU+1)); err != ErrULPDUTooLong {
			t.Fatal(err)
		}
		if _, err := AppendFPDU(nil, 0, Options{MaxULPDU: 100}, make([]byte, 101)); err != ErrULPDUTooLong {
			t.Fatal(err)
		}
		// Without Markers 65535 octets fit; with Markers the last Marker
		// would be too far from the ULPDU_Length field for FPDUPTR.
		if _, err := AppendFPDU(nil, 0, Options{}, make([]byte, MaxULPDU)); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendFPDU(nil, 0, markersCRC, make([]byte, MaxULPDU)); err != ErrULPDUTooLong {
			t.Fatal(err)
		}
		if _, err := AppendFPDU(nil, 0, markersCRC, make([]byte, 65000)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPadLen(t *testing.T) {
	for n, want := range []int{2, 1, 0, 3, 2, 1, 0, 3} {
		if PadLen(n) != want || (2+n+PadLen(n))%4 != 0 {
			t.Errorf("PadLen(%d) = %d", n, PadLen(n))
		}
	}
}
