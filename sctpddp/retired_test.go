//go:build !js

package sctpddp

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// badStreams starts n streams on client, from stream id first, each with
// a first message that is no Initiate: the server's SessionAcceptor
// answers each with a Terminate and retires it.
func badStreams(t *testing.T, client *Association, first uint16, n int) []*Stream {
	t.Helper()
	var out []*Stream
	for i := range n {
		st, err := client.OpenStream(first + uint16(2*i))
		if err != nil {
			t.Fatal(err)
		}
		rawWrite(t, st, wire.PPIDSessionControl, []byte{0, 0, 0})
		out = append(out, st)
	}
	return out
}

// retiredReaders returns how many retired streams of a are read.
func (a *Association) retiredReaders() int {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	return len(a.readers)
}

// A peer that starts many streams with one bad message each, a few at a
// time, and then keeps quiet on them, holds no more than
// MaxRetiredStreams readers: the quietest makes room; and once the streams have been quiet for
// RetiredStreamTimeout no reader is left. The association, harmless,
// stays open (with LingerTimeout off: its requests have all ended).
func TestRetiredStreamReadersBounded(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.MaxRetiredStreams, srv.RetiredStreamTimeout, srv.LingerTimeout = 8, time.Second, -1
	server, client := connect(t, srv, cli)
	server.Sessions(0)
	before := runtime.NumGoroutine()
	peak := 0
	for round := range 20 {
		badStreams(t, client, uint16(101+round*12), 6)
		time.Sleep(150 * time.Millisecond)
		peak = max(peak, server.retiredReaders())
		if n := server.retiredReaders(); n > srv.MaxRetiredStreams {
			t.Fatalf("%d retired streams read, more than %d", n, srv.MaxRetiredStreams)
		}
	}
	if !waitFor(5*time.Second, func() bool { return server.retired(101+19*12+2*5) && server.retiredReaders() == 0 }) {
		t.Fatalf("%d retired streams still read after their quiet period", server.retiredReaders())
	}
	if n := runtime.NumGoroutine(); n > before+10 {
		t.Fatalf("%d goroutines after 120 retired streams, %d before", n, before)
	}
	if err := server.Err(); err != nil {
		t.Fatalf("the association ended: %v", err)
	}
	t.Logf("at most %d retired streams read at once", peak)
}

// A peer that keeps sending on more retired streams than
// MaxRetiredStreams holds no more than that many readers: the quietest
// makes room, and the goroutines stay bounded; what it sends on streams
// nobody reads fills only its own association's receive window.
func TestTooManyBusyRetiredStreams(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.MaxRetiredStreams, srv.LingerTimeout = 8, -1
	server, client := connect(t, srv, cli)
	server.Sessions(0)
	before := runtime.NumGoroutine()
	var streams []*Stream
	for i := range 40 {
		st, err := client.OpenStream(101 + uint16(2*i))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.s.Write(context.Background(), []byte{0, 0, 0}, wire.PPIDSessionControl); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	junk := wire.SegmentChunk{SSN: 1, Segment: []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}}.Append(nil)
	for range 20 {
		for _, st := range streams {
			if err := st.s.Write(context.Background(), junk, 1000); err != nil { // an unexpected PPID
				t.Fatal(err)
			}
		}
		if n := server.retiredReaders(); n > srv.MaxRetiredStreams {
			t.Fatalf("%d retired streams read, more than %d", n, srv.MaxRetiredStreams)
		}
		if n := runtime.NumGoroutine(); n > before+3*srv.MaxRetiredStreams+20 {
			t.Fatalf("%d goroutines, %d before", n, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := server.Err(); err != nil {
		t.Fatalf("the association ended: %v", err)
	}
}

// A healthy association that runs 200 sessions one after the other stays
// open, with the default MaxRetiredStreams, and holds no more than that
// many readers on either end. The quiet period is shortened to half a
// second so that a read-deadline timer pion may still run for a stream
// when the association closes ends within checkGoroutines' wait.
func TestManySequentialSessions(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.RetiredStreamTimeout, cli.RetiredStreamTimeout = 500*time.Millisecond, 500*time.Millisecond
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	ctx := testCtx(t)
	const sessions = 200
	accepted := make(chan error, 1)
	go func() {
		for range sessions {
			r, err := sa.Accept(ctx)
			if err != nil {
				accepted <- err
				return
			}
			qp := newQP(dev)
			if _, err := r.Accept(qp, SessionConfig{}); err != nil {
				accepted <- err
				return
			}
			go func() {
				<-time.After(time.Millisecond)
				closeQP(qp)
			}()
		}
		accepted <- nil
	}()
	start := time.Now()
	for i := range sessions {
		qp := newQP(dev)
		if _, err := client.Connect(ctx, qp, SessionConfig{}); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		closeQP(qp)
		if n := max(server.retiredReaders(), client.retiredReaders()); n > DefaultMaxRetiredStreams {
			t.Fatalf("%d retired streams read", n)
		}
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sessions in %v", sessions, time.Since(start))
	if err := server.Err(); err != nil {
		t.Fatalf("server: %v", err)
	}
	if err := client.Err(); err != nil {
		t.Fatalf("client: %v", err)
	}
}
