package readmodel

import (
	"errors"
	"net"
	"testing"
)

func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go Serve(ln)
	return ln.Addr().String()
}

// TestModel runs both shapes, with and without FPDUs, over loopback: every
// answer arrives, its CRC checks, and its payload is the source's.
func TestModel(t *testing.T) {
	addr := listen(t)
	for _, fpdus := range []bool{false, true} {
		if err := Stream(addr, fpdus, 100); err != nil {
			t.Fatalf("Stream(fpdus=%v): %v", fpdus, err)
		}
		if err := Read(addr, fpdus, 300, 16); err != nil {
			t.Fatalf("Read(fpdus=%v): %v", fpdus, err)
		}
	}
}

// TestReaderChecksCRC: a flipped octet is caught, in either shape, and
// the region keeps the payload of the last good answer only.
func TestReaderChecksCRC(t *testing.T) {
	for _, fpdus := range []bool{false, true} {
		a, b := net.Pipe()
		w := newWriter(a, fpdus)
		go func() {
			w.queue()
			w.flush()
			w.queue()
			// The second answer's (last) payload slice, CRC already made.
			i := len(w.iov) - 2
			if fpdus {
				i = len(w.iov) - 3
			}
			w.iov[i] = append([]byte(nil), w.iov[i]...)
			w.iov[i][0] ^= 1
			w.flush()
			a.Close()
		}()
		r := newReader(b, fpdus)
		if err := r.next(); err != nil {
			t.Fatalf("fpdus=%v: first answer: %v", fpdus, err)
		}
		for i, v := range r.region {
			if v != byte(i*7) {
				t.Fatalf("fpdus=%v: region[%d] = %d, want %d", fpdus, i, v, byte(i*7))
			}
		}
		if err := r.next(); !errors.Is(err, ErrCRC) {
			t.Fatalf("fpdus=%v: corrupted answer: %v, want ErrCRC", fpdus, err)
		}
		b.Close()
	}
}
