//go:build !js

package sctpddp

import (
	"context"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// RFC 5043 §6.6: "A DDP Stream Identifier MUST NOT be reused for another
// DDP Stream Session while any Data Chunk from a prior session might be
// outstanding."

// readControl reads st until a session control message and returns it.
func readControl(t *testing.T, ctx context.Context, st *Stream) wire.SessionControl {
	t.Helper()
	buf := make([]byte, 1<<16)
	for {
		n, ppid, err := st.ReadMessage(ctx, buf)
		if err != nil {
			t.Fatalf("no session control message: %v", err)
		}
		if ppid != wire.PPIDSessionControl {
			continue
		}
		m, _, err := wire.ParseSessionControl(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// A session's stream id is not used for another session of the
// association: Connect, Close, Connect runs the second session on a new
// stream. (RFC 5043 §6.6: "A DDP Stream Identifier MUST NOT be reused for
// another DDP Stream Session while any Data Chunk from a prior session
// might be outstanding.")
func TestStreamIDNotReused(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	var qps []*rdmap.QueuePair
	for range 4 {
		qp := newQP(dev)
		qps = append(qps, qp)
		t.Cleanup(func() { closeQP(qp) })
	}
	served := serveSessions(server, qps[2:])
	s1, err := client.Connect(testCtx(t), qps[0], SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	// The peer has seen the first session end: its stream would be free
	// again for a Connect that reused stream ids.
	if !waitFor(5*time.Second, func() bool { s := served(); return len(s) == 1 && s[0].Err() != nil }) {
		t.Fatal("the peer did not see the first session end")
	}
	s2, err := client.Connect(testCtx(t), qps[1], SessionConfig{})
	if err != nil {
		t.Fatalf("the second Connect: %v", err)
	}
	if s1.ID() == s2.ID() {
		t.Fatalf("both sessions on stream %d", s1.ID())
	}
	if !waitFor(5*time.Second, func() bool { return len(served()) == 2 }) {
		t.Fatalf("the peer saw %d sessions", len(served()))
	}
	if s := served(); s[1].ID() != s2.ID() || s2.Err() != nil {
		t.Fatalf("the peer's second session is on stream %d, ours on %d (%v)", s[1].ID(), s2.ID(), s2.Err())
	}
}

// An Initiate on a stream whose session has ended is refused with a DDP
// Stream Session Terminate (§6.6; §6.4: a refusal the ULP did not decide
// is a Terminate), and the ULP never sees it.
func TestInitiateOnUsedStreamRefused(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	ctx := testCtx(t)
	b := newPeer(t, nil)
	accepted := make(chan *Session, 1)
	go func() {
		r, err := sa.Accept(ctx)
		if err != nil {
			close(accepted)
			return
		}
		s, _ := r.Accept(b.QP, SessionConfig{})
		accepted <- s
	}()
	// The client is scripted by hand: a session on stream 5, ended by
	// both sides' Terminates.
	st, err := client.OpenStream(5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}); err != nil {
		t.Fatal(err)
	}
	if m := readControl(t, ctx, st); m.Function != wire.FunctionEnhancedAccept {
		t.Fatalf("reply %v", m.Function)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("the server did not accept")
	}
	if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if m := readControl(t, ctx, st); m.Function != wire.FunctionTerminate || m.SSN != 1 {
		t.Fatalf("the session's end: %v with DDP-SSN %d", m.Function, m.SSN)
	}
	// Another Initiate on stream 5.
	if err := st.NewSession(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}); err != nil {
		t.Fatal(err)
	}
	if m := readControl(t, ctx, st); m.Function != wire.FunctionTerminate || m.SSN != 0 {
		t.Fatalf("reply to an Initiate on a used stream: %v with DDP-SSN %d", m.Function, m.SSN)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if r, err := sa.Accept(short); err == nil {
		t.Fatalf("the ULP was offered a request on stream %d", r.StreamID())
	}
}
