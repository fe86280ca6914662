//go:build !js

package mpa

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
)

// dialFromOrSkip connects to addr from the local IP address from, and
// skips the test where that address cannot be bound (127.0.0.x other
// than 127.0.0.1 is local on Linux, not everywhere).
func dialFromOrSkip(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot dial from %s: %v", from, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Peers holding silent TCP connections (no MPA Request) at their
// MaxPerPeer, from more addresses than it takes to fill MaxStartups and
// opening another as soon as one is closed, do not keep another peer from
// starting up: every genuine initiator from other addresses is through
// well within the handshake timeout, while the silent ones would hold
// their places for all of it.
func TestListenerSilentPeersDoNotLockOut(t *testing.T) {
	noLeaks(t)
	const (
		maxStartups = 8
		perPeer     = 4
		attackers   = 4 // 16 silent connections: MaxStartups twice
		genuine     = 4
		hs          = 2 * time.Second
		within      = time.Second
	)
	var refused atomic.Int32
	cfg := Config{MaxStartups: maxStartups, MaxPerPeer: perPeer, HandshakeTimeout: hs,
		Refused: func(net.Addr, error) { refused.Add(1) }}
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, l)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for i := range attackers {
		from := fmt.Sprintf("127.0.0.%d", 2+i)
		dialFromOrSkip(t, from, l.Addr().String()).Close()
		for range perPeer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				silent(stop, from, l.Addr().String())
			}()
		}
	}
	// The Listener takes them in: every attacker holds its places.
	waitfor.True(t, 5*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i := range attackers {
			if l.peers[netip.MustParseAddr(fmt.Sprintf("127.0.0.%d", 2+i))] < perPeer {
				return false
			}
		}
		return true
	}, "the Listener did not take in the %d silent connections", attackers*perPeer)
	type result struct {
		from string
		err  error
		took time.Duration
	}
	out := make(chan result, genuine)
	for i := range genuine {
		from := fmt.Sprintf("127.0.0.%d", 20+i)
		nc := dialFromOrSkip(t, from, l.Addr().String())
		p := newPeer(t, rdmap.QPConfig{})
		go func() {
			start := time.Now()
			c, err := Client(tctx(t), nc, p.QP, &Config{HandshakeTimeout: 5 * time.Second})
			took := time.Since(start)
			if err == nil {
				c.Close()
			}
			out <- result{from, err, took}
		}()
	}
	var late int
	for range genuine {
		r := <-out
		t.Logf("%s: %v after %v", r.from, r.err, r.took.Round(time.Millisecond))
		if r.err != nil || r.took > within {
			late++
		}
	}
	if late > 0 {
		t.Fatalf("%d of %d genuine initiators were not through within %v beside %d silent peers (handshake timeout %v)",
			late, genuine, within, attackers, hs)
	}
	t.Logf("%d refusals reported", refused.Load())
}

// silent holds a TCP connection from the local address from to addr that
// sends nothing, and opens another whenever the other end closes it, until
// stop is closed.
func silent(stop <-chan struct{}, from, addr string) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		closed := make(chan struct{})
		go func() {
			c.Read(make([]byte, 1))
			close(closed)
		}()
		select {
		case <-stop:
			c.Close()
			<-closed
			return
		case <-closed:
			c.Close()
			time.Sleep(10 * time.Millisecond) // as an attacker would not: spares the test's CPU
		}
	}
}

// At the running cap, a newcomer from a peer with no startup takes the
// place of the oldest startup of a peer that runs two more: that
// connection is closed and reported (ErrStartupEvicted), the newer one
// keeps its place.
func TestListenerEvictsGreediestOldest(t *testing.T) {
	noLeaks(t)
	var evicted atomic.Int32
	cfg := Config{MaxStartups: 2, MaxPerPeer: 10, HandshakeTimeout: 5 * time.Second,
		Refused: func(_ net.Addr, why error) {
			if errors.Is(why, ErrStartupEvicted) {
				evicted.Add(1)
			}
		}}
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	older := dialFromOrSkip(t, "127.0.0.1", l.Addr().String())
	waitStartups(t, l, 1, 0)
	newer := dialFromOrSkip(t, "127.0.0.1", l.Addr().String())
	waitStartups(t, l, 2, 0)
	dialFromOrSkip(t, "127.0.0.2", l.Addr().String())
	older.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := older.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the greediest peer's oldest startup was not closed: %v", err)
	}
	newer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := newer.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("the greediest peer's newer startup was closed: %v", err)
	}
	if n := evicted.Load(); n != 1 {
		t.Fatalf("%d evictions reported, want 1", n)
	}
}

// waitStartups waits until l has running and parked startups.
func waitStartups(t *testing.T, l *Listener, running, parked int) {
	t.Helper()
	var r, p int
	if !eventually(func() bool {
		l.mu.Lock()
		r, p = len(l.startups.running), len(l.startups.parked)
		l.mu.Unlock()
		return r == running && p == parked
	}) {
		t.Fatalf("%d startups running and %d parked, want %d and %d", r, p, running, parked)
	}
}

// Connections parked for want of a place to run are closed when their
// handshake time runs out, counted from their TCP connection, and
// reported (ErrStartupTimeout), giving back their places in MaxPerPeer;
// Close closes those still parked, reports nothing, and leaves no
// goroutine behind.
func TestListenerParkedStartups(t *testing.T) {
	noLeaks(t)
	listen := func(hs time.Duration, timedOut *atomic.Int32) *Listener {
		cfg := Config{MaxStartups: 2, MaxPerPeer: 10, HandshakeTimeout: hs,
			Refused: func(_ net.Addr, why error) {
				if errors.Is(why, ErrStartupTimeout) {
					timedOut.Add(1)
				}
			}}
		l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Both places to run are held for the whole test by stand-ins
		// without a goroutine, one each of two other peers: startups that
		// keep their places past the parked ones' time, as newer ones that
		// took the places of others do.
		l.mu.Lock()
		for _, p := range []string{"192.0.2.1", "192.0.2.2"} {
			l.startups.add(&startup{peer: netip.MustParseAddr(p)})
		}
		l.mu.Unlock()
		return l
	}
	closedWithin := func(c net.Conn, d time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		c.SetReadDeadline(start.Add(d))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("a parked connection was not closed within %v: %v", d, err)
		}
		return time.Since(start)
	}

	const hs = 500 * time.Millisecond
	var timedOut atomic.Int32
	l := listen(hs, &timedOut)
	defer l.Close()
	start := time.Now()
	a := dialFromOrSkip(t, "127.0.0.1", l.Addr().String())
	b := dialFromOrSkip(t, "127.0.0.1", l.Addr().String())
	waitStartups(t, l, 2, 2)
	closedWithin(a, 5*time.Second)
	closedWithin(b, time.Second)
	if took := time.Since(start); took < hs-50*time.Millisecond {
		t.Fatalf("parked connections closed after %v, before their handshake time (%v)", took, hs)
	}
	if n := timedOut.Load(); n != 2 {
		t.Fatalf("%d parked connections reported timed out, want 2", n)
	}
	waitStartups(t, l, 2, 0)
	l.mu.Lock()
	held := l.peers[netip.MustParseAddr("127.0.0.1")]
	l.mu.Unlock()
	if held != 0 {
		t.Fatalf("the peer still holds %d places in MaxPerPeer", held)
	}

	var closeReports atomic.Int32
	l2 := listen(10*time.Second, &closeReports)
	c := dialFromOrSkip(t, "127.0.0.1", l2.Addr().String())
	d := dialFromOrSkip(t, "127.0.0.1", l2.Addr().String())
	waitStartups(t, l2, 2, 2)
	l2.Close()
	closedWithin(c, time.Second)
	closedWithin(d, time.Second)
	if n := closeReports.Load(); n != 0 {
		t.Fatalf("Close reported %d parked connections", n)
	}
}
