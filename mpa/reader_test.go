package mpa

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// readAll reads every FPDU of r and returns copies of the ULPDUs,
// stopping at the first error.
func readAll(r *Reader) ([][]byte, error) {
	var out [][]byte
	for {
		u, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(u))
	}
}

func TestReaderFigures(t *testing.T) {
	var stream []byte
	stream = append(stream, fig5...)
	stream, _ = AppendFPDU(stream, uint64(len(stream)), markersCRC, make([]byte, 0x1ec-len(fig5)-6))
	stream = append(stream, fig6...)
	r := NewReader(bytes.NewReader(stream), markersCRC)
	got, err := readAll(r)
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
			r := NewReader(mk(), o)
			got, err := readAll(r)
			if name == "timeout1" {
				// The second Read times out: sticky, reported as the LLP
				// stream's loss.
				if !errors.Is(err, iotest.ErrTimeout) || !errors.Is(err, ddp.ErrLLPLost) {
					t.Fatalf("timeout: %v", err)
				}
				if _, err2 := r.Next(); err2 != err {
					t.Fatalf("not sticky: %v", err2)
				}
				continue
			}
			if err != io.EOF || len(got) != len(segs) {
				t.Fatalf("%+v %s: %d of %d ULPDUs, %v", o, name, len(got), len(segs), err)
			}
			for i, s := range segs {
				if !bytes.Equal(got[i], s.ulpdu()) {
					t.Fatalf("%+v %s: ULPDU %d differs", o, name, i)
				}
			}
		}
	}
}

// Next hands out nothing of an FPDU before all of it has arrived and its
// CRC is verified (RFC 5044 §6): an FPDU whose CRC fails yields no octet
// of its ULPDU, however the stream is cut.
func TestReaderVerifiesFirst(t *testing.T) {
	seg := randomSegment(rand.New(rand.NewPCG(5, 6)), 60000)
	stream := encodeAll([]segment{seg}, Options{CRC: true})
	stream[30000] ^= 0x40
	for _, mk := range []func() io.Reader{
		func() io.Reader { return bytes.NewReader(stream) },
		func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		func() io.Reader { return &chunkReader{b: stream, sizes: []int{2, 100, 4096, 1}} },
	} {
		r := NewReader(mk(), Options{CRC: true})
		u, err := r.Next()
		if u != nil || !errors.Is(err, term.MPACRCError) {
			t.Fatalf("a corrupted FPDU gave %d octets, %v", len(u), err)
		}
	}
}

// A peer that sends the start of an FPDU and then nothing is cut off after
// the partial-FPDU timeout; one that waits between FPDUs is not. (On the
// fake clock of testing/synctest.)
func TestReaderPartialTimeout(t *testing.T) { synctest.Test(t, testReaderPartialTimeout) }

func testReaderPartialTimeout(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	r := NewReader(b, Options{CRC: true})
	r.SetPartialTimeout(50 * time.Millisecond)
	fpdu := encodeAll([]segment{randomSegment(rand.New(rand.NewPCG(1, 2)), 1000)}, Options{CRC: true})
	go func() {
		time.Sleep(150 * time.Millisecond) // idle between FPDUs: not bounded
		a.Write(fpdu)
		a.Write(fpdu[:100])
	}()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := r.Next()
	if !errors.Is(err, ddp.ErrLLPLost) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled FPDU gave %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cut off after %v", d)
	}
}

// deadlineCounter counts the read deadlines a Reader sets on its conn.
type deadlineCounter struct {
	net.Conn
	set atomic.Int64
}

func (d *deadlineCounter) SetReadDeadline(t time.Time) error {
	d.set.Add(1)
	return d.Conn.SetReadDeadline(t)
}

// The partial-FPDU timeout bounds each FPDU, not the stream: FPDUs that
// each arrive in pieces within the timeout go on for many timeouts, and a
// pause between FPDUs after a deadline was set is not cut off. A stream of
// FPDUs arriving in pieces sets a deadline about once per timeout, not at
// each read; a stall is still cut off, within twice the timeout. (Over TLS:
// TestReaderPartialTimeoutStreamTLS.)
func TestReaderPartialTimeoutStream(t *testing.T) { synctest.Test(t, testReaderPartialTimeoutStream) }

func testReaderPartialTimeoutStream(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	testPartialTimeoutStream(t, a, b, 2000)
}

func testPartialTimeoutStream(t *testing.T, a, b net.Conn, fast int) {
	// Long beside the scheduling delays of a loaded two-core machine,
	// which can hold the writer between the halves of one FPDU.
	const timeout = 150 * time.Millisecond
	dc := &deadlineCounter{Conn: b}
	r := NewReader(dc, Options{CRC: true})
	r.SetPartialTimeout(timeout)
	fpdu := encodeAll([]segment{randomSegment(rand.New(rand.NewPCG(3, 4)), 1000)}, Options{CRC: true})
	half := len(fpdu) / 2
	go func() {
		// Many FPDUs in two pieces each, as fast as they go.
		for range fast {
			a.Write(fpdu[:half])
			a.Write(fpdu[half:])
		}
		// A pause between FPDUs of three timeouts.
		time.Sleep(3 * timeout)
		// FPDUs whose halves come 0.6 timeouts apart, for three timeouts.
		for range 5 {
			a.Write(fpdu[:half])
			time.Sleep(timeout * 6 / 10)
			a.Write(fpdu[half:])
		}
		// Then a stall inside an FPDU.
		a.Write(fpdu[:half])
	}()
	for i := range fast + 5 {
		if _, err := r.Next(); err != nil {
			t.Fatalf("FPDU %d: %v", i, err)
		}
	}
	if n := dc.set.Load(); n > 40 {
		t.Errorf("%d FPDUs in pieces set a read deadline %d times", fast+5, n)
	}
	start := time.Now()
	_, err := r.Next()
	if !errors.Is(err, ddp.ErrLLPLost) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled FPDU gave %v", err)
	}
	if d := time.Since(start); d < timeout/2 || d > 2*timeout+time.Second {
		t.Fatalf("cut off after %v", d)
	}
}

// resetConn gives its octets, then fails as a reset connection does; it
// takes read deadlines.
type resetConn struct {
	b   []byte
	err error
}

func (c *resetConn) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, c.err
	}
	n := copy(p, c.b)
	c.b = c.b[n:]
	return n, nil
}

func (c *resetConn) SetReadDeadline(time.Time) error { return nil }

// An error of the connection inside an FPDU is the stream's loss, not the
// partial-FPDU timeout, even while a deadline is set.
func TestReaderLossInsideFPDU(t *testing.T) {
	fpdu := encodeAll([]segment{randomSegment(rand.New(rand.NewPCG(5, 6)), 1000)}, Options{CRC: true})
	reset := errors.New("connection reset by peer")
	r := NewReader(&resetConn{b: fpdu[:100], err: reset}, Options{CRC: true})
	r.SetPartialTimeout(time.Hour)
	_, err := r.Next()
	if !errors.Is(err, ddp.ErrLLPLost) || !errors.Is(err, reset) || strings.Contains(err.Error(), "incomplete for") {
		t.Fatalf("a connection reset inside an FPDU gave %v", err)
	}
}

func TestReaderErrors(t *testing.T) {
	good := encodeAll([]segment{{hdr: sendULPDU(1)}, {hdr: sendULPDU(2)}}, Options{CRC: true})
	second := WireLen(42, 0, false)

	expect := func(t *testing.T, stream []byte, o Options, ok int, target error) {
		t.Helper()
		r := NewReader(bytes.NewReader(stream), o)
		got, err := readAll(r)
		if len(got) != ok || !errors.Is(err, target) {
			t.Fatalf("%d ULPDUs, %v; want %d and %v", len(got), err, ok, target)
		}
		// Sticky.
		if _, err2 := r.Next(); err2 != err {
			t.Fatalf("Next after error: %v", err2)
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
		got, err := readAll(r)
		if len(got) != 1 || !errors.Is(err, ddp.ErrLLPLost) || !errors.Is(err, io.ErrUnexpectedEOF) {
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
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) || !errors.Is(err, ddp.ErrLLPLost) {
		t.Fatal(err)
	}
	r = NewReader(badCountReader{}, Options{})
	if _, err := r.Next(); !errors.Is(err, ddp.ErrLLPLost) {
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
		r.Next() // the Reader grows its buffers once
		if n := testing.AllocsPerRun(300, func() {
			if _, err := r.Next(); err != nil {
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
					u, err := r.Next()
					if err != nil {
						b.Fatal(err)
					}
					copy(dst, u) // DDP places it
				}
			})
		}
	}
}
