//go:build !js

package sctp

import (
	"context"
	"testing"
)

// BenchmarkAssociation moves 64 KiB messages on one stream between two
// associations over loopback UDP, MTU 8000: the association alone,
// without DTLS. Allocations are per message (eight packets and their
// SACKs); in steady state there are none.
//
// Run: go test -run XXX -bench Association -benchtime 5000x ./sctpddp/sctp
func BenchmarkAssociation(b *testing.B) {
	c, s := udpPair(b)
	cfg := Config{MTU: 8000, ReceiveBufferSize: 16 << 20, ReceiveWindow: 1 << 20, SendBufferSize: 16 << 20}
	a, z := assocPair(b, c, s, cfg, cfg)
	defer a.Abort()
	defer z.Abort()
	out, err := a.OpenStream(1)
	if err != nil {
		b.Fatal(err)
	}
	in, err := z.OpenStream(1)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 64<<10)
	payload := [][]byte{msg}
	ctx := context.Background()
	done := make(chan error, 1)
	read := func(n int) {
		buf := make([]byte, len(msg))
		for range n {
			if _, _, _, err := in.ReadMessage(ctx, buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}
	// Warm up: windows, pools and buffers reach their steady state.
	go read(200)
	for range 200 {
		if err := out.SendMessage(ctx, 16, true, payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	go read(b.N)
	for range b.N {
		if err := out.SendMessage(ctx, 16, true, payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
