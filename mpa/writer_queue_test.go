package mpa

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FPDUs queued and flushed together are the same octets as FPDUs written
// one by one, with and without Markers and CRCs, whatever the batching
// (flushes now and then, or only when the gather list is full); the Writer
// keeps no reference to the caller's memory after Flush.
func TestQueueFlushSameOctets(t *testing.T) {
	for _, o := range []Options{{}, {CRC: true}, {Markers: true}, {Markers: true, CRC: true}} {
		for _, sometimes := range []bool{true, false} {
			queueFlushSameOctets(t, o, sometimes)
		}
	}
}

func queueFlushSameOctets(t *testing.T, o Options, sometimes bool) {
	rng := rand.New(rand.NewPCG(7, 7))
	var one, batched bytes.Buffer
	w1, w2 := NewWriter(&one, o), NewWriter(&batched, o)
	hdr := make([]byte, 18)
	for i := 0; i < 200; i++ {
		n := rng.IntN(3000)
		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		for j := range hdr {
			hdr[j] = byte(rng.Uint32())
		}
		if err := w1.WriteFPDU(hdr, [][]byte{payload}); err != nil {
			t.Fatal(err)
		}
		if err := w2.Queue(hdr, [][]byte{payload[:n/2], payload[n/2:]}); err != nil {
			t.Fatal(err)
		}
		// The header buffer is reused at once, as the DDP Sender does.
		clear(hdr)
		if sometimes && rng.IntN(3) == 0 {
			if err := w2.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), batched.Bytes()) {
		t.Fatalf("%+v (flushes now and then: %v): queued FPDUs differ from FPDUs written one by one", o, sometimes)
	}
	for _, b := range w2.bufs[:cap(w2.bufs)] {
		if b != nil {
			t.Fatal("the Writer kept a reference after Flush")
		}
	}
}
