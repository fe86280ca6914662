//go:build !js

package sctp

import (
	"context"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// The receive window grows with what the streams' readers take, not with
// what arrives: a peer whose messages nobody reads holds no more than the
// window it started with; once they are read fast, the window grows.
func TestReceiveWindowFollowsReads(t *testing.T) {
	c, s := udpPair(t)
	const start = 256 << 10
	cfg := Config{MTU: 8000, ReceiveBufferSize: 8 << 20, ReceiveWindow: start, SendBufferSize: 8 << 20}
	a, b := assocPair(t, c, s, cfg, cfg)
	defer a.Abort()
	defer b.Abort()
	out, err := a.OpenStream(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msg := make([]byte, 32<<10)
	sent := make(chan error, 1)
	go func() {
		for range 256 { // 8 MiB
			if err := out.SendMessage(ctx, 16, true, [][]byte{msg}); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	in, err := b.OpenStream(1)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads: the peer sends until the window is full, the window
	// stays where it started, and what the peer has delivered stays
	// within it.
	waitfor.True(t, 10*time.Second, func() bool { return in.queuedBytes() >= start-len(msg) },
		"%d bytes arrived for a window of %d", in.queuedBytes(), start)
	if w := b.ReceiveWindow(); w != start {
		t.Fatalf("receive window %d with nothing read, want %d", w, start)
	}
	if held := in.queuedBytes(); held > start {
		t.Fatalf("%d bytes held unread beyond the window of %d", held, start)
	}
	// Read everything, so that the sender finishes.
	buf := make([]byte, len(msg))
	for range 256 {
		if _, _, _, err := in.ReadMessage(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// tuneWindow, on the association's clock: the window doubles when the
// readers take half of it within two round trips, stays when they take
// it more slowly, stops at ReceiveBufferSize, and returns to
// ReceiveWindow after an idle second.
func TestTuneWindow(t *testing.T) {
	const start, limit = 256 << 10, 1 << 20
	now := time.Unix(1000, 0)
	rcv, err := NewReceiver(ReceiverConfig{PeerInitialTSN: 1, BufferSize: limit, InitialWindow: start, InboundStreams: 1}, func(RecvMessage) {})
	if err != nil {
		t.Fatal(err)
	}
	snd := NewSender(SenderConfig{PMDCS: 1200, InitialTSN: 1, PeerRwnd: limit}, now)
	snd.ObserveRTT(10 * time.Millisecond)
	a := &Association{cfg: Config{ReceiveBufferSize: limit, ReceiveWindow: start}, rcv: rcv, snd: snd}
	step := func(d time.Duration, n int, want uint32) {
		t.Helper()
		now = now.Add(d)
		a.tuneWindow(now, n)
		if w := a.rcv.Window(); w != want {
			t.Fatalf("window %d, want %d", w, want)
		}
	}
	step(0, 64<<10, start)                    // the epoch starts
	step(5*time.Millisecond, 64<<10, 2*start) // half the window in 5 ms: doubles
	step(100*time.Millisecond, 256<<10, 2*start)
	step(100*time.Millisecond, 256<<10, 2*start) // half of it in 200 ms, 20 round trips: stays
	step(time.Millisecond, 256<<10, limit)       // fast again: doubles, to the limit
	step(time.Millisecond, 512<<10, limit)
	step(time.Millisecond, 512<<10, limit) // at the limit: stays
	step(2*time.Second, 1, start)          // after an idle second: back to the start
}

// queuedBytes returns the bytes of the messages waiting to be read.
func (s *Stream) queuedBytes() int {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	n := 0
	for _, m := range s.inbox.all() {
		n += len(m.buf)
	}
	return n
}
