//go:build linux

package mpa

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// Writing without waiting never blocks on a peer that does not read: what
// the socket does not take is copied aside (so the caller may reuse its
// memory at once) and goes out first on the next waiting Flush; the
// octets on the wire are exactly those of FPDUs written one by one.
func TestWriterNoWait(t *testing.T) {
	for _, o := range []Options{{CRC: true}, {Markers: true, CRC: true}, {}} {
		a, b := tcpPair(t)
		a.SetWriteBuffer(64 << 10)
		b.SetReadBuffer(256 << 10)
		w := NewWriter(a, o)
		if !w.CanNoWait() {
			t.Fatal("a Writer on a TCP connection cannot write without waiting")
		}
		var want bytes.Buffer
		ref := NewWriter(&want, o)
		rng := rand.New(rand.NewPCG(5, 5))
		hdr := make([]byte, 18)
		payload := make([]byte, 16000)
		fpdu := func(w *Writer) {
			t.Helper()
			n := rng.IntN(len(payload))
			for j := range hdr {
				hdr[j] = byte(rng.Uint32())
			}
			for j := range payload[:n] {
				payload[j] = byte(rng.Uint32())
			}
			if err := ref.WriteFPDU(hdr, [][]byte{payload[:n]}); err != nil {
				t.Fatal(err)
			}
			if err := w.Queue(hdr, [][]byte{payload[:n/3], payload[n/3 : n]}); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			// The caller's memory is its own again.
			clear(hdr)
			clear(payload)
		}

		// 2 MiB without waiting, to a peer that reads nothing.
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.SetNoWait(true)
			for want.Len() < 2<<20 {
				fpdu(w)
			}
			w.SetNoWait(false)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a write without waiting waited for the peer")
		}
		if w.Behind() == 0 || w.behind == 0 {
			t.Fatal("the socket took 2 MiB at once: nothing was left behind")
		}
		// Then FPDUs written waiting: the backlog goes first.
		got := make([]byte, 0, 8<<20)
		read := make(chan error, 1)
		go func() {
			var err error
			got, err = io.ReadAll(b)
			read <- err
		}()
		for i := 0; i < 50; i++ {
			fpdu(w)
		}
		if w.Behind() != 0 {
			t.Fatalf("%d octets still behind after a waiting Flush", w.Behind())
		}
		a.CloseWrite()
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%+v: %d octets on the wire differ from the %d of FPDUs written one by one", o, len(got), want.Len())
		}
	}
}

// A flush without waiting allocates nothing while the socket takes it all.
func TestWriterNoWaitAllocs(t *testing.T) {
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b)
	w := NewWriter(a, Options{CRC: true})
	w.SetNoWait(true)
	hdr, payload := make([]byte, 18), make([]byte, 1000)
	allocs := testing.AllocsPerRun(1000, func() {
		w.Queue(hdr, [][]byte{payload})
		w.Queue(hdr, [][]byte{payload})
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if w.Behind() > 0 {
			w.SetNoWait(false)
			w.Flush()
			w.SetNoWait(true)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per flush without waiting", allocs)
	}
}
