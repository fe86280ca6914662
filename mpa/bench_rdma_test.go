//go:build !js

package mpa

import (
	"context"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"os"
	"slices"
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
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
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
		c, _ := r.Accept(p.QP, nil)
		acc <- c
	}()
	if _, err := Dial(context.Background(), "tcp", l.Addr().String(), a.QP, &cfg); err != nil {
		b.Fatal(err)
	}
	if <-acc == nil {
		b.Fatal("accept failed")
	}
	return a, p
}

// benchRounds is how many rounds a benchmark alternates between MPA and
// its baseline. Each round times the same number of messages both ways,
// and the reported ratio is the median of the rounds' ratios: on a shared
// machine whose speed drifts over seconds, a ratio taken from adjacent
// short rounds is far steadier than one from two long runs in turn.
const benchRounds = 9

// rounds splits b.N into benchRounds rounds (fewer when b.N is small),
// runs mpa and raw alternately on each, with the timer stopped for raw,
// and reports the median ratio (from ratio(mpa, raw) per round) and the
// baseline's totals per op. It returns the baseline's total time.
func rounds(b *testing.B, mpa, raw func(n int) time.Duration, ratio func(m, r time.Duration) float64) time.Duration {
	k := max(1, b.N/benchRounds)
	var ratios []float64
	var rawTotal time.Duration
	for done := 0; done < b.N; done += k {
		n := min(k, b.N-done)
		if len(ratios)%2 == 1 {
			// Alternate which side goes first, so neither always runs
			// in the other's wake.
			b.StopTimer()
			r := raw(n)
			b.StartTimer()
			m := mpa(n)
			ratios = append(ratios, ratio(m, r))
			rawTotal += r
			continue
		}
		m := mpa(n)
		b.StopTimer()
		r := raw(n)
		b.StartTimer()
		ratios = append(ratios, ratio(m, r))
		rawTotal += r
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
	return rawTotal
}

// throughput is the ratio for rates: MPA's rate over the baseline's.
func throughput(m, r time.Duration) float64 { return r.Seconds() / m.Seconds() }

// latency is the ratio for round trips: MPA's over the baseline's.
func latency(m, r time.Duration) float64 { return m.Seconds() / r.Seconds() }

// waiter waits on completion queues with one context for the whole
// benchmark, so that the benchmark's own helper adds no allocation or
// timer per completion (waitC makes a context with a timeout per call).
type waiter struct {
	b   *testing.B
	ctx context.Context
}

func newWaiter(b *testing.B) waiter {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return waiter{b, ctx}
}

func (w waiter) wait(cq *rdmap.CompletionQueue) rdmap.Completion {
	c, err := cq.Wait(w.ctx)
	if err != nil {
		w.b.Fatalf("no completion: %v", err)
	}
	if c.Status != rdmap.StatusSuccess {
		w.b.Fatalf("completion: %+v", c)
	}
	return c
}

// rawStreamer is the throughput baseline: plain TCP on loopback, the
// sender writing each message with one write, the receiver reading each
// into one 64 KiB buffer with io.ReadFull, as the MPA receiver places each
// message into one registered 64 KiB buffer; with crc both sides compute
// CRC32c over every octet, as MPA does.
type rawStreamer struct {
	c, s *net.TCPConn
	msg  []byte
	crc  bool
	todo chan int
	done chan error
}

func newRawStreamer(b *testing.B, size int, crc bool) *rawStreamer {
	c, s := tcpPair(b)
	r := &rawStreamer{c: c, s: s, msg: make([]byte, size), crc: crc, todo: make(chan int), done: make(chan error)}
	go func() {
		buf := make([]byte, size)
		var sum uint32
		for n := range r.todo {
			var err error
			for i := 0; i < n && err == nil; i++ {
				_, err = io.ReadFull(s, buf)
				if crc {
					sum = crc32.Update(sum, castagnoli, buf)
				}
			}
			r.done <- err
		}
		_ = sum
	}()
	b.Cleanup(func() { close(r.todo) })
	return r
}

// run moves n messages and returns the time from the first write to the
// last octet read.
func (r *rawStreamer) run(b *testing.B, n int) time.Duration {
	r.todo <- n
	start := time.Now()
	var sum uint32
	for i := 0; i < n; i++ {
		if r.crc {
			sum = crc32.Update(sum, castagnoli, r.msg)
		}
		if _, err := r.c.Write(r.msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-r.done; err != nil {
		b.Fatal(err)
	}
	_ = sum
	return time.Since(start)
}

func crcName(crc bool) string {
	if crc {
		return "crc"
	}
	return "nocrc"
}

// BenchmarkWrite64K: RDMA Writes of 64 KiB, one in 16 signaled, against
// the raw stream.
func BenchmarkWrite64K(b *testing.B) {
	for _, crc := range []bool{true, false} {
		b.Run(crcName(crc), func(b *testing.B) {
			x, y := benchPair(b, crc, rdmap.QPConfig{SendDepth: 64, RecvDepth: 4})
			w := newWaiter(b)
			target := y.Reg(b, benchMsg, rdmap.RemoteWrite)
			rbuf := y.Reg(b, 8, rdmap.LocalWrite)
			src := x.Reg(b, benchMsg, 0)
			wr := rdmap.WriteWR{SGL: []rdmap.SGE{{MR: src, Length: benchMsg}}, RemoteSTag: target.STag()}
			send := rdmap.SendWR{ID: 99, Unsignaled: true}
			recv := rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 8}}}
			post := func(f func() error) {
				for err := f(); err != nil; err = f() {
					if !errors.Is(err, rdmap.ErrSendQueue) {
						b.Fatal(err)
					}
					w.wait(x.SCQ)
				}
			}
			postWrite := func() error { return x.QP.PostWrite(wr) }
			postSend := func() error { return x.QP.PostSend(send) }
			mpa := func(n int) time.Duration {
				if err := y.QP.PostRecv(recv); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for i := 0; i < n; i++ {
					wr.Unsignaled = i%16 != 15
					post(postWrite)
				}
				// A Send after the Writes: once it is delivered, every
				// Write has been placed (RFC 5040 §5.5 rule 10).
				post(postSend)
				w.wait(y.RCQ)
				d := time.Since(start)
				// Drain the Writes' completions, so the send queue
				// starts each round empty.
				var cs [64]rdmap.Completion
				for x.SCQ.Poll(cs[:]) > 0 {
				}
				return d
			}
			raw := newRawStreamer(b, benchMsg, crc)
			b.ReportAllocs()
			b.SetBytes(benchMsg)
			b.ResetTimer()
			rawT := rounds(b, mpa, func(n int) time.Duration { return raw.run(b, n) }, throughput)
			b.ReportMetric(float64(b.N)*benchMsg/rawT.Seconds()/1e6, "rawMB/s")
		})
	}
}

// BenchmarkRead64K: RDMA Reads of 64 KiB, 16 outstanding, one in 8
// signaled, against the raw stream from the Read's responder to its
// requester.
func BenchmarkRead64K(b *testing.B) {
	for _, crc := range []bool{true, false} {
		b.Run(crcName(crc), func(b *testing.B) {
			x, y := benchPair(b, crc, rdmap.QPConfig{SendDepth: 64, IRD: 16, ORD: 16})
			w := newWaiter(b)
			src := y.Reg(b, benchMsg, rdmap.RemoteRead)
			sink := x.Reg(b, benchMsg, rdmap.LocalWrite)
			wr := rdmap.ReadWR{Local: rdmap.SGE{MR: sink, Length: benchMsg}, RemoteSTag: src.STag()}
			mpa := func(n int) time.Duration {
				start := time.Now()
				out, signaled := 0, 0
				for i := 0; i < n; i++ {
					wr.Unsignaled = i%8 != 7 && i != n-1
					if out == 16 {
						// Reads complete in order: once the oldest
						// signaled one has, at most 8 are outstanding.
						w.wait(x.SCQ)
						signaled--
						out -= 8
					}
					if err := x.QP.PostRead(wr); err != nil {
						b.Fatal(err)
					}
					out++
					if !wr.Unsignaled {
						signaled++
					}
				}
				for ; signaled > 0; signaled-- {
					w.wait(x.SCQ)
				}
				return time.Since(start)
			}
			raw := newRawStreamer(b, benchMsg, crc)
			b.ReportAllocs()
			b.SetBytes(benchMsg)
			b.ResetTimer()
			rawT := rounds(b, mpa, func(n int) time.Duration { return raw.run(b, n) }, throughput)
			b.ReportMetric(float64(b.N)*benchMsg/rawT.Seconds()/1e6, "rawMB/s")
		})
	}
}

// BenchmarkSendPingPong64: a 64-octet Send and its echo, against a plain
// TCP ping-pong of 64 octets (write, then io.ReadFull of the echo).
func BenchmarkSendPingPong64(b *testing.B) {
	x, y := benchPair(b, true, rdmap.QPConfig{})
	if os.Getenv("SPIN") != "" {
		x.RCQ.SetSpin(30 * time.Microsecond)
		y.RCQ.SetSpin(30 * time.Microsecond)
	}
	w := newWaiter(b)
	xs, ys := x.Reg(b, 64, 0), y.Reg(b, 64, 0)
	xr, yr := x.Reg(b, 64, rdmap.LocalWrite), y.Reg(b, 64, rdmap.LocalWrite)
	xrecv := rdmap.RecvWR{SGL: []rdmap.SGE{{MR: xr, Length: 64}}}
	yrecv := rdmap.RecvWR{SGL: []rdmap.SGE{{MR: yr, Length: 64}}}
	xsend := rdmap.SendWR{SGL: []rdmap.SGE{{MR: xs, Length: 64}}, Unsignaled: true}
	ysend := rdmap.SendWR{SGL: []rdmap.SGE{{MR: ys, Length: 64}}, Unsignaled: true}
	for i := 0; i < 8; i++ {
		if err := x.QP.PostRecv(xrecv); err != nil {
			b.Fatal(err)
		}
		if err := y.QP.PostRecv(yrecv); err != nil {
			b.Fatal(err)
		}
	}
	go func() {
		// The responder echoes every Send.
		for {
			c, err := y.RCQ.Wait(w.ctx)
			if err != nil || c.Status != rdmap.StatusSuccess {
				return
			}
			y.QP.PostRecv(yrecv)
			y.QP.PostSend(ysend)
		}
	}()
	mpa := func(n int) time.Duration {
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := x.QP.PostSend(xsend); err != nil {
				b.Fatal(err)
			}
			w.wait(x.RCQ)
			if err := x.QP.PostRecv(xrecv); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
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
	raw := func(n int) time.Duration {
		start := time.Now()
		for i := 0; i < n; i++ {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	b.ReportAllocs()
	b.ResetTimer()
	rawT := rounds(b, mpa, raw, latency)
	b.ReportMetric(float64(rawT.Nanoseconds())/1e3/float64(b.N), "raw-µs/rtt")
}
