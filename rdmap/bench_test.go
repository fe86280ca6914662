package rdmap

import (
	"context"
	"strconv"
	"testing"

	"github.com/iwarpgo/iwarp/ddp/ddptest"
)

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1024:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

var benchSizes = []int{64, 4 << 10, 64 << 10, 1 << 20}

// bwait is wait for benchmarks: one context for the whole run, so that
// waiting allocates nothing and the figures are the library's.
func bwait(b *testing.B, cq *CompletionQueue) Completion {
	b.Helper()
	c, err := cq.Wait(benchCtx)
	if err != nil {
		b.Fatalf("no completion: %v", err)
	}
	return c
}

var benchCtx = context.Background()

// The data path allocates nothing per segment: a 1 MiB RDMA Write cut
// into ~730 segments costs the same few allocations (the work request's
// own) as a 64-octet one.
func TestDataPathAllocsPerSegment(t *testing.T) {
	a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 1452}, cfg: QPConfig{SendDepth: 4}})
	target := b.reg(t, 1<<20, RemoteWrite)
	src := a.reg(t, 1<<20, 0)
	measure := func(n int) float64 {
		return testing.AllocsPerRun(20, func() {
			if err := a.qp.PostWrite(WriteWR{SGL: []SGE{{MR: src, Length: uint32(n)}}, RemoteSTag: target.STag()}); err != nil {
				t.Fatal(err)
			}
			wait(t, a.scq)
		})
	}
	small, big := measure(64), measure(1<<20)
	t.Logf("allocations per RDMA Write: 64 B %.1f, 1 MiB %.1f", small, big)
	if big > small+1 {
		t.Fatalf("a 1 MiB write (~730 segments) allocates %.1f times, a 64 B one %.1f: the data path allocates per segment", big, small)
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			x, y := newPair(b, pairOpts{pipe: ddptest.Options{MULPDU: 65535, Depth: 64}, cfg: QPConfig{SendDepth: 64}})
			target := y.reg(b, size, RemoteWrite)
			src := x.reg(b, size, 0)
			wr := WriteWR{SGL: []SGE{{MR: src, Length: uint32(size)}}, RemoteSTag: target.STag(), Unsignaled: true}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				i++
				wr.Unsignaled = i%32 != 0
				for x.qp.PostWrite(wr) != nil {
					bwait(b, x.scq)
				}
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			x, y := newPair(b, pairOpts{pipe: ddptest.Options{MULPDU: 65535, Depth: 64}, cfg: QPConfig{SendDepth: 64, IRD: 16, ORD: 16}})
			src := y.reg(b, size, RemoteRead)
			sink := x.reg(b, size, LocalWrite)
			wr := ReadWR{Local: SGE{MR: sink, Length: uint32(size)}, RemoteSTag: src.STag()}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			out := 0
			for b.Loop() {
				if out == 16 {
					bwait(b, x.scq)
					out--
				}
				if err := x.qp.PostRead(wr); err != nil {
					b.Fatal(err)
				}
				out++
			}
			for ; out > 0; out-- {
				bwait(b, x.scq)
			}
		})
	}
}

func BenchmarkSend(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			x, y := newPair(b, pairOpts{pipe: ddptest.Options{MULPDU: 65535, Depth: 64}, cfg: QPConfig{SendDepth: 64, RecvDepth: 64}})
			rbuf := y.reg(b, size, LocalWrite)
			src := x.reg(b, size, 0)
			for i := 0; i < 64; i++ {
				y.qp.PostRecv(RecvWR{SGL: []SGE{{MR: rbuf, Length: uint32(size)}}})
			}
			wr := SendWR{SGL: []SGE{{MR: src, Length: uint32(size)}}, Unsignaled: true}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			out := 0
			var cs [64]Completion
			for b.Loop() {
				for out >= 48 {
					c := bwait(b, y.rcq)
					_ = c
					out--
					y.qp.PostRecv(RecvWR{SGL: []SGE{{MR: rbuf, Length: uint32(size)}}})
					for k := y.rcq.Poll(cs[:]); k > 0; k-- {
						out--
						y.qp.PostRecv(RecvWR{SGL: []SGE{{MR: rbuf, Length: uint32(size)}}})
					}
				}
				for x.qp.PostSend(wr) != nil {
					x.scq.Poll(cs[:])
				}
				out++
			}
			for ; out > 0; out-- {
				bwait(b, y.rcq)
			}
		})
	}
}
