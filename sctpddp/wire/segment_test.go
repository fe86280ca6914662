package wire

import (
	"bytes"
	"errors"
	"testing"
)

// goldenTaggedChunk is a DDP Segment Chunk (RFC 5043 §5.2.2) carrying a
// zero-length tagged DDP Segment (RFC 5041 §4.2, Figure 4), written field
// by field from the two figures.
var goldenTaggedChunk = []byte{
	0x12, 0x34, // DDP-SSN = 0x1234
	0xC1,                   // DDP Control: T=1, L=1, Rsvd=0, DV=1
	0x00,                   // RsvdULP
	0x00, 0x01, 0x02, 0x03, // Data Sink STag
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, // Data Sink Tagged Offset
}

// goldenUntaggedChunk carries an untagged DDP Segment (RFC 5041 §4.3,
// Figure 5) with two bytes of ULP payload and the largest DDP-SSN. The
// DDP-SSN sits where MPA's ULPDU Length would (Figure 5's 16-bit offset),
// so the DDP Header keeps its 32-bit alignment.
var goldenUntaggedChunk = []byte{
	0xFF, 0xFF, // DDP-SSN = 65535
	0x41,                         // DDP Control: T=0, L=1, Rsvd=0, DV=1
	0x00, 0x00, 0x00, 0x00, 0x00, // RsvdULP (40 bits)
	0x00, 0x00, 0x00, 0x00, // QN = 0
	0x00, 0x00, 0x00, 0x01, // MSN = 1
	0x00, 0x00, 0x00, 0x00, // MO = 0
	'h', 'i', // ULP payload
}

func TestSegmentChunkGolden(t *testing.T) {
	tests := []struct {
		name string
		wire []byte
		want SegmentChunk
	}{
		{"tagged", goldenTaggedChunk, SegmentChunk{SSN: 0x1234, Segment: goldenTaggedChunk[2:]}},
		{"untagged", goldenUntaggedChunk, SegmentChunk{SSN: 65535, Segment: goldenUntaggedChunk[2:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n, err := ParseSegmentChunk(tt.wire)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tt.wire) || got.SSN != tt.want.SSN || !bytes.Equal(got.Segment, tt.want.Segment) {
				t.Fatalf("parsed %+v (%d bytes), want %+v", got, n, tt.want)
			}
			if enc := tt.want.Append(nil); !bytes.Equal(enc, tt.wire) {
				t.Fatalf("Append = % x, want % x", enc, tt.wire)
			}
			if tt.want.Len() != len(tt.wire) {
				t.Fatalf("Len = %d, want %d", tt.want.Len(), len(tt.wire))
			}
			// Append appends.
			pre := []byte{9, 9}
			if enc := tt.want.Append(pre); !bytes.Equal(enc[:2], pre) || !bytes.Equal(enc[2:], tt.wire) {
				t.Fatal("Append does not append")
			}
		})
	}
}

func TestSegmentChunkRoundTrip(t *testing.T) {
	for _, ssn := range []SSN{0, 1, 0x7fff, 0x8000, 0xffff} {
		seg := append([]byte{0x80}, make([]byte, 13+int(ssn)%50)...)
		c := SegmentChunk{SSN: ssn, Segment: seg}
		got, n, err := ParseSegmentChunk(c.Append(nil))
		if err != nil || n != c.Len() || got.SSN != ssn || !bytes.Equal(got.Segment, seg) {
			t.Fatalf("round trip of %d: %+v %d %v", ssn, got, n, err)
		}
	}
}

// TestSegmentChunkTruncated: the chunk has no length field, so the SCTP
// message boundary ends it; every prefix too short to hold the DDP-SSN and
// the DDP Header its T flag announces is rejected, and every longer prefix
// is a shorter (valid-looking) segment that is consumed whole.
func TestSegmentChunkTruncated(t *testing.T) {
	for _, g := range []struct {
		wire []byte
		hdr  int // DDP-SSN and the DDP Header: RFC 5041 §4.2's 112 bits, §4.3's 144
	}{{goldenTaggedChunk, 2 + 14}, {goldenUntaggedChunk, 2 + 18}} {
		wire, hdr := g.wire, g.hdr
		for i := 0; i < len(wire); i++ {
			c, n, err := ParseSegmentChunk(wire[:i])
			if i < hdr {
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("prefix %d of % x: err = %v, want ErrTruncated", i, wire, err)
				}
				continue
			}
			if err != nil || n != i || len(c.Segment) != i-SSNLen {
				t.Fatalf("prefix %d: %v, n=%d", i, err, n)
			}
		}
	}
	// The tagged golden chunk is header-only: every strict prefix fails.
	for i := 0; i < len(goldenTaggedChunk); i++ {
		if _, _, err := ParseSegmentChunk(goldenTaggedChunk[:i]); err == nil {
			t.Fatalf("strict prefix %d accepted", i)
		}
	}
}

func TestParseSegmentChunkAliases(t *testing.T) {
	buf := append([]byte(nil), goldenTaggedChunk...)
	c, _, _ := ParseSegmentChunk(buf)
	buf[2] = 0xAA
	if c.Segment[0] != 0xAA {
		t.Fatal("Segment does not alias the parsed buffer")
	}
	if cap(c.Segment) != len(c.Segment) {
		t.Fatal("Segment capacity reaches past the chunk")
	}
}

func TestParseSegmentChunkAllocs(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_, _, _ = ParseSegmentChunk(goldenUntaggedChunk)
	})
	if allocs != 0 {
		t.Fatalf("ParseSegmentChunk allocates %v times", allocs)
	}
	buf := make([]byte, 0, 64)
	c := SegmentChunk{SSN: 3, Segment: goldenTaggedChunk[2:]}
	allocs = testing.AllocsPerRun(100, func() { _ = c.Append(buf[:0]) })
	if allocs != 0 {
		t.Fatalf("Append allocates %v times", allocs)
	}
}

func FuzzParseSegmentChunk(f *testing.F) {
	f.Add(goldenTaggedChunk)
	f.Add(goldenUntaggedChunk)
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, n, err := ParseSegmentChunk(b)
		if err != nil {
			if n != 0 {
				t.Fatalf("error with n=%d", n)
			}
			return
		}
		if n != len(b) || c.Len() != n {
			t.Fatalf("n=%d Len=%d len(b)=%d", n, c.Len(), len(b))
		}
		if enc := c.Append(nil); !bytes.Equal(enc, b) {
			t.Fatalf("re-encoding differs: % x vs % x", enc, b)
		}
	})
}
