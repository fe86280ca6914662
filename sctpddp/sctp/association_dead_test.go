//go:build !js

package sctp

import (
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/leaktest"
)

// TestAssocDeadPeer has the server vanish without a word: the client's
// HEARTBEATs go unanswered and it reports ErrDeadPeer within
// DeadPeerTimeout.
func TestAssocDeadPeer(t *testing.T) {
	leaktest.Check(t)
	c, s := udpPair(t)
	cfg := Config{HeartbeatInterval: 50 * time.Millisecond, DeadPeerTimeout: 500 * time.Millisecond}
	a, b := assocPair(t, c, s, cfg, Config{})
	s.Close() // the server's transport is gone; it sends nothing more
	<-b.Done()
	start := time.Now()
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the vanished peer is not reported dead")
	}
	if err := a.Err(); !errors.Is(err, ErrDeadPeer) {
		t.Errorf("Err = %v, want ErrDeadPeer", err)
	}
	t.Logf("reported dead after %v", time.Since(start))
	a.Close()
}
