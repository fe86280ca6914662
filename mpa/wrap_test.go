package mpa

import (
	"bytes"
	"testing"
)

// RFC 5044 §4.3: Markers are placed by "(SeqNum - SeqStart) mod 512", and
// finding the FPDU header from a Marker "MUST take into account that the
// TCP sequence number could have wrapped between the Marker and the
// header". Writer and Reader count stream positions from SeqStart in 64
// bits, so the 2^32 octets after which TCP's sequence numbers wrap are
// no boundary at all: FPDUs written across position 2^32 put their
// Markers exactly every 512 octets (one at 2^32 itself, with the FPDUPTR
// back to a header written before it) and read back whole.
func TestMarkersAcrossSequenceWrap(t *testing.T) {
	const start = 1<<32 - 1500 // a multiple of 4 whose next Marker is 1<<32 - 1024
	var wire bytes.Buffer
	w := NewWriter(&wire, markersCRC)
	w.pos = start
	var sent [][]byte
	starts := map[uint64]bool{} // where each FPDU's ULPDU_Length is
	for i := range 12 {
		at := w.Offset()
		if at%MarkerInterval == 0 {
			at += MarkerLen // a Marker due there comes first
		}
		starts[at] = true
		p := bytes.Repeat([]byte{byte('a' + i)}, 100+37*i)
		hdr := []byte{0xc1, 0x40, byte(i), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		if err := w.WriteFPDU(hdr, [][]byte{p}); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, append(hdr, p...))
	}
	end := w.Offset()
	if end <= 1<<32 {
		t.Fatalf("the FPDUs end at %d, before 2^32", end)
	}
	// Every Marker position (relative to SeqStart, a multiple of 512)
	// holds a Marker whose FPDUPTR points back to an FPDU's ULPDU_Length,
	// checked on the octets themselves; then the Reader, starting at the
	// same position, finds every FPDU.
	b := wire.Bytes()
	markers := 0
	for pos := uint64(start); pos < end; pos++ {
		if pos%MarkerInterval != 0 {
			continue
		}
		markers++
		m, _, err := ParseMarker(b[pos-start:])
		if err != nil {
			t.Fatal(err)
		}
		if m.Reserved != 0 || m.FPDUPTR&3 != 0 {
			t.Fatalf("the Marker at %#x: %+v", pos, m)
		}
		// "FPDUPTR MUST contain the number of octets in the TCP stream
		// from the beginning of the ULPDU Length field to the first octet
		// of the entire Marker"; 0x0000: an FPDU starts right after it
		// (RFC 5044 §4.2).
		if back := uint64(m.Offset()); back == 0 && !starts[pos+MarkerLen] || back != 0 && !starts[pos-back] {
			t.Fatalf("the Marker at %#x points %d octets back, at no FPDU", pos, back)
		}
		if pos == 1<<32 {
			t.Logf("the Marker at 2^32 points %d octets back", m.Offset())
		}
	}
	if want := int((end-1)/MarkerInterval - (start-1)/MarkerInterval); markers != want || markers < 3 {
		t.Fatalf("%d Markers between %#x and %#x, want %d", markers, start, end, want)
	}
	r := NewReader(bytes.NewReader(b), markersCRC)
	r.pos = start
	for i, want := range sent {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("FPDU %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("FPDU %d: % x\nwant % x", i, got, want)
		}
	}
	if r.Offset() != end {
		t.Fatalf("the Reader ends at %#x, the Writer at %#x", r.Offset(), end)
	}
}
