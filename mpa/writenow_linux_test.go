package mpa

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// Over a real socket: WriteNow's non-blocking writev puts on the wire what
// a Writer that waits would; once the peer stops reading and the socket
// is full, it refuses without writing, and what it took before the
// socket filled (the rest of a partial write included, finished by a
// Flush that waits) reaches the peer intact.
func TestWriteNowSocket(t *testing.T) {
	a, b := tcpPair(t)
	a.SetWriteBuffer(16 << 10)
	b.SetReadBuffer(16 << 10)
	o := Options{CRC: true, Markers: true}
	try := newTryNow(a)
	if try == nil {
		t.Fatal("no non-blocking write on a TCP connection")
	}
	var want bytes.Buffer
	ref := NewWriter(&want, o)
	w := NewWriter(a, o)
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	hdr := []byte{0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}
	refused := false
	deadline := time.Now().Add(10 * time.Second)
	for !refused {
		if time.Now().After(deadline) {
			t.Fatal("WriteNow never found the socket full")
		}
		at := w.Offset()
		ok, err := w.WriteNow(hdr, [][]byte{payload}, try)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if w.Offset() != at {
				t.Fatal("a refused WriteNow moved the stream on")
			}
			refused = true
			break
		}
		ref.WriteFPDU(hdr, [][]byte{payload})
		if w.Pending() {
			break // the socket is full now, with the rest of this FPDU left
		}
	}
	got := make(chan []byte)
	go func() {
		b.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, want.Len()+ref.MULPDU())
		n, _ := io.ReadFull(b, buf[:want.Len()])
		got <- buf[:n]
	}()
	if err := w.Flush(); err != nil { // the rest of a partial write, if any
		t.Fatal(err)
	}
	if g := <-got; !bytes.Equal(g, want.Bytes()) {
		t.Fatalf("the peer read %d octets that differ from the %d written at %d", len(g), want.Len(), firstDiff(g, want.Bytes()))
	}
}
