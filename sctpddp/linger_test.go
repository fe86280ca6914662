//go:build !js

package sctpddp

import (
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// waitEnd waits up to d for a to end and returns how long it took.
func waitEnd(t *testing.T, a *Association, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-a.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("the association is still open %v later", d)
		return 0
	}
}

// stillOpen fails if a ends within d.
func stillOpen(t *testing.T, a *Association, d time.Duration, when string) {
	t.Helper()
	select {
	case <-a.Done():
		t.Fatalf("%s: the association ended: %v", when, a.Err())
	case <-time.After(d):
	}
}

// "For a specific LLP connection, when all Streams are either gracefully
// torn down or are labeled as erroneous Streams, the LLP connection MUST
// be torn down." (RFC 5040 §7) The association stays open while one of
// its sessions lives; LingerTimeout after the last has ended, this end
// shuts it down (SCTP SHUTDOWN: the peer hears it end), not sooner.
func TestLingerTearsDownAssociation(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	const linger = 300 * time.Millisecond
	srv.LingerTimeout, cli.LingerTimeout = linger, -1
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	a1, b1 := newPeer(t, nil), newPeer(t, nil)
	a3, b3 := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, sa, 1, a1, b1)
	sessionPair(t, server, client, sa, 3, a3, b3)

	// One session ends at both ends: the other keeps the association.
	closeQP(a1.QP)
	closeQP(b1.QP)
	stillOpen(t, server, 3*linger, "one session of two ended")

	// The last one ends by an error (the peer's queue pair is closed
	// under it: the session is labeled erroneous) and then its ULP
	// closes it.
	ended := time.Now()
	closeQP(a3.QP)
	if !waitFor(5*time.Second, func() bool { return b3.QP.State() != rdmap.StateRunning }) {
		t.Fatal("the server's session did not see its peer go")
	}
	closeQP(b3.QP)
	waitEnd(t, server, 5*time.Second)
	if d := time.Since(ended); d < linger {
		t.Fatalf("the association ended %v after its last session, before LingerTimeout %v", d, linger)
	}
	if err := server.Err(); !errors.Is(err, ErrSessionsEnded) || !errors.Is(err, ErrClosed) {
		t.Fatalf("this end's association ended with %v", err)
	}
	waitEnd(t, client, 5*time.Second)
	if err := client.Err(); !errors.Is(err, ErrPeerClosed) {
		t.Fatalf("the peer's association ended with %v", err)
	}
	// No session starts on it any more.
	if _, err := server.Connect(testCtx(t), newPeer(t, nil).QP, SessionConfig{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Connect after the teardown: %v", err)
	}
}

// A session that starts within LingerTimeout of the last one's end keeps
// the association; with LingerTimeout negative it is never torn down for
// having no session; and an association that has carried no session yet
// is its owner's: the default LingerTimeout does not close it.
func TestLingerWaitsForNextSession(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	const linger = 400 * time.Millisecond
	srv.LingerTimeout, cli.LingerTimeout = linger, linger
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)

	a1, b1 := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, sa, 1, a1, b1)
	closeQP(a1.QP)
	closeQP(b1.QP)
	time.Sleep(linger / 4)
	a3, b3 := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, sa, 3, a3, b3)
	stillOpen(t, server, 3*linger, "a second session started within LingerTimeout")
	stillOpen(t, client, 0, "a second session started within LingerTimeout")
	closeQP(a3.QP)
	closeQP(b3.QP)
	waitEnd(t, client, 5*time.Second)
	waitEnd(t, server, 5*time.Second)

	// Never, with LingerTimeout negative.
	srv, cli = pinnedConfigs(t)
	srv.LingerTimeout, cli.LingerTimeout = -1, -1
	server, client = connect(t, srv, cli)
	sa = server.Sessions(0)
	a5, b5 := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, sa, 5, a5, b5)
	closeQP(a5.QP)
	closeQP(b5.QP)
	stillOpen(t, server, DefaultLingerTimeout+500*time.Millisecond, "LingerTimeout negative")
	stillOpen(t, client, 0, "LingerTimeout negative")

	// No session yet: left open, with the default.
	srv, cli = pinnedConfigs(t)
	server, client = connect(t, srv, cli)
	server.Sessions(0)
	stillOpen(t, server, DefaultLingerTimeout+500*time.Millisecond, "no session yet")
	stillOpen(t, client, 0, "no session yet")
}
