package perf

import (
	"fmt"
	"net"
	"testing"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	s := <-acc
	if s == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// BenchmarkPerfRawTCPStream compares shapes of the plain TCP stream that
// --compare-raw measures against: each message written on its own (the
// simplest baseline), copied into batches, or gathered from the
// source (writev) in batches of various sizes; CRC32c on both sides.
//
//	go test -run XXX -bench PerfRawTCPStream -benchtime 20000x ./cmd/iwarp/internal/perf
func BenchmarkPerfRawTCPStream(b *testing.B) {
	type shape struct {
		name   string
		gather bool
		batch  int
	}
	shapes := []shape{
		{"one-write-per-message", false, 0},
		{"copy/256KiB", false, 256 << 10},
		{"copy/1MiB", false, 1 << 20},
		{"gather/256KiB", true, 256 << 10},
		{"gather/1MiB", true, 1 << 20},
		{"gather/4MiB", true, 4 << 20},
	}
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		for _, sh := range shapes {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, sh.name), func(b *testing.B) {
				c, s := tcpPair(b)
				src := pattern(max(size, RawBufLen))
				stage := make([]byte, 0, max(RawBufLen, 4<<20, size+4))
				batch := sh.batch
				if batch == 0 {
					batch = 1 // one message per write
				}
				w := newMsgWriterShape(c, src, stage, size, true, sh.gather, batch)
				r := newMsgReader(s, make([]byte, RawBufLen), size, true)
				done := make(chan error, 1)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				go func() { done <- r.read(b.N) }()
				if err := w.write(b.N); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
