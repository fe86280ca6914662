//go:build !js

package sctpddp

import (
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// MaxListenerSessions bounds the sessions over all of a Listener's
// associations, whatever their peers: with a limit of 2, two peers'
// sessions take it, a third session is answered with a Terminate
// (ErrTooManySessions, heard by Refused), and closing one gives its place
// back.
func TestListenerSessionLimit(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var heard refusals
	srv.MaxListenerSessions, srv.Refused = 2, heard.hear
	srv.AcceptTimeout = 300 * time.Millisecond
	l := listenT(t, srv)
	accepted := acceptAll(t, l)
	ctx := testCtx(t)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	connect := func(a *Association, id uint16) error {
		qp := newQP(dev)
		t.Cleanup(func() { closeQP(qp) })
		_, err := Connect(ctx, a, id, qp, SessionConfig{})
		return err
	}
	var served []func() []*Session
	var clients []*Association
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		c, err := dialFrom(ctx, t, l.Addr().String(), cli, ip)
		if err != nil {
			t.Fatal(err)
		}
		srvQPs := []*rdmap.QueuePair{newQP(dev), newQP(dev)}
		for _, qp := range srvQPs {
			t.Cleanup(func() { closeQP(qp) })
		}
		served = append(served, serveSessions(next(t, accepted), srvQPs))
		clients = append(clients, c)
	}
	if err := connect(clients[0], 1); err != nil {
		t.Fatal(err)
	}
	if err := connect(clients[1], 1); err != nil {
		t.Fatal(err)
	}
	if err := connect(clients[1], 3); !errors.Is(err, ErrSessionTerminated) {
		t.Fatalf("a session beyond MaxListenerSessions: %v", err)
	}
	if heard.count(ErrTooManySessions) != 1 {
		t.Fatalf("Refused heard %v", heard.why)
	}
	if !waitFor(5*time.Second, func() bool { return len(served[0]()) == 1 }) {
		t.Fatal("the first peer's session was not served")
	}
	_ = served[0]()[0].Close()
	if !waitFor(5*time.Second, func() bool {
		l.sessions.mu.Lock()
		defer l.sessions.mu.Unlock()
		return l.sessions.total == 1
	}) {
		t.Fatal("the closed session still counts")
	}
	if err := connect(clients[1], 5); err != nil {
		t.Fatalf("no place after a session closed: %v", err)
	}
}
