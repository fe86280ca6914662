package mpa

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// errClass maps the errors of ParseFPDU and of the Reader to what they
// mean, so that the two can be compared.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case err == io.EOF:
		return "eof"
	case err == ErrShortFPDU, errors.Is(err, ddp.ErrLLPLost):
		return "short"
	case errors.Is(err, term.MPACRCError):
		return "crc"
	case errors.Is(err, term.MPAMarkerMismatch):
		return "marker"
	case errors.Is(err, term.MPAInvalidFrame):
		return "length"
	}
	return "other: " + err.Error()
}

// FuzzReader feeds arbitrary octets, cut at arbitrary read boundaries, to
// a Reader with and without Markers and CRCs, and checks it against
// ParseFPDU applied to the whole stream: the same ULPDUs and the same
// first error. It must never panic.
func FuzzReader(f *testing.F) {
	var stream []byte
	stream = append(stream, fig5...)
	stream, _ = AppendFPDU(stream, uint64(len(stream)), markersCRC, make([]byte, 0x1ec-len(fig5)-6))
	stream = append(stream, fig6...)
	f.Add(stream, uint8(3), uint64(1))
	f.Add(encodeAll([]segment{{hdr: sendULPDU(1)}, {hdr: sendULPDU(2)}}, Options{CRC: true}), uint8(2), uint64(7))
	f.Add(encodeAll([]segment{{hdr: sendULPDU(1)}}, Options{}), uint8(0), uint64(0))
	f.Add([]byte{0x00, 0x0d, 1, 2, 3}, uint8(1), uint64(3))
	f.Add([]byte{0xff, 0xff, 1, 2, 3}, uint8(0), uint64(3))
	f.Add([]byte{0, 0, 0, 4, 0, 14, 1}, uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, b []byte, mode uint8, seed uint64) {
		o := Options{Markers: mode&2 != 0, CRC: mode&1 != 0}
		if mode&4 != 0 {
			o.MaxULPDU = 100
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		sizes := make([]int, 1+rng.IntN(8))
		for i := range sizes {
			sizes[i] = rng.IntN(600)
		}
		r := NewReader(&chunkReader{b: b, sizes: sizes}, o)
		var pos uint64
		for fpdus := 0; ; fpdus++ {
			want, n, werr := ParseFPDU(nil, b[pos:], pos, o)
			if werr == ErrShortFPDU && int(pos) == len(b) {
				werr = io.EOF
			}
			got, err := r.Next()
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("FPDU %d at %d: ULPDU differs", fpdus, pos)
			}
			if errClass(err) != errClass(werr) {
				t.Fatalf("FPDU %d at %d: Reader %v, ParseFPDU %v", fpdus, pos, err, werr)
			}
			if err != nil {
				return
			}
			pos += uint64(n)
			if r.Offset() != pos {
				t.Fatalf("Offset %d, want %d", r.Offset(), pos)
			}
		}
	})
}

// FuzzRoundTrip: what a Writer writes, a Reader reads back identically,
// for random header and payload sizes and random read chunking, with
// Markers on and off.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint16(10))
	f.Add(uint64(2), uint8(3), uint16(200))
	f.Add(uint64(3), uint8(2), uint16(3))
	f.Add(uint64(4), uint8(1), uint16(40000))
	f.Fuzz(func(t *testing.T, seed uint64, mode uint8, maxLen uint16) {
		o := Options{Markers: mode&2 != 0, CRC: mode&1 != 0}
		rng := rand.New(rand.NewPCG(seed, 99))
		var segs []segment
		var buf bytes.Buffer
		w := NewWriter(&buf, o)
		for range 1 + rng.IntN(20) {
			s := randomSegment(rng, rng.IntN(int(maxLen)%(MaxULPDU-18-600)+1))
			segs = append(segs, s)
			if err := w.WriteFPDU(s.hdr, s.payload); err != nil {
				t.Fatal(err)
			}
		}
		sizes := []int{1 + rng.IntN(3000), rng.IntN(5), 1 + rng.IntN(100000)}
		r := NewReader(&chunkReader{b: buf.Bytes(), sizes: sizes}, o)
		got, err := readAll(r)
		if err != io.EOF || len(got) != len(segs) {
			t.Fatalf("%d of %d ULPDUs: %v", len(got), len(segs), err)
		}
		for i, s := range segs {
			if !bytes.Equal(got[i], s.ulpdu()) {
				t.Fatalf("ULPDU %d differs", i)
			}
		}
	})
}

// FuzzParseFPDU: ParseFPDU never panics, and what it accepts re-encodes
// to the same octets up to the fields a receiver ignores.
func FuzzParseFPDU(f *testing.F) {
	f.Add(fig5, uint64(0), uint8(3))
	f.Add(fig6, uint64(0x1ec), uint8(3))
	f.Add(fig6[:20], uint64(0x1ec), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, pos uint64, mode uint8) {
		o := Options{Markers: mode&2 != 0, CRC: mode&1 != 0}
		u, n, err := ParseFPDU(nil, b, pos, o)
		if err != nil {
			if n != 0 || len(u) != 0 {
				t.Fatalf("error %v with n=%d", err, n)
			}
			return
		}
		if n > len(b) || n != WireLen(len(u), pos, o.Markers) {
			t.Fatalf("n=%d WireLen=%d", n, WireLen(len(u), pos, o.Markers))
		}
		enc, err := AppendFPDU(nil, pos, o, u)
		if err != nil {
			t.Fatal(err)
		}
		if !o.CRC {
			copy(enc[len(enc)-4:], b[n-4:n])
		}
		// PAD, Marker reserved fields and the low FPDUPTR bits may
		// differ (they are ignored but for the CRC); with CRCs on they
		// cannot, as the CRC would not match.
		if o.CRC && !bytes.Equal(enc, b[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", enc, b[:n])
		}
		if len(u) < MinULPDU {
			t.Fatalf("ULPDU_Length %d accepted", len(u))
		}
	})
}
