package mpa

import (
	"bytes"
	"testing"
)

func TestMarkerCodec(t *testing.T) {
	m := Marker{FPDUPTR: 0x14}
	b := m.Append(nil)
	if !bytes.Equal(b, []byte{0, 0, 0, 0x14}) || m.Len() != 4 {
		t.Fatalf("Append %x", b)
	}
	got, n, err := ParseMarker([]byte{0x12, 0x34, 0x01, 0x17})
	if err != nil || n != 4 || got.Reserved != 0x1234 || got.FPDUPTR != 0x0117 {
		t.Fatalf("ParseMarker %+v %d %v", got, n, err)
	}
	// "the receivers MUST always treat these as zero for calculations"
	if got.Offset() != 0x0114 {
		t.Fatalf("Offset %#x", got.Offset())
	}
	for i := range 4 {
		if _, n, err := ParseMarker(b[:i]); err == nil || n != 0 {
			t.Fatalf("prefix %d accepted", i)
		}
	}
}

func TestMarkerPositions(t *testing.T) {
	// "If the MPA connection is started at TCP sequence number 11, then
	// the 1st Marker will begin at 11, and subsequent Markers will begin
	// at 523, 1035, etc." (RFC 5044 §4.3): positions relative to SeqStart.
	for _, seq := range []uint64{11, 523, 1035} {
		if !markerDue(seq - 11) {
			t.Errorf("no Marker at sequence %d", seq)
		}
	}
	if markerDue(12-11) || markerDue(522-11) {
		t.Error("Marker off the grid")
	}
	if toNextMarker(0) != 512 || toNextMarker(508) != 4 || toNextMarker(513) != 511 {
		t.Error("toNextMarker")
	}
}

func TestWireLen(t *testing.T) {
	cases := []struct {
		ulpdu   int
		pos     uint64
		markers bool
		want    int
	}{
		{42, 0, false, 48},
		{42, 0, true, 52},       // Figure 5: Marker first
		{42, 0x1ec, true, 52},   // Figure 6: Marker inside
		{16, 500, true, 24 + 4}, // Figure 4: Marker after 12 octets
		{43, 4, true, 52},       // no Marker in [4, 56)
		{506, 4, true, 512 + 4}, // Marker just before the CRC: 4+2+506+0 = 512
		{1000, 0, true, 4 + 1008 + 4},
		{65535, 0, true, 65544 + 130*4},
	}
	for _, tc := range cases {
		if got := WireLen(tc.ulpdu, tc.pos, tc.markers); got != tc.want {
			t.Errorf("WireLen(%d, %d, %v) = %d, want %d", tc.ulpdu, tc.pos, tc.markers, got, tc.want)
		}
		enc, err := AppendFPDU(nil, tc.pos, Options{Markers: tc.markers, CRC: true}, make([]byte, tc.ulpdu))
		if err == nil && len(enc) != tc.want {
			t.Errorf("AppendFPDU(%d, %d) made %d octets, WireLen %d", tc.ulpdu, tc.pos, len(enc), tc.want)
		}
	}
}
