package mpa

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// scriptedTry stands in for the non-blocking writev: it writes at most
// room octets of the gather list to out (or fails with err) and returns
// how many it wrote.
type scriptedTry struct {
	out  *bytes.Buffer
	room int
	err  error
}

func (s *scriptedTry) try(bufs [][]byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	for _, b := range bufs {
		k := min(len(b), s.room-n)
		s.out.Write(b[:k])
		n += k
	}
	return n, nil
}

// WriteNow's FPDUs, whole, cut short or refused, interleaved with Queue
// and Flush, make the stream a Writer that only queued and flushed makes:
// same octets, Markers where they are due and CRCs over them. A refused
// FPDU leaves no trace, the rest of a partial one leaves first at the next
// Flush, and WriteNow keeps no reference to its input.
func TestWriterWriteNow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, o := range allOptions {
		var want, got bytes.Buffer
		ref := NewWriter(&want, o)
		w := NewWriter(&got, o)
		s := &scriptedTry{out: &got}
		partials := 0
		for i := range 400 {
			seg := randomSegment(rng, rng.IntN(1500))
			if rng.IntN(3) == 0 {
				if err := w.Queue(seg.hdr, seg.payload); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := ref.WriteFPDU(seg.hdr, seg.payload); err != nil {
					t.Fatal(err)
				}
				continue
			}
			s.room = rng.IntN(2000)
			if rng.IntN(4) == 0 {
				s.room = 0
			}
			before, at := got.Len(), w.Offset()
			payload := make([][]byte, len(seg.payload))
			for j, p := range seg.payload {
				payload[j] = append([]byte(nil), p...)
			}
			ok, err := w.WriteNow(seg.hdr, payload, s.try)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if s.room != 0 || got.Len() != before || w.Offset() != at || w.Pending() {
					t.Fatalf("%+v: FPDU %d refused with room %d: wrote %d octets, Offset %d -> %d", o, i, s.room, got.Len()-before, at, w.Offset())
				}
				continue
			}
			if err := ref.WriteFPDU(seg.hdr, seg.payload); err != nil {
				t.Fatal(err)
			}
			for _, p := range payload {
				clear(p) // the caller reuses its memory at once
			}
			if w.Pending() {
				partials++
				// Nothing else is taken while the rest waits.
				if ok, _ := w.WriteNow(seg.hdr, seg.payload, s.try); ok {
					t.Fatal("WriteNow took an FPDU while the rest of another waited")
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) || w.Offset() != ref.Offset() {
			t.Fatalf("%+v: %d octets, Offset %d; want %d, %d (first difference at %d)", o, got.Len(), w.Offset(), want.Len(), ref.Offset(), firstDiff(got.Bytes(), want.Bytes()))
		}
		if partials == 0 {
			t.Fatalf("%+v: no partial write was tried", o)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A write error is the stream's loss, for WriteNow as for Flush.
func TestWriterWriteNowError(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, Options{CRC: true})
	boom := errors.New("boom")
	ok, err := w.WriteNow([]byte{1, 2, 3, 4}, nil, (&scriptedTry{out: &out, err: boom}).try)
	if ok || !errors.Is(err, boom) {
		t.Fatalf("WriteNow = %v, %v", ok, err)
	}
	if err := w.Flush(); !errors.Is(err, boom) {
		t.Fatalf("Flush after the error: %v", err)
	}
}
