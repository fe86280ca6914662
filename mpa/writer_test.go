package mpa

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
)

var allOptions = []Options{{}, {CRC: true}, {Markers: true}, {Markers: true, CRC: true}}

func TestWriterFigures(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, markersCRC)
	u := sendULPDU(1)
	if err := w.WriteFPDU(u[:18], [][]byte{u[18:]}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), fig5) {
		t.Fatalf("figure 5:\n got %x\nwant %x", buf.Bytes(), fig5)
	}
	mid := make([]byte, 0x1ec-len(fig5)-6)
	if err := w.WriteFPDU(mid, nil); err != nil {
		t.Fatal(err)
	}
	if w.Offset() != 0x1ec {
		t.Fatalf("Offset %#x", w.Offset())
	}
	u = sendULPDU(2)
	if err := w.WriteFPDU(u[:18], [][]byte{u[18:20], u[20:]}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes()[0x1ec:], fig6) {
		t.Fatalf("figure 6:\n got %x\nwant %x", buf.Bytes()[0x1ec:], fig6)
	}
}

// The Writer's gather write produces exactly what AppendFPDU produces.
// The Writer's gather writes, decoded by ParseFPDU (the decoder: its own
// Marker and CRC checks are the oracle here), give back every ULPDU, with
// a Marker at every 512th octet pointing at its FPDU; the Writer leaves its
// input alone.
func TestWriterRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, o := range allOptions {
		var segs []segment
		for range 300 {
			n := rng.IntN(1200)
			if rng.IntN(20) == 0 {
				n = rng.IntN(MaxULPDU - 18 - 600)
			}
			segs = append(segs, randomSegment(rng, n))
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, o)
		for _, s := range segs {
			before := s.ulpdu()
			if err := w.WriteFPDU(s.hdr, s.payload); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, s.ulpdu()) {
				t.Fatal("WriteFPDU modified its input")
			}
		}
		out := buf.Bytes()
		pos := 0
		for i, s := range segs {
			u, n, err := ParseFPDU(nil, out[pos:], uint64(pos), o)
			if err != nil {
				t.Fatalf("%+v: FPDU %d at %d: %v", o, i, pos, err)
			}
			if !bytes.Equal(u, s.ulpdu()) {
				t.Fatalf("%+v: FPDU %d carries another ULPDU", o, i)
			}
			pos += n
		}
		if pos != len(out) || w.Offset() != uint64(len(out)) {
			t.Fatalf("%+v: %d octets decoded of %d, Offset %d", o, pos, len(out), w.Offset())
		}
		if o.Markers {
			for m := 0; m < len(out); m += MarkerInterval {
				if out[m] != 0 || out[m+1] != 0 {
					t.Fatalf("%+v: the Marker at %d has reserved octets %x", o, m, out[m:m+2])
				}
			}
		}
	}
}

func TestWriterErrors(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{MaxULPDU: 200})
	if err := w.WriteFPDU(make([]byte, 100), [][]byte{make([]byte, 101)}); err != ErrULPDUTooLong || buf.Len() != 0 {
		t.Fatalf("too long: %v, wrote %d", err, buf.Len())
	}
	if w.MULPDU() != 200 {
		t.Fatalf("MULPDU %d", w.MULPDU())
	}
	// "The range of MULPDU values MUST be between 128 octets and 64768
	// octets, inclusive" (RFC 5044 §3): a smaller limit offers DDP 128,
	// and a ULPDU of that size goes.
	small := NewWriter(io.Discard, Options{MaxULPDU: 100})
	if m := small.MULPDU(); m != MinMULPDU {
		t.Fatalf("MULPDU %d with MaxULPDU 100, want %d", m, MinMULPDU)
	}
	if err := small.WriteFPDU(make([]byte, 18), [][]byte{make([]byte, MinMULPDU-18)}); err != nil {
		t.Fatalf("a ULPDU of the MULPDU: %v", err)
	}
	if err := small.WriteFPDU(make([]byte, 18), [][]byte{make([]byte, MinMULPDU-17)}); err != ErrULPDUTooLong {
		t.Fatalf("a ULPDU above the MULPDU: %v", err)
	}
	// With no limit set the MULPDU is RFC 5044 §3's largest, so that DDP,
	// which sizes its segments by it, posts no ULPDU above 64768 octets.
	if m := NewWriter(&buf, Options{}).MULPDU(); m != MaxMULPDU {
		t.Fatalf("MULPDU %d with no limit set, want %d", m, MaxMULPDU)
	}
	// With Markers 65535 octets of ULPDU would put a Marker out of
	// FPDUPTR's reach: nothing is written and the Writer stays usable.
	w = NewWriter(&buf, markersCRC)
	if err := w.WriteFPDU(make([]byte, 18), [][]byte{make([]byte, MaxULPDU-18)}); err != ErrULPDUTooLong || buf.Len() != 0 || w.Offset() != 0 {
		t.Fatalf("marker reach: %v, wrote %d", err, buf.Len())
	}
	if err := w.WriteFPDU(sendULPDU(1), nil); err != nil || !bytes.Equal(buf.Bytes(), fig5) {
		t.Fatalf("after refusal: %v %x", err, buf.Bytes())
	}
	// A write error is sticky and reported as the LLP stream's loss.
	fw := &failWriter{after: 48}
	w = NewWriter(fw, Options{CRC: true})
	if err := w.WriteFPDU(sendULPDU(1), nil); err != nil {
		t.Fatal(err)
	}
	err := w.WriteFPDU(sendULPDU(2), nil)
	if !errors.Is(err, ddp.ErrLLPLost) || !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write error: %v", err)
	}
	if err2 := w.WriteFPDU(sendULPDU(3), nil); err2 != err {
		t.Fatalf("not sticky: %v", err2)
	}
}

// failWriter accepts after octets, then fails.
type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.after {
		n := f.after
		f.after = 0
		return n, io.ErrClosedPipe
	}
	f.after -= len(p)
	return len(p), nil
}

func TestWriterAllocs(t *testing.T) {
	payload := [][]byte{make([]byte, 30000), make([]byte, 20000), make([]byte, 10000)}
	hdr := make([]byte, 18)
	for _, o := range allOptions {
		w := NewWriter(io.Discard, o)
		w.WriteFPDU(hdr, payload) // grows the gather list once
		if a := testing.AllocsPerRun(100, func() {
			if err := w.WriteFPDU(hdr, payload); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%+v: %v allocations per FPDU", o, a)
		}
	}
}

// Over a real TCP connection the gather write is writev(2) and still
// allocation-free.
func TestWriterAllocsTCP(t *testing.T) {
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b)
	payload := [][]byte{make([]byte, 4000), make([]byte, 4000)}
	hdr := make([]byte, 14)
	for _, o := range []Options{{CRC: true}, markersCRC} {
		w := NewWriter(a, o)
		w.WriteFPDU(hdr, payload)
		if n := testing.AllocsPerRun(200, func() {
			if err := w.WriteFPDU(hdr, payload); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%+v: %v allocations per FPDU over TCP", o, n)
		}
	}
}

func tcpPair(t testing.TB) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	return dialPair(t, &net.Dialer{})
}

// dialPair is a loopback TCP connection whose dialing end d makes.
func dialPair(t testing.TB, d *net.Dialer) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

func BenchmarkWriter(b *testing.B) {
	for _, size := range []int{1454, 8942, 65535} {
		for _, o := range []Options{{CRC: true}, {}, markersCRC} {
			if o.Markers && size == 65535 {
				size = 65000
			}
			name := benchName(size, o)
			b.Run(name, func(b *testing.B) {
				w := NewWriter(io.Discard, o)
				hdr := make([]byte, 14)
				payload := [][]byte{make([]byte, size-14)}
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					if err := w.WriteFPDU(hdr, payload); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func benchName(size int, o Options) string {
	s := "ulpdu=" + itoa(size)
	if o.CRC {
		s += "/crc"
	} else {
		s += "/nocrc"
	}
	if o.Markers {
		s += "+markers"
	}
	return s
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
