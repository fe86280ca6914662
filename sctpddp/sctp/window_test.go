//go:build !js

package sctp

import (
	"context"
	"testing"
	"time"
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
	// Nobody reads: the window stays where it started, and what the peer
	// has delivered stays within it.
	time.Sleep(300 * time.Millisecond)
	if w := b.ReceiveWindow(); w != start {
		t.Fatalf("receive window %d with nothing read, want %d", w, start)
	}
	in, err := b.OpenStream(1)
	if err != nil {
		t.Fatal(err)
	}
	if held := in.queuedBytes(); held > start {
		t.Fatalf("%d bytes held unread beyond the window of %d", held, start)
	}
	// Read everything as it comes: the window grows.
	buf := make([]byte, len(msg))
	for range 256 {
		if _, _, _, err := in.ReadMessage(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if w := b.ReceiveWindow(); w <= start {
		t.Fatalf("receive window %d after 8 MiB read at once, want it grown beyond %d", w, start)
	}
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
