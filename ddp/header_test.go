package ddp

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden headers, written field by field from RFC 5041 Figures 4 and 5
// and RFC 5040 Figure 3 (RsvdULP carries the RDMAP control byte).
var goldenHeaders = []struct {
	name string
	h    Header
	wire string
}{
	{
		// The last segment of the worked RDMA Write
		// (TestSegmentWorkedTaggedExample): T=1 L=1 DV=1, RDMA Write
		// (RV=1, opcode 0 → 0x40), STag 0x1234, TO 0x2800.
		name: "tagged last",
		h:    Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{0x40}, STag: 0x1234, TO: 0x2800},
		wire: "c1 40 00001234 0000000000002800",
	},
	{
		name: "tagged middle",
		h:    Header{Tagged: true, DV: 1, RsvdULP: [5]byte{0x42}, STag: 0xdeadbe01, TO: 0x0102030405060708},
		wire: "81 42 deadbe01 0102030405060708",
	},
	{
		// The first segment of the worked Send
		// (TestSegmentWorkedUntaggedExample): T=0 L=0, Send (0x43), QN 0,
		// MSN 47, MO 0.
		name: "untagged first",
		h:    Header{DV: 1, RsvdULP: [5]byte{0x43}, QN: 0, MSN: 47, MO: 0},
		wire: "01 43 00000000 00000000 0000002f 00000000",
	},
	{
		// Send with Invalidate: the Invalidate STag in RsvdULP octets
		// 2-5 (RFC 5040 §4.1).
		name: "send with invalidate",
		h:    Header{Last: true, DV: 1, RsvdULP: [5]byte{0x44, 0xab, 0xcd, 0xef, 0x01}, QN: 0, MSN: 1, MO: 4096},
		wire: "41 44 abcdef01 00000000 00000001 00001000",
	},
}

func TestHeaderGolden(t *testing.T) {
	for _, g := range goldenHeaders {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(t, g.wire)
			if got := g.h.Append(nil); !bytes.Equal(got, want) {
				t.Fatalf("Append = % x, want % x", got, want)
			}
			if g.h.Len() != len(want) {
				t.Fatalf("Len = %d, want %d", g.h.Len(), len(want))
			}
			h, n, err := ParseHeader(want)
			if err != nil || n != len(want) || h != g.h {
				t.Fatalf("ParseHeader = %+v, %d, %v; want %+v", h, n, err, g.h)
			}
			// Views agree with the struct.
			if g.h.Tagged {
				v := TaggedHeader(want)
				if v.STag() != g.h.STag || v.TO() != g.h.TO || v.RsvdULP() != g.h.RsvdULP[0] || !v.Control().Tagged() {
					t.Fatal("TaggedHeader view disagrees")
				}
			} else {
				v := UntaggedHeader(want)
				if v.QN() != g.h.QN || v.MSN() != g.h.MSN || v.MO() != g.h.MO || !bytes.Equal(v.RsvdULP(), g.h.RsvdULP[:]) || v.Control().Tagged() {
					t.Fatal("UntaggedHeader view disagrees")
				}
			}
			// Every strict prefix is rejected.
			for i := 0; i < len(want); i++ {
				if _, _, err := ParseHeader(want[:i]); err == nil {
					t.Fatalf("ParseHeader accepted a %d-octet prefix", i)
				}
			}
		})
	}
}

func TestControl(t *testing.T) {
	for _, tc := range []struct {
		tagged, last bool
		dv           uint8
		want         byte
	}{
		{true, true, 1, 0xc1}, {true, false, 1, 0x81}, {false, true, 1, 0x41}, {false, false, 1, 0x01}, {false, false, 3, 0x03},
	} {
		c := MakeControl(tc.tagged, tc.last, tc.dv)
		if byte(c) != tc.want || c.Tagged() != tc.tagged || c.Last() != tc.last || c.DV() != tc.dv {
			t.Errorf("MakeControl(%v,%v,%d) = %#x, want %#x", tc.tagged, tc.last, tc.dv, byte(c), tc.want)
		}
	}
	// Rsvd is not checked on receive (RFC 5041 §4.1).
	h, _, err := ParseHeader(unhex(t, "fd 40 00001234 0000000000002800"))
	if err != nil || !h.Tagged || !h.Last || h.DV != 1 {
		t.Fatalf("ParseHeader with Rsvd bits set = %+v, %v", h, err)
	}
	// And is zero on transmit.
	if b := h.Append(nil); b[0] != 0xc1 {
		t.Fatalf("Append kept Rsvd bits: %#x", b[0])
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, g := range goldenHeaders {
		f.Add(unhex(f, g.wire))
	}
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := ParseHeader(b)
		if err != nil {
			return
		}
		if n != h.Len() || n > len(b) {
			t.Fatalf("n = %d, Len = %d, input %d", n, h.Len(), len(b))
		}
		// Round trip, but for the Rsvd bits, which are zeroed on transmit.
		out := h.Append(nil)
		want := append([]byte(nil), b[:n]...)
		want[0] &^= byte(controlRsvd)
		if !bytes.Equal(out, want) {
			t.Fatalf("round trip: % x -> % x", b[:n], out)
		}
	})
}

func BenchmarkHeader(b *testing.B) {
	h := goldenHeaders[0].h
	buf := make([]byte, 0, MaxHeaderLen)
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(TaggedHeaderLen)
		for b.Loop() {
			buf = h.Append(buf[:0])
		}
	})
	wire := h.Append(nil)
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(TaggedHeaderLen)
		for b.Loop() {
			if _, _, err := ParseHeader(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
}
