//go:build !js

package mpa

import (
	"context"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// The transport's benchmarks: RDMA Write, RDMA Read and a 64-octet Send
// ping-pong over one loopback MPA connection, each measured against plain
// Go TCP moving the same bytes in the same run (computing CRC32c on both
// sides when the MPA connection does), reported as "ratio" (MPA's rate
// over the baseline's; for latency, MPA's round trip over the baseline's).
// docs/performance.md records the figures and the commands.

const benchMsg = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func benchPair(b *testing.B, crc bool, qcfg rdmap.QPConfig) (*peer, *peer) {
	a, p := newPeer(b, qcfg), newPeer(b, qcfg)
	cfg := Config{NoCRC: !crc}
	l, err := Listen("tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	acc := make(chan *Conn, 1)
	go func() {
		r, err := l.Accept(context.Background())
		if err != nil {
			acc <- nil
			return
		}
		c, _ := r.Accept(p.qp, nil)
		acc <- c
	}()
	if _, err := Dial(context.Background(), "tcp", l.Addr().String(), a.qp, &cfg); err != nil {
		b.Fatal(err)
	}
	if <-acc == nil {
		b.Fatal("accept failed")
	}
	return a, p
}

// retry posts until the send queue has room, waiting for completions.
func retry(b *testing.B, cq *rdmap.CompletionQueue, post func() error) {
	for err := post(); err != nil; err = post() {
		if !errors.Is(err, rdmap.ErrSendQueue) {
			b.Fatal(err)
		}
		waitC(b, cq)
	}
}

// rawStream moves n messages of size octets over plain TCP, the receiver
// reading each into one buffer; with crc both sides compute CRC32c over
// every octet, as MPA does. It returns the elapsed time.
func rawStream(b *testing.B, n, size int, crc bool) time.Duration {
	c, s := tcpPair(b)
	msg := make([]byte, size)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, size)
		var sum uint32
		for i := 0; i < n; i++ {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if crc {
				sum = crc32.Update(sum, castagnoli, buf)
			}
		}
		_ = sum
	}()
	start := time.Now()
	var sum uint32
	for i := 0; i < n; i++ {
		if crc {
			sum = crc32.Update(sum, castagnoli, msg)
		}
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	_ = sum
	return time.Since(start)
}

func BenchmarkWrite64K(b *testing.B) {
	for _, crc := range []bool{true, false} {
		name := "crc"
		if !crc {
			name = "nocrc"
		}
		b.Run(name, func(b *testing.B) {
			x, y := benchPair(b, crc, rdmap.QPConfig{SendDepth: 64, RecvDepth: 4})
			target := y.reg(b, benchMsg, rdmap.RemoteWrite)
			rbuf := y.reg(b, 8, rdmap.LocalWrite)
			src := x.reg(b, benchMsg, 0)
			wr := rdmap.WriteWR{SGL: []rdmap.SGE{{MR: src, Length: benchMsg}}, RemoteSTag: target.STag()}
			b.ReportAllocs()
			b.SetBytes(benchMsg)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				wr.Unsignaled = i%16 != 15
				retry(b, x.scq, func() error { return x.qp.PostWrite(wr) })
			}
			// A Send after the Writes: once it is delivered, every Write
			// has been placed (RFC 5040 §5.5 rule 10).
			y.qp.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 8}}})
			retry(b, x.scq, func() error { return x.qp.PostSend(rdmap.SendWR{ID: 99, Unsignaled: true}) })
			for c := waitC(b, y.rcq); c.WRID != 1; c = waitC(b, y.rcq) {
			}
			elapsed := time.Since(start)
			b.StopTimer()
			raw := rawStream(b, b.N, benchMsg, crc)
			b.ReportMetric(raw.Seconds()/elapsed.Seconds(), "ratio")
			b.ReportMetric(float64(b.N)*benchMsg/raw.Seconds()/1e6, "rawMB/s")
		})
	}
}

func BenchmarkRead64K(b *testing.B) {
	for _, crc := range []bool{true, false} {
		name := "crc"
		if !crc {
			name = "nocrc"
		}
		b.Run(name, func(b *testing.B) {
			x, y := benchPair(b, crc, rdmap.QPConfig{SendDepth: 64, IRD: 16, ORD: 16})
			src := y.reg(b, benchMsg, rdmap.RemoteRead)
			sink := x.reg(b, benchMsg, rdmap.LocalWrite)
			wr := rdmap.ReadWR{Local: rdmap.SGE{MR: sink, Length: benchMsg}, RemoteSTag: src.STag()}
			b.ReportAllocs()
			b.SetBytes(benchMsg)
			b.ResetTimer()
			start := time.Now()
			out := 0
			for i := 0; i < b.N; i++ {
				wr.Unsignaled = i%8 != 7 && i != b.N-1
				if out == 16 {
					// Wait for the oldest signaled one.
					waitC(b, x.scq)
					out -= 8
				}
				if err := x.qp.PostRead(wr); err != nil {
					b.Fatal(err)
				}
				out++
			}
			for c := waitC(b, x.scq); ; c = waitC(b, x.scq) {
				if c.WRID == 0 && x.qp.State() == rdmap.StateRunning {
					// The last read (always signaled) completes last.
					var rest [64]rdmap.Completion
					if x.scq.Poll(rest[:]) == 0 {
						break
					}
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			raw := rawStream(b, b.N, benchMsg, crc)
			b.ReportMetric(raw.Seconds()/elapsed.Seconds(), "ratio")
			b.ReportMetric(float64(b.N)*benchMsg/raw.Seconds()/1e6, "rawMB/s")
		})
	}
}

func BenchmarkSendPingPong64(b *testing.B) {
	x, y := benchPair(b, true, rdmap.QPConfig{})
	xs, ys := x.reg(b, 64, 0), y.reg(b, 64, 0)
	xr, yr := x.reg(b, 64, rdmap.LocalWrite), y.reg(b, 64, rdmap.LocalWrite)
	post := func(p *peer, mr *rdmap.MemoryRegion) {
		if err := p.qp.PostRecv(rdmap.RecvWR{SGL: []rdmap.SGE{{MR: mr, Length: 64}}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 8; i++ {
		post(x, xr)
		post(y, yr)
	}
	stop := make(chan struct{})
	go func() {
		// The responder echoes every Send.
		for {
			c, err := y.rcq.Wait(context.Background())
			if err != nil || c.Status != rdmap.StatusSuccess {
				return
			}
			post(y, yr)
			y.qp.PostSend(rdmap.SendWR{SGL: []rdmap.SGE{{MR: ys, Length: 64}}, Unsignaled: true})
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	b.Cleanup(func() { close(stop) })
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		x.qp.PostSend(rdmap.SendWR{SGL: []rdmap.SGE{{MR: xs, Length: 64}}, Unsignaled: true})
		waitC(b, x.rcq)
		post(x, xr)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// Plain TCP ping-pong of 64 octets.
	c, s := tcpPair(b)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			s.Write(buf)
		}
	}()
	buf := make([]byte, 64)
	rs := time.Now()
	for i := 0; i < b.N; i++ {
		c.Write(buf)
		io.ReadFull(c, buf)
	}
	raw := time.Since(rs)
	b.ReportMetric(elapsed.Seconds()/raw.Seconds(), "ratio")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "µs/rtt")
	b.ReportMetric(float64(raw.Microseconds())/float64(b.N), "raw-µs/rtt")
}
