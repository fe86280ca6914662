package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/bench/impair"
	"github.com/iwarpgo/iwarp/bench/llp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// impairedPair connects sctp:// through an impairment proxy in this
// process, at MTU 8000 (sctpddp.LoopbackMTU): at 5 % loss a
// loss-based congestion controller moves about PMTU / RTT × 1.22 / √p,
// so the packet size sets what a lossy path carries.
func impairedPair(t *testing.T, cfg impair.Config) (*llp.Pair, *impair.Proxy) {
	t.Helper()
	return impairedPairOf(t, llp.IwarpSCTP(8000), cfg)
}

// impairedPairOf connects tr through an impairment proxy in this process.
func impairedPairOf(t *testing.T, tr llp.Transport, cfg impair.Config) (*llp.Pair, *impair.Proxy) {
	t.Helper()
	sec, err := llp.NewSecurity()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	l, err := tr.Listen(ctx, "127.0.0.1:0", sec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	px, err := impair.Listen("127.0.0.1:0", l.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	p, err := llp.Connect(ctx, tr, l, px.Addr().String(), sec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, px
}

// moveFor moves msgs 64 KiB messages, every byte checked, within limit.
func moveFor(t *testing.T, p *llp.Pair, msgs int, limit time.Duration) llp.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	r, err := p.Move(ctx, msgs)
	if err != nil {
		t.Fatalf("%d messages: %v (verified %d of %d bytes)", msgs, err, r.Verified, r.Sent)
	}
	if r.Verified != r.Sent {
		t.Fatalf("verified %d of %d bytes", r.Verified, r.Sent)
	}
	return r
}

func rate(r llp.Result) float64 { return float64(r.Verified) / r.Elapsed.Seconds() / 1e6 }

// Through a path that loses 5 % each way, with 1 ms ± 1 ms of jitter and
// 1 % duplication, sctp:// moves at least what quic-go moves through the
// same proxy, alternating with it. Both are loss-bound there, so the
// comparison holds however fast the machine is; the clean rate, bound
// by the CPU, is no yardstick.
func TestSCTPFivePercentLoss(t *testing.T) {
	link := impair.Link{Delay: time.Millisecond, Jitter: time.Millisecond, Loss: 0.05, Duplicate: 0.01}
	lossy, px := impairedPair(t, impair.Config{Up: link, Down: link, Seed: 1})
	quic, _ := impairedPairOf(t, llp.QUIC(), impair.Config{Up: link, Down: link, Seed: 1})
	const msgs = 64 // 4 MiB
	var quicMBs, lossyMBs []float64
	for range 3 {
		quicMBs = append(quicMBs, rate(moveFor(t, quic, msgs, 30*time.Second)))
		lossyMBs = append(lossyMBs, rate(moveFor(t, lossy, msgs, 30*time.Second)))
	}
	q, l := median(quicMBs), median(lossyMBs)
	up, down := px.Stats()
	t.Logf("5 %% loss: sctp:// %.1f MB/s, quic-go %.1f MB/s (%.2f×); lost %d up, %d down", l, q, l/q, up.Lost, down.Lost)
	if up.Lost == 0 || down.Lost == 0 {
		t.Fatal("the proxy lost nothing")
	}
	if l < q {
		t.Fatalf("5 %% loss: sctp:// moves %.2f× quic-go's rate, want at least as much", l/q)
	}
}

// At 20 % loss each way, 4 MiB arrive in under 10 s.
func TestSCTPTwentyPercentLoss(t *testing.T) {
	link := impair.Link{Loss: 0.2}
	const after = time.Second
	p, _ := impairedPair(t, impair.Config{Up: link, Down: link, Seed: 2, ImpairAfter: after})
	// The handshakes ran on an unimpaired path.
	time.Sleep(after)
	start := time.Now()
	r := moveFor(t, p, 64, 10*time.Second)
	t.Logf("4 MiB at 20 %% loss in %v (%.1f MB/s)", time.Since(start).Round(time.Millisecond), rate(r))
}

// After a 5 s outage both ways, data flows again within 2 s.
func TestSCTPOutage(t *testing.T) {
	const at, outage = 200 * time.Millisecond, 5 * time.Second
	p, _ := impairedPair(t, impair.Config{OutageAt: at, OutageFor: outage})
	// The flow's first datagram came during the handshake: the outage
	// ends at most at + outage from now.
	end := time.Now().Add(at + outage)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			moveFor(t, p, 32, 30*time.Second)
		}
	}()
	var before int64
	var resumed time.Time
	// The count of octets moved, every 5 ms: the last before the end of
	// the outage, and the first time it grows after.
	waitfor.Every(time.Until(end)+10*time.Second, 5*time.Millisecond, func() bool {
		if now := time.Now(); now.Before(end) {
			before = p.C.Bytes()
		} else if p.C.Bytes() > before {
			resumed = now
		}
		return !resumed.IsZero()
	})
	stop.Store(true)
	<-done
	if resumed.IsZero() {
		t.Fatal("no data 10 s after the outage")
	}
	after := resumed.Sub(end)
	t.Logf("data again %v after the outage", after.Round(time.Millisecond))
	if after > 2*time.Second {
		t.Fatalf("data flowed again %v after the outage, want within 2 s", after)
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
