//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// A nil Config is an error that says what to configure, not a panic.
func TestNilConfig(t *testing.T) {
	if _, err := Listen(context.Background(), "udp", "127.0.0.1:0", nil); !errors.Is(err, ErrNoPeerAuthentication) {
		t.Fatalf("Listen: %v", err)
	}
	if _, err := Dial(context.Background(), "udp", "127.0.0.1:9", nil); !errors.Is(err, ErrNoPeerAuthentication) {
		t.Fatalf("Dial: %v", err)
	}
}

// Dial tells "nobody answers" from "the handshake failed", and gives up
// after the HandshakeTimeout when ctx has no deadline; the Listener
// reports a peer that answered its cookie but whose key was wrong.
func TestDialFailures(t *testing.T) {
	// Nothing listens: a bounded wait, ErrUnreachable.
	dead, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.LocalAddr().String()
	dead.Close()
	cfg := pskConfigs("key", "id")
	cfg.HandshakeTimeout = 500 * time.Millisecond
	start := time.Now()
	_, err = Dial(context.Background(), "udp", addr, cfg)
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrHandshake) {
		t.Fatalf("nobody listening: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}

	// A wrong key: ErrHandshake, and the Listener says so.
	var mu sync.Mutex
	var heard []error
	srv := pskConfigs("key", "id")
	srv.Refused = func(_ net.Addr, why error) {
		mu.Lock()
		heard = append(heard, why)
		mu.Unlock()
	}
	srv.HandshakeTimeout = 500 * time.Millisecond
	l := listenT(t, srv)
	bad := pskConfigs("other key", "id")
	bad.HandshakeTimeout = 700 * time.Millisecond
	_, err = Dial(context.Background(), "udp", l.Addr().String(), bad)
	if !errors.Is(err, ErrHandshake) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("wrong key: %v", err)
	}
	if !waitFor(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(heard) == 1 && errors.Is(heard[0], ErrHandshake)
	}) {
		t.Fatalf("the Listener reported %v", heard)
	}
}

// Association.Connect chooses a stream of its side's parity that has
// carried no session; naming a stream that carries a session fails at
// once, sends nothing, and leaves that session alone. A stream whose
// session has ended is not used again on the association: "A DDP Stream
// Identifier MUST NOT be reused for another DDP Stream Session while any
// Data Chunk from a prior session might be outstanding." (RFC 5043 §6.6)
func TestStreamIDs(t *testing.T) {
	l := listenT(t, pskConfigs("key", "id"))
	accepted := acceptAll(t, l)
	cli, err := dialFrom(testCtx(t), t, l.Addr().String(), pskConfigs("key", "id"), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := next(t, accepted)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	var qps []*rdmap.QueuePair
	for range 6 {
		qp := newQP(dev)
		qps = append(qps, qp)
		t.Cleanup(func() { closeQP(qp) })
	}
	served := serveSessions(srv, qps[3:])
	s1, err := cli.Connect(testCtx(t), qps[0], SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := cli.Connect(testCtx(t), qps[1], SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if s1.ID() != 1 || s2.ID() != 3 {
		t.Fatalf("the dialer chose streams %d and %d, want 1 and 3", s1.ID(), s2.ID())
	}
	if _, err := Connect(testCtx(t), cli, 1, qps[2], SessionConfig{}); !errors.Is(err, ErrStreamInUse) {
		t.Fatalf("Connect on a busy stream: %v", err)
	}
	// The session on stream 1 still works.
	if qps[0].State() != rdmap.StateRunning {
		t.Fatalf("the live session's queue pair is %v", qps[0].State())
	}
	// The peer's Accept returns after it has answered: it may record
	// the second session just after this side's Connect returned.
	if !waitFor(5*time.Second, func() bool { return len(served()) == 2 }) {
		t.Fatalf("the peer saw %d sessions", len(served()))
	}
	closeQP(qps[0])
	if !waitFor(5*time.Second, func() bool { return cli.retired(1) }) {
		t.Fatal("stream 1's session did not end")
	}
	// Stream 1 has carried a session: it is neither named nor chosen
	// again.
	if _, err := Connect(testCtx(t), cli, 1, qps[2], SessionConfig{}); !errors.Is(err, ErrStreamInUse) {
		t.Fatalf("Connect on a used stream: %v", err)
	}
	s3, err := cli.Connect(testCtx(t), qps[2], SessionConfig{})
	if err != nil || s3.ID() != 5 {
		t.Fatalf("after streams 1 and 3 the dialer chose %v, %v; want 5", s3, err)
	}
	// The Listener's side chooses even streams.
	if id, err := srv.claimNew(); err != nil || id != 2 {
		t.Fatalf("the Listener's side would choose stream %d, %v", id, err)
	}
	// Once every stream id of its parity has been used, Connect says to
	// open a new association, and sends nothing.
	cli.idMu.Lock()
	cli.nextID = maxStreamID - 1
	cli.idMu.Unlock()
	if id, err := cli.claimNew(); err != nil || id != maxStreamID-1 {
		t.Fatalf("the last odd stream id: %d, %v", id, err)
	}
	if _, err := cli.Connect(testCtx(t), qps[2], SessionConfig{}); !errors.Is(err, ErrNoStreamID) {
		t.Fatalf("Connect with no stream id left: %v", err)
	}
}
