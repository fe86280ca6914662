package mpa

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/iwarpgo/iwarp/term"
)

// readAll reads every FPDU of r with the given read style and returns the
// ULPDUs, stopping at the first error.
func readAll(r *Reader, style int, rng *rand.Rand) ([][]byte, error) {
	var out [][]byte
	for {
		n, err := r.Next()
		if err != nil {
			return out, err
		}
		if r.Remaining() != n {
			panic("Remaining")
		}
		u := make([]byte, n)
		switch style {
		case 0: // header then payload, as DDP does
			if err := r.ReadFull(u[:14]); err != nil {
				return out, err
			}
			if err := r.ReadFull(u[14:]); err != nil {
				return out, err
			}
		case 1: // small Reads
			off := 0
			for {
				m, err := r.Read(u[off:min(n, off+1+rng.IntN(700))])
				off += m
				if err == io.EOF || off == n {
					break
				}
				if err != nil {
					return out, err
				}
			}
			if m, err := r.Read(u[:1]); m != 0 || err != io.EOF {
				panic("Read past the ULPDU")
			}
		case 2: // read the header, Discard some, Finish skips the rest
			if err := r.ReadFull(u[:14]); err != nil {
				return out, err
			}
			d := rng.IntN(n - 14 + 1)
			if err := r.Discard(d); err != nil {
				return out, err
			}
			u = u[:14]
		}
		if err := r.Finish(); err != nil {
			return out, err
		}
		out = append(out, u)
	}
}

func TestReaderFigures(t *testing.T) {
	var stream []byte
	stream = append(stream, fig5...)
	stream, _ = AppendFPDU(stream, uint64(len(stream)), markersCRC, make([]byte, 0x1ec-len(fig5)-6))
	stream = append(stream, fig6...)
	r := NewReader(bytes.NewReader(stream), markersCRC)
	got, err := readAll(r, 0, nil)
	if err != io.EOF || len(got) != 3 || !bytes.Equal(got[0], sendULPDU(1)) || !bytes.Equal(got[2], sendULPDU(2)) {
		t.Fatalf("%d ULPDUs, %v", len(got), err)
	}
	if r.Offset() != uint64(len(stream)) {
		t.Fatalf("Offset %d", r.Offset())
	}
}

// Random FPDU streams read back with every read style and many ways the
// underlying reader can cut the stream.
func TestReaderChunking(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, o := range allOptions {
		var segs []segment
		for range 60 {
			n := rng.IntN(1500)
			if rng.IntN(10) == 0 {
				n = rng.IntN(20000)
			}
			segs = append(segs, randomSegment(rng, n))
		}
		stream := encodeAll(segs, o)
		readers := map[string]func() io.Reader{
			"whole":    func() io.Reader { return bytes.NewReader(stream) },
			"onebyte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
			"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
			"dataerr":  func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
			"chunks":   func() io.Reader { return &chunkReader{b: stream, sizes: []int{1, 3, 0, 7, 512, 1, 4096, 2, 0, 9000}} },
			"timeout1": func() io.Reader { return iotest.TimeoutReader(bytes.NewReader(stream)) },
		}
		for name, mk := range readers {
			for style := range 3 {
				for _, size := range []int{64, 1000, DefaultBufferSize} {
					r := NewReaderSize(mk(), o, size)
					got, err := readAll(r, style, rng)
					if name == "timeout1" {
						// The second Read times out: sticky, reported as
						// the connection lost.
						if !errors.Is(err, iotest.ErrTimeout) || !errors.Is(err, term.MPAConnectionLost) {
							t.Fatalf("timeout: %v", err)
						}
						if _, err2 := r.Next(); err2 != err && !errors.Is(err2, iotest.ErrTimeout) {
							t.Fatalf("not sticky: %v", err2)
						}
						continue
					}
					if err != io.EOF || len(got) != len(segs) {
						t.Fatalf("%+v %s style %d size %d: %d of %d ULPDUs, %v", o, name, style, size, len(got), len(segs), err)
					}
					for i, s := range segs {
						want := s.ulpdu()
						if style == 2 {
							want = want[:14]
						}
						if !bytes.Equal(got[i], want) {
							t.Fatalf("%+v %s style %d: ULPDU %d differs", o, name, style, i)
						}
					}
				}
			}
		}
	}
}

// Large reads go from the underlying reader straight into the caller's
// buffer, not through the Reader's buffer.
func TestReaderDirect(t *testing.T) {
	seg := randomSegment(rand.New(rand.NewPCG(5, 6)), 60000)
	stream := encodeAll([]segment{seg}, Options{CRC: true})
	rec := &recordingReader{r: bytes.NewReader(stream)}
	r := NewReaderSize(rec, Options{CRC: true}, 4096)
	n, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, n)
	if err := r.ReadFull(dst); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, seg.ulpdu()) {
		t.Fatal("ULPDU differs")
	}
	direct := 0
	lo := uintptr(unsafe.Pointer(&dst[0]))
	for _, p := range rec.ptrs {
		if p >= lo && p < lo+uintptr(len(dst)) {
			direct++
		}
	}
	if direct == 0 {
		t.Fatalf("no Read went straight into the destination (%d reads)", len(rec.ptrs))
	}
	if len(rec.ptrs) > 4 {
		t.Fatalf("%d reads for one FPDU", len(rec.ptrs))
	}
}

type recordingReader struct {
	r    io.Reader
	ptrs []uintptr
}

func (c *recordingReader) Read(p []byte) (int, error) {
	if len(p) > 0 {
		c.ptrs = append(c.ptrs, uintptr(unsafe.Pointer(&p[0])))
	}
	return c.r.Read(p)
}

func TestReaderErrors(t *testing.T) {
	good := encodeAll([]segment{{hdr: sendULPDU(1)}, {hdr: sendULPDU(2)}}, Options{CRC: true})
	second := WireLen(42, 0, false)

	expect := func(t *testing.T, stream []byte, o Options, ok int, target error) {
		t.Helper()
		r := NewReader(bytes.NewReader(stream), o)
		got, err := readAll(r, 0, nil)
		if len(got) != ok || !errors.Is(err, target) {
			t.Fatalf("%d ULPDUs, %v; want %d and %v", len(got), err, ok, target)
		}
		// Sticky.
		if _, err2 := r.Next(); err2 != err {
			t.Fatalf("Next after error: %v", err2)
		}
		if err2 := r.Finish(); err2 != err {
			t.Fatalf("Finish after error: %v", err2)
		}
		if r.Err() != err {
			t.Fatalf("Err: %v", r.Err())
		}
		t.Log(err)
	}
	t.Run("clean end", func(t *testing.T) { expect(t, good, Options{CRC: true}, 2, io.EOF) })
	t.Run("crc", func(t *testing.T) {
		b := bytes.Clone(good)
		b[second+20] ^= 1
		expect(t, b, Options{CRC: true}, 1, term.MPACRCError)
		// CRC off: "MUST NOT be checked".
		expect(t, b, Options{}, 2, io.EOF)
	})
	t.Run("crc field", func(t *testing.T) {
		b := bytes.Clone(good)
		b[len(b)-1] ^= 0x80
		expect(t, b, Options{CRC: true}, 1, term.MPACRCError)
	})
	t.Run("short ULPDU_Length", func(t *testing.T) {
		b := bytes.Clone(good)
		b[second+1] = 13
		expect(t, b, Options{CRC: true}, 1, term.MPAInvalidFrame)
	})
	t.Run("long ULPDU_Length", func(t *testing.T) {
		expect(t, good, Options{CRC: true, MaxULPDU: 41}, 0, term.MPAInvalidFrame)
	})
	t.Run("huge ULPDU_Length then EOF", func(t *testing.T) {
		b := append(bytes.Clone(good[:second]), 0xff, 0xff, 1, 2, 3)
		expect(t, b, Options{CRC: true}, 1, io.ErrUnexpectedEOF)
	})
	for cut := 1; cut < second; cut++ {
		b := good[:second+cut]
		r := NewReader(bytes.NewReader(b), Options{CRC: true})
		got, err := readAll(r, 0, nil)
		if len(got) != 1 || !errors.Is(err, term.MPAConnectionLost) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut %d: %d %v", cut, len(got), err)
		}
	}
	t.Run("marker with valid crc", func(t *testing.T) {
		var stream []byte
		stream = append(stream, fig5...)
		stream, _ = AppendFPDU(stream, uint64(len(stream)), markersCRC, make([]byte, 0x1ec-len(fig5)-6))
		b := bytes.Clone(fig6)
		b[0x200-0x1ec+3] = 0x10
		PutCRC(b[len(b)-4:], CRC(b[:len(b)-4]))
		stream = append(stream, b...)
		expect(t, stream, markersCRC, 2, term.MPAMarkerMismatch)
		// The same with CRCs off.
		expect(t, stream, Options{Markers: true}, 2, term.MPAMarkerMismatch)
		// A bad Marker in an FPDU with a bad CRC is a CRC error.
		stream[len(stream)-1] ^= 1
		expect(t, stream, markersCRC, 2, term.MPACRCError)
	})
	t.Run("marker before ULPDU_Length not zero", func(t *testing.T) {
		b := bytes.Clone(fig5)
		b[3] = 8
		PutCRC(b[len(b)-4:], CRC(b[:len(b)-4]))
		expect(t, b, markersCRC, 0, term.MPAMarkerMismatch)
	})
	t.Run("marker before CRC", func(t *testing.T) {
		b, _ := AppendFPDU(nil, 0, markersCRC, make([]byte, 506)) // 4+2+506 = 512: Marker before CRC
		if m, _, _ := ParseMarker(b[512:]); m.FPDUPTR != 508 {
			t.Fatalf("test bug: %+v", m)
		}
		expect(t, b, markersCRC, 1, io.EOF)
		b[512+3] = 0
		PutCRC(b[len(b)-4:], CRC(b[:len(b)-4]))
		expect(t, b, markersCRC, 0, term.MPAMarkerMismatch)
	})
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { return 0, nil }

type badCountReader struct{}

func (badCountReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

func TestReaderBadUnderlying(t *testing.T) {
	r := NewReader(zeroReader{}, Options{})
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) || !errors.Is(err, term.MPAConnectionLost) {
		t.Fatal(err)
	}
	r = NewReader(badCountReader{}, Options{})
	if _, err := r.Next(); !errors.Is(err, term.MPAConnectionLost) {
		t.Fatal(err)
	}
}

func TestReaderState(t *testing.T) {
	stream := encodeAll([]segment{{hdr: sendULPDU(1)}}, Options{CRC: true})
	r := NewReader(bytes.NewReader(stream), Options{CRC: true})
	buf := make([]byte, 100)
	if _, err := r.Read(buf); !errors.Is(err, ErrState) {
		t.Fatal(err)
	}
	if err := r.Finish(); !errors.Is(err, ErrState) {
		t.Fatal(err)
	}
	if err := r.ReadFull(buf[:1]); !errors.Is(err, ErrState) {
		t.Fatal(err)
	}
	n, err := r.Next()
	if err != nil || n != 42 {
		t.Fatal(n, err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrState) {
		t.Fatal(err)
	}
	if err := r.ReadFull(buf[:43]); !errors.Is(err, ErrState) {
		t.Fatal(err)
	}
	if err := r.Discard(43); !errors.Is(err, ErrState) {
		t.Fatal(err)
	}
	if m, err := r.Read(buf[:0]); m != 0 || err != nil {
		t.Fatal(m, err)
	}
	// The usage errors did not break it.
	if err := r.ReadFull(buf[:42]); err != nil || !bytes.Equal(buf[:42], sendULPDU(1)) {
		t.Fatal(err)
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

func TestReaderAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, o := range allOptions {
		// A stream that can repeat: with Markers its length must be a
		// multiple of 512 so that the Markers stay on the grid.
		segs := []segment{randomSegment(rng, 30000), randomSegment(rng, 100), randomSegment(rng, 3000)}
		stream := encodeAll(segs, o)
		for o.Markers && len(stream)%512 != 0 {
			segs = append(segs, randomSegment(rng, 0))
			stream = encodeAll(segs, o)
		}
		r := NewReader(&loopReader{b: stream}, o)
		dst := make([]byte, MaxULPDU)
		if n := testing.AllocsPerRun(300, func() {
			n, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.ReadFull(dst[:n]); err != nil {
				t.Fatal(err)
			}
			if err := r.Finish(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%+v: %v allocations per FPDU", o, n)
		}
	}
}

func BenchmarkReader(b *testing.B) {
	for _, size := range []int{1454, 8942, 65535} {
		for _, o := range []Options{{CRC: true}, {}, markersCRC} {
			if o.Markers && size == 65535 {
				size = 65000
			}
			b.Run(benchName(size, o), func(b *testing.B) {
				// Enough FPDUs that the stream length is a multiple of
				// 512, so Markers line up when it repeats.
				seg := segment{hdr: make([]byte, 14), payload: [][]byte{make([]byte, size-14)}}
				var segs []segment
				stream := encodeAll(append(segs, seg), o)
				for len(stream)%512 != 0 {
					segs = append(segs, seg)
					stream = encodeAll(segs, o)
				}
				r := NewReader(&loopReader{b: stream}, o)
				dst := make([]byte, size)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					n, err := r.Next()
					if err != nil {
						b.Fatal(err)
					}
					if err := r.ReadFull(dst[:n]); err != nil {
						b.Fatal(err)
					}
					if err := r.Finish(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
