//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/term"
)

// "The initiator or responder MUST generate the TERM message that
// contains Layer 2, Error Type 0, Error Code 5 when it encounters any
// error locally for which the special Error Code is not defined in
// Section 8 before resetting the connection." (RFC 6581 §9.3) Over a DDP
// Stream Session as over MPA: the side that cannot lower its ORD to the
// peer's IRD returns that error, and its peer's queue pair hears it in a
// Terminate.
func TestSessionLocalErrorTerminates(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	// Sessions end here without the association: keep it, so that only
	// the Terminates tell the active side.
	srv.LingerTimeout, cli.LingerTimeout = -1, -1
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(16)
	qp := func(ird, ord int) *rdmap.QueuePair {
		q, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq, IRD: ird, ORD: ord})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close(context.Background()) })
		return q
	}
	heard := func(q *rdmap.QueuePair) {
		t.Helper()
		if !waitFor(5*time.Second, func() bool { return q.State() != rdmap.StateRunning && q.Err() != nil }) {
			t.Fatalf("the peer's queue pair is %v: %v", q.State(), q.Err())
		}
		var te *term.Error
		if err := q.Err(); !errors.As(err, &te) || !errors.Is(te, term.MPALocalCatastrophic) || !te.Remote {
			t.Fatalf("the peer's queue pair ended with %v, want a Terminate 2/0/5 from this end", err)
		}
	}

	// The active side: the passive side's IRD of 2 would lower its ORD.
	passive := qp(2, 1)
	accepted := make(chan error, 1)
	go func() {
		r, err := sa.Accept(testCtx(t))
		if err == nil {
			_, err = r.Accept(passive, SessionConfig{})
		}
		accepted <- err
	}()
	if _, err := client.Connect(testCtx(t), rdmaptest.FixedORD{QueuePair: qp(8, 8)}, SessionConfig{}); !errors.Is(err, term.MPALocalCatastrophic) {
		t.Fatalf("Connect = %v, want 2/0/5", err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	heard(passive)

	// The passive side: the active side's IRD of 1 would lower its ORD.
	go func() {
		r, err := sa.Accept(testCtx(t))
		if err == nil {
			_, err = r.Accept(rdmaptest.FixedORD{QueuePair: qp(8, 8)}, SessionConfig{})
		}
		accepted <- err
	}()
	active := qp(1, 1)
	if _, err := client.Connect(testCtx(t), active, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; !errors.Is(err, term.MPALocalCatastrophic) {
		t.Fatalf("Accept = %v, want 2/0/5", err)
	}
	heard(active)

	// A session the passive side cannot start, before its Accept (a
	// window out of range) or after it (a queue pair closed already):
	// the active side hears a Terminate at once rather than waiting out
	// its context.
	closed := qp(8, 8)
	closed.Close(context.Background())
	for _, tc := range []struct {
		name string
		ep   *rdmap.QueuePair
		cfg  SessionConfig
	}{
		{"before the Accept", qp(8, 8), SessionConfig{Window: 1 << 20}},
		{"after the Accept", closed, SessionConfig{}},
	} {
		go func() {
			r, err := sa.Accept(testCtx(t))
			if err == nil {
				_, err = r.Accept(tc.ep, tc.cfg)
			}
			accepted <- err
		}()
		start := time.Now()
		q := qp(8, 8)
		_, err := client.Connect(testCtx(t), q, SessionConfig{})
		if err == nil {
			// Accepted, then terminated: the queue pair hears it.
			if !waitFor(3*time.Second, func() bool { return q.State() != rdmap.StateRunning }) {
				t.Fatalf("%s: the active side's session runs on", tc.name)
			}
		} else if !errors.Is(err, ErrSessionTerminated) {
			t.Fatalf("%s: Connect = %v", tc.name, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: the active side heard after %v", tc.name, d)
		}
		if err := <-accepted; err == nil {
			t.Fatalf("%s: Accept succeeded", tc.name)
		}
	}
}
