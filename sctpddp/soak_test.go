//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// TestSoak runs every attack the limit tests run, at once and for
// SCTPDDP_SOAK (a duration, e.g. 60s; the test is skipped without it),
// against one Listener with the default limits, while well-behaved
// clients connect over and over; it samples memory and goroutines as it
// goes and fails if a well-behaved client is refused too often, or if
// what the attacks cost has not come back at the end. The flood rate is
// SCTPDDP_FLOOD_RATE datagrams a second of each kind (10000). Run it with
// scripts/soak-sctp.sh.
//
// The attackers:
//   - a flood of junk and of real ClientHellos from 512 spoofed source
//     addresses on 127.0.0.2-17;
//   - a peer on 127.0.0.18 that dials as many associations as it is
//     allowed, opens as many sessions as it is allowed on each, and
//     keeps them;
//   - a peer on 127.0.0.19 that dials through a relay and vanishes
//     without a goodbye, once a second (dead peers; DeadPeerTimeout is
//     3 s here).
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SCTPDDP_SOAK"))
	if err != nil {
		t.Skip("set SCTPDDP_SOAK to a duration to run the soak (scripts/soak-sctp.sh)")
	}
	rate := 10000
	if r, err := strconv.Atoi(os.Getenv("SCTPDDP_FLOOD_RATE")); err == nil {
		rate = r
	}
	srv, cli := pinnedConfigs(t)
	srv.DeadPeerTimeout, cli.DeadPeerTimeout = 3*time.Second, 3*time.Second
	var refused sync.Map // why -> *atomic.Int64
	srv.Refused = func(_ net.Addr, why error) {
		for _, e := range []error{ErrTooManyAssociations, ErrTooManySessions, ErrTooManyPendingSessions, ErrAcceptTimeout, ErrTooManyStreams} {
			if errors.Is(why, e) {
				n, _ := refused.LoadOrStore(e.Error(), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}
	}
	l := listenT(t, srv)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	// The server accepts every association and every session, as
	// `iwarp serve` does, and closes the queue pairs of an association
	// when it ends.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-stop; cancel() }()
		for {
			a, err := l.Accept(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var qps []*rdmap.QueuePair
				defer func() {
					_ = a.Close()
					for _, qp := range qps {
						closeQP(qp)
					}
				}()
				sa := a.Sessions(0)
				for {
					r, err := sa.Accept(ctx)
					if err != nil {
						return
					}
					qp := newQP(dev)
					qps = append(qps, qp)
					_, _ = r.Accept(qp, SessionConfig{})
				}
			}()
		}
	}()

	before := measure()
	to := l.Addr().(*net.UDPAddr)
	hello := clientHello(t, cli)
	junks := make([][]byte, 256)
	for i := range junks {
		junks[i] = junk(100 + 5*i)
	}
	f := newFlooder(t, 2, 16, 32)
	f.run(to, rate, func(i int) []byte { return junks[i%len(junks)] })
	f.run(to, rate, func(int) []byte { return hello })

	dialCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	}
	// initiate starts a DDP Stream Session on stream id of a, as far as
	// the server is concerned: the server accepts it and holds a queue
	// pair for it, while this side holds nothing but the SCTP stream.
	initiate := func(a *Association, id uint16) error {
		ctx, cancel := dialCtx()
		defer cancel()
		st, err := a.OpenStream(id)
		if err != nil {
			return err
		}
		if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}); err != nil {
			return err
		}
		buf := make([]byte, 1024)
		n, _, err := st.ReadMessage(ctx, buf)
		if err != nil {
			return err
		}
		m, _, err := wire.ParseSessionControl(buf[:n])
		if err != nil {
			return err
		}
		if m.Function != wire.FunctionEnhancedAccept {
			return ErrSessionTerminated
		}
		return nil
	}
	var hostileAssocs, hostileSessions, vanished atomic.Int64
	var endedMu sync.Mutex
	ended := map[string]int{} // why the greedy peer's associations ended
	var leftMu sync.Mutex
	var left []*Association // the vanished peers, closed at the end
	var holes []*blackHole
	// The greedy peer.
	wg.Add(1)
	go func() {
		defer wg.Done()
		var held []*Association
		defer func() {
			for _, a := range held {
				_ = a.Close()
			}
		}()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ctx, cancel := dialCtx()
			c := *cli
			c.localAddr = "127.0.0.18:0"
			a, err := Dial(ctx, "udp", to.String(), &c)
			cancel()
			if err != nil {
				continue
			}
			held = append(held, a)
			hostileAssocs.Add(1)
			go func() {
				<-a.Done()
				select {
				case <-stop:
				default:
					endedMu.Lock()
					ended[a.Err().Error()]++
					endedMu.Unlock()
				}
			}()
			for id := uint16(1); id < 40; id++ {
				if initiate(a, id) != nil {
					break
				}
				hostileSessions.Add(1)
			}
		}
	}()
	// The vanishing peer.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			hole := newBlackHole(t, l.Addr())
			ctx, cancel := dialCtx()
			c := *cli
			c.DeadPeerTimeout = -1 // it never notices; the server must
			a, err := Dial(ctx, "udp", hole.pc.LocalAddr().String(), &c)
			cancel()
			if err != nil {
				continue
			}
			_ = initiate(a, 1)
			hole.cut.Store(true)
			vanished.Add(1)
			leftMu.Lock()
			left = append(left, a)
			holes = append(holes, hole)
			leftMu.Unlock()
		}
	}()

	// Well-behaved clients, one after the other, and the samples.
	var ok, failed int
	var worst time.Duration
	start := time.Now()
	nextSample := start
	for time.Since(start) < d {
		if time.Now().After(nextSample) {
			hs, conns := l.mux.counts()
			u := measure()
			l.peers.mu.Lock()
			assocs := l.peers.total
			l.peers.mu.Unlock()
			t.Logf("%5.0fs: %v; %d handshakes, %d conns, %d associations held; good %d/%d; hostile %d associations, %d sessions; %d vanished",
				time.Since(start).Seconds(), u, hs, conns, assocs, ok, ok+failed, hostileAssocs.Load(), hostileSessions.Load(), vanished.Load())
			nextSample = nextSample.Add(5 * time.Second)
		}
		t0 := time.Now()
		ctx, cancel := dialCtx()
		c := *cli
		c.localAddr = "127.0.0.1:0"
		a, err := Dial(ctx, "udp", to.String(), &c)
		if err == nil {
			qp := newQP(dev)
			var s *Session
			s, err = Connect(ctx, a, 1, qp, SessionConfig{})
			if err == nil {
				_ = s.Close()
			}
			closeQP(qp)
			_ = a.Shutdown(ctx)
		}
		cancel()
		if err != nil {
			failed++
			t.Logf("well-behaved client failed: %v", err)
		} else {
			ok++
			worst = max(worst, time.Since(t0))
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	f.close()
	m := l.mux
	t.Logf("flood: %d datagrams; %d ClientHellos admitted, %d evicted, %d dropped at the caps, %d other datagrams dropped",
		f.sent.Load(), m.created.Load(), m.evictions.Load(), m.dropped.Load(), m.notHello.Load())
	refused.Range(func(k, v any) bool {
		t.Logf("refused: %d × %s", v.(*atomic.Int64).Load(), k)
		return true
	})
	t.Logf("well-behaved: %d connected, %d failed, slowest %v; hostile: %d associations, %d sessions; %d vanished",
		ok, failed, worst.Round(time.Millisecond), hostileAssocs.Load(), hostileSessions.Load(), vanished.Load())
	if failed*20 > ok {
		t.Errorf("%d of %d well-behaved connections failed", failed, ok+failed)
	}
	// Dead peers are reaped: the server holds the greedy peer's
	// associations, and those that vanished within the dead-peer timeout.
	l.peers.mu.Lock()
	held := l.peers.total
	l.peers.mu.Unlock()
	if limit := DefaultMaxAssociationsPerPeer + int(srv.DeadPeerTimeout/time.Second) + 3; held > limit && d > 10*time.Second {
		t.Errorf("%d associations held at the end, more than %d: dead peers not reaped", held, limit)
	}
	wg.Wait()
	endedMu.Lock()
	for why, n := range ended {
		t.Logf("the greedy peer's associations ended %d × %s", n, why)
	}
	endedMu.Unlock()
	for _, a := range left {
		_ = a.Close()
	}
	for _, h := range holes {
		_ = h.pc.Close()
		<-h.done
	}
	if !waitFor(5*time.Second, func() bool {
		l.peers.mu.Lock()
		defer l.peers.mu.Unlock()
		return l.peers.total == 0
	}) {
		t.Errorf("%d associations still held after the attackers left", l.peers.total)
	}
	// The flood's last handshakes expire.
	if !waitFor(DefaultHandshakeTimeout+5*time.Second, func() bool { hs, _ := l.mux.counts(); return hs == 0 }) {
		hs, _ := l.mux.counts()
		t.Errorf("%d handshakes still counted after the flood", hs)
	}
	after := settle(t, before.goroutines)
	t.Logf("before: %v; after: %v", before, after)
	if after.goroutines > before.goroutines+10 {
		buf := make([]byte, 4<<20)
		t.Errorf("goroutines: %d before, %d after:\n%s", before.goroutines, after.goroutines, buf[:runtime.Stack(buf, true)])
	}
	if after.heap > before.heap+32<<20 {
		t.Errorf("heap in use: %v before, %v after", before, after)
	}
}
