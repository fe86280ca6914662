// Package bench holds the Go benchmarks of the transports that iwarp's
// sctp:// is measured against, both ends in one process (cmd/llpbench
// measures them between two processes):
//
//	cd bench && go test -run XXX -bench . -benchtime 2s
package bench

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/bench/llp"
)

// round is how many messages each side of a comparison moves before the
// other's turn: 4 MiB.
const round = 64

func cpu() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func security(b *testing.B) *llp.Security {
	sec, err := llp.NewSecurity()
	if err != nil {
		b.Fatal(err)
	}
	return sec
}

// pair connects t in this process, closed at the end.
func pair(b *testing.B, t llp.Transport, sec *llp.Security) *llp.Pair {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	l, err := t.Listen(ctx, "127.0.0.1:0", sec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	p, err := llp.Connect(ctx, t, l, l.Addr().String(), sec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := p.Close(); err != nil {
			b.Error(err)
		}
	})
	if _, err := p.Move(ctx, 4); err != nil { // warm up: handshake state, windows
		b.Fatal(err)
	}
	return p
}

func move(b *testing.B, p *llp.Pair, n int) llp.Result {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := p.Move(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkTransfer moves b.N messages of 64 KiB over each transport,
// both ends in this process, every byte checked. MB/s counts the bytes
// sent; for dtls, which does not retransmit, verified-% is the part the
// receiver got. cpu-s/GB is the process's CPU time (both ends) per GB.
// The transports llpbench runs only when named (llp.Extra) are here too,
// so that each can be profiled alone:
//
//	go test -run XXX -bench 'Transfer/iwarp-sctp-8000-cert$' -benchtime 4s -cpuprofile cpu.prof
func BenchmarkTransfer(b *testing.B) {
	sec := security(b)
	for _, t := range append(llp.All(), llp.Extra()...) {
		b.Run(t.Name, func(b *testing.B) {
			p := pair(b, t, sec)
			b.SetBytes(llp.MessageSize)
			b.ReportAllocs()
			c0 := cpu()
			b.ResetTimer()
			r := move(b, p, b.N)
			b.StopTimer()
			if r.Verified > 0 {
				b.ReportMetric((cpu()-c0).Seconds()/(float64(r.Verified)/1e9), "cpu-s/GB")
			}
			if t.Lossy {
				b.ReportMetric(100*float64(r.Verified)/float64(r.Sent), "verified-%")
			} else if r.Verified != r.Sent {
				b.Fatalf("verified %d of %d bytes", r.Verified, r.Sent)
			}
		})
	}
}

// BenchmarkVsQUIC alternates each reliable transport with quic-go, 4 MiB
// at a time, and reports each one's rate and the ratio (the
// transport's MB/s over quic-go's, the median of the rounds' ratios), so
// that the machine's drift does not favour either. MB/s counts both
// sides' bytes.
func BenchmarkVsQUIC(b *testing.B) {
	sec := security(b)
	for _, t := range llp.All() {
		if t.Lossy || t.Name == "quic" {
			continue
		}
		b.Run(t.Name, func(b *testing.B) {
			p := pair(b, t, sec)
			q := pair(b, llp.QUIC(), sec)
			b.SetBytes(2 * llp.MessageSize)
			b.ReportAllocs()
			var tt, tq time.Duration
			var ratios []float64
			b.ResetTimer()
			for done, i := 0, 0; done < b.N; i++ {
				k := min(round, b.N-done)
				var rt, rq llp.Result
				if i%2 == 0 {
					rt, rq = move(b, p, k), move(b, q, k)
				} else {
					rq, rt = move(b, q, k), move(b, p, k)
				}
				tt += rt.Elapsed
				tq += rq.Elapsed
				if rt.Elapsed > 0 && rq.Elapsed > 0 {
					ratios = append(ratios, rq.Elapsed.Seconds()/rt.Elapsed.Seconds())
				}
				done += k
			}
			b.StopTimer()
			bytes := float64(b.N) * llp.MessageSize
			b.ReportMetric(bytes/1e6/tt.Seconds(), t.Name+"-MB/s")
			b.ReportMetric(bytes/1e6/tq.Seconds(), "quic-MB/s")
			if len(ratios) > 0 {
				slices.Sort(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "ratio")
			}
		})
	}
}
