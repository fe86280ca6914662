//go:build !js

package sctpddp

import (
	"errors"
	"testing"
	"time"
)

// Addresses that open associations up to MaxAssociations and start no
// session on them (heartbeats keep them alive) do not keep a new peer
// out: it takes the place of the oldest idle association of the peer
// holding the most. An association that carries a session is never
// evicted: when every one of the greediest peer's does, the new peer is
// refused.
func TestIdleAssociationsDoNotLockOut(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.MaxAssociationsPerPeer, srv.MaxAssociations, srv.Refused = 2, 4, heard.hear
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	ctx := testCtx(t)
	addr := l.Addr().String()
	dial := func(ip string) (*Association, *Association) {
		t.Helper()
		c, err := dialFrom(ctx, t, addr, cli, ip)
		if err != nil {
			t.Fatalf("%s: %v", ip, err)
		}
		return c, next(t, accepted)
	}
	// 127.0.0.2 holds two associations without a session, the older of
	// which the Listener's application uses a stream of itself (not idle,
	// then); 127.0.0.3 two that carry a session each. The Listener is
	// full.
	raw, rawSrv := dial("127.0.0.2")
	if _, err := rawSrv.OpenStream(2); err != nil {
		t.Fatal(err)
	}
	idle, _ := dial("127.0.0.2")
	var busy []*Association
	for i := range 2 {
		c, s := dial("127.0.0.3")
		sessionPair(t, s, c, s.Sessions(0), uint16(1+2*i), newPeer(t, nil), newPeer(t, nil))
		busy = append(busy, c)
	}
	start := time.Now()
	good, goodSrv := dial("127.0.0.4")
	t.Logf("a new peer got in after %v", time.Since(start).Round(time.Millisecond))
	exchange(t, goodSrv, good, 11)
	if !waitFor(5*time.Second, func() bool { return idle.Err() != nil }) {
		t.Fatal("the idle association of the peer holding the most stays")
	}
	if raw.Err() != nil || busy[0].Err() != nil || busy[1].Err() != nil {
		t.Fatalf("more was evicted: %v, %v, %v", raw.Err(), busy[0].Err(), busy[1].Err())
	}
	if heard.count(ErrAssociationEvicted) != 1 || !errors.Is(ErrAssociationEvicted, ErrTooManyAssociations) {
		t.Fatalf("Refused heard %v", heard.why)
	}
	// Now 127.0.0.3 holds the most (2), each with a session: a fifth
	// address is refused, and nothing is evicted.
	if _, err := dialFrom(ctx, t, addr, cli, "127.0.0.5"); err == nil {
		t.Fatal("an association beyond MaxAssociations, in place of one that carries a session")
	}
	if busy[0].Err() != nil || busy[1].Err() != nil || raw.Err() != nil || good.Err() != nil {
		t.Fatal("an association was closed for a peer that was refused")
	}
}
