//go:build !js

package mpa

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

// slowResponder makes a peer whose receive side sleeps for d when a Read
// Request (queue 1) other than the first is placed, before it answers.
func slowResponder(t *testing.T, d time.Duration) *peer {
	var n atomic.Int32
	obs := trace.Func(func(e trace.Event) {
		if e.Kind == trace.SegmentPlaced && !e.Tagged && e.QN == rdmap.QNReadReq && n.Add(1) > 1 {
			time.Sleep(d)
		}
	})
	return newPeer(t, rdmap.QPConfig{Observer: obs})
}

// warmUp makes one Read from a to src and waits for it on a's send CQ:
// the waiter asks for the receive token, and holds it in the next Wait.
func warmUp(t *testing.T, a *peer, src *rdmap.MemoryRegion) {
	t.Helper()
	sink := a.Reg(t, 8, rdmap.LocalWrite)
	if err := a.QP.PostRead(rdmap.ReadWR{ID: 100, Local: rdmap.SGE{MR: sink, Length: 8}, RemoteSTag: src.STag()}); err != nil {
		t.Fatal(err)
	}
	if c := waitC(t, a.SCQ); c.WRID != 100 || c.Status != rdmap.StatusSuccess {
		t.Fatalf("warm-up completion %+v", c)
	}
}

// readAndWait posts a Read (ID 1) of n octets from src into sink on a and
// waits for its completion on a's send CQ in a goroutine: the channel
// gets the completion, unless the wait fails.
func readAndWait(t *testing.T, a *peer, sink *rdmap.MemoryRegion, n uint32, src *rdmap.MemoryRegion) <-chan rdmap.Completion {
	t.Helper()
	if err := a.QP.PostRead(rdmap.ReadWR{ID: 1, Local: rdmap.SGE{MR: sink, Length: n}, RemoteSTag: src.STag()}); err != nil {
		t.Fatal(err)
	}
	got := make(chan rdmap.Completion, 1)
	go func() {
		c, err := a.SCQ.Wait(tctx(t))
		if err == nil {
			got <- c
		}
	}()
	return got
}

// A goroutine waiting on a send CQ whose one outstanding work request is
// a Read reads the socket itself; a Write another goroutine posts meanwhile
// completes after the Read, in order, and the waiter sees both.
func TestSendCQWaiterAndLaterWrite(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), slowResponder(t, 200*time.Millisecond)
	ac, _ := connectPair(t, Config{}, Config{}, a, b)
	src := b.Reg(t, 64, rdmap.RemoteRead|rdmap.RemoteWrite)
	sink := a.Reg(t, 64, rdmap.LocalWrite)
	warmUp(t, a, src)
	if err := a.QP.PostRead(rdmap.ReadWR{ID: 1, Local: rdmap.SGE{MR: sink, Length: 64}, RemoteSTag: src.STag()}); err != nil {
		t.Fatal(err)
	}
	got := make(chan rdmap.Completion, 2)
	go func() {
		for range 2 {
			c, err := a.SCQ.Wait(tctx(t))
			if err != nil {
				return
			}
			got <- c
		}
	}()
	waitUntil(t, func() bool { return waiterIn(ac) })
	if err := a.QP.PostWrite(rdmap.WriteWR{ID: 2, SGL: []rdmap.SGE{{MR: a.Reg(t, 8, 0), Length: 8}}, RemoteSTag: src.STag(), RemoteTO: 32}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{1, 2} {
		select {
		case c := <-got:
			if c.WRID != want || c.Status != rdmap.StatusSuccess {
				t.Fatalf("completion %+v, want WRID %d", c, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no completion for WRID %d", want)
		}
	}
}

// A waiter for a Read that the peer is slow to answer returns when the
// queue pair is closed, with the flushed Read's completion, before the
// peer answers.
func TestSendCQWaiterClosed(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), slowResponder(t, 1500*time.Millisecond)
	ac, _ := connectPair(t, Config{}, Config{}, a, b)
	src := b.Reg(t, 64, rdmap.RemoteRead)
	sink := a.Reg(t, 64, rdmap.LocalWrite)
	warmUp(t, a, src)
	got := readAndWait(t, a, sink, 64, src)
	waitUntil(t, func() bool { return waiterIn(ac) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		// It waits for the peer's FIN (or the TerminateTimeout).
		a.QP.Close(ctx)
	}()
	defer func() { <-closed }()
	select {
	case c := <-got:
		if c.WRID != 1 || c.Status == rdmap.StatusSuccess {
			t.Fatalf("completion %+v, want the Read flushed", c)
		}
		if d := time.Since(start); d > 700*time.Millisecond {
			t.Fatalf("the waiter returned %v after Close", d)
		}
	case <-time.After(1400 * time.Millisecond):
		t.Fatal("the waiter did not return after Close")
	}
}

// A waiter that asks for the receive token while the receive goroutine is
// reading gets it once it has what it waits for, not after an FPDU that
// brought it nothing: a peer's RDMA Write arriving while the waiter waits
// for its Read Response leaves the token with the receive goroutine, which
// goes on reading, so the Response is read as it arrives. (Handed over
// after the Write, the token stayed with nobody, the waiter asleep on its
// CQ, until the receive goroutine's lease ended: a lease more on the
// Read.)
func TestWaiterGetsTokenWhenDone(t *testing.T) {
	noLeaks(t)
	writes, obs := countWrites() // RDMA Write segments placed at a
	a, b := newPeer(t, rdmap.QPConfig{Observer: obs}), slowResponder(t, 400*time.Millisecond)
	ac, _ := connectPair(t, Config{}, Config{}, a, b)
	src := b.Reg(t, 64, rdmap.RemoteRead)
	sink := a.Reg(t, 64, rdmap.LocalWrite|rdmap.RemoteWrite)
	warmUp(t, a, src)
	held := func() bool { return tokenHeld(ac) }
	// The receive goroutine takes the token back a lease after the
	// warm-up's waiter left it.
	waitUntil(t, func() bool { return !ac.tok.want.Load() && held() })
	time.Sleep(3 * lease)
	if !held() {
		t.Fatal("the receive goroutine did not take the token back")
	}
	got := readAndWait(t, a, sink, 32, src)
	waitUntil(t, ac.tok.want.Load) // the waiter asked for the token
	// The peer Writes into the sink's second half meanwhile.
	wsrc := b.Reg(t, 32, 0)
	fillp(wsrc.Bytes(), 9)
	if err := b.QP.PostWrite(rdmap.WriteWR{ID: 7, SGL: []rdmap.SGE{{MR: wsrc, Length: 32}}, RemoteSTag: sink.STag(), RemoteTO: 32}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return writes.Load() == 1 })
	time.Sleep(2 * time.Millisecond)
	if !ac.tok.want.Load() || !held() {
		t.Fatal("the receive goroutine gave the token away after an FPDU that completed nothing")
	}
	select {
	case c := <-got:
		if c.WRID != 1 || c.Status != rdmap.StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no completion for the Read")
	}
	// Now the waiter has had what it waited for: the token is handed over.
	waitUntil(t, func() bool { return !ac.tok.want.Load() })
	if !bytes.Equal(sink.Bytes()[32:], wsrc.Bytes()) {
		t.Error("the peer's Write did not land")
	}
}

// countWrites returns an observer that counts the RDMA Write segments
// placed, and the count.
func countWrites() (*atomic.Int32, trace.Observer) {
	var n atomic.Int32
	return &n, trace.Func(func(e trace.Event) {
		if e.Kind == trace.SegmentPlaced && e.Tagged && e.Opcode == uint8(rdmap.OpWrite) {
			n.Add(1)
		}
	})
}

// tokenHeld reports whether some goroutine holds c's receive token.
func tokenHeld(c *Conn) bool {
	if c.tok.tryTake() {
		c.tok.give()
		return false
	}
	return true
}

// waiterIn reports whether a waiter is in Poll on c: reading with the
// token, or asking for it.
func waiterIn(c *Conn) bool {
	c.tok.mu.Lock()
	defer c.tok.mu.Unlock()
	return c.tok.holderCtx != nil || c.tok.want.Load()
}

// waitUntil waits up to 5 s for cond.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	if !eventually(cond) {
		t.Fatal("timed out")
	}
}

// eventually polls cond every 100 µs for up to five seconds and reports
// whether it became true.
func eventually(cond func() bool) bool {
	return waitfor.Until(5*time.Second, cond)
}

// A waiter that leaves withdraws its request for the token: a request
// kept after the waiter took its completion (before the receive goroutine
// looked) would make the receive goroutine hand the token to nobody at the
// next FPDU that makes its done true, and nobody would read for a lease.
func TestWaiterWithdrawsRequest(t *testing.T) {
	noLeaks(t)
	writes, obs := countWrites() // RDMA Write segments placed at a
	a, b := newPeer(t, rdmap.QPConfig{Observer: obs}), newPeer(t, rdmap.QPConfig{})
	ac, _ := connectPair(t, Config{}, Config{}, a, b)
	sink := a.Reg(t, 64, rdmap.LocalWrite|rdmap.RemoteWrite)
	held := func() bool { return tokenHeld(ac) }
	waitUntil(t, func() bool { return !ac.tok.want.Load() && held() })
	// A waiter asks while the receive goroutine reads, and leaves.
	var done atomic.Bool
	if ac.Poll(context.Background(), done.Load) {
		t.Fatal("Poll received while the receive goroutine held the token")
	}
	if !ac.tok.want.Load() {
		t.Fatal("the waiter's request was not kept")
	}
	if ac.Unpoll(); ac.tok.want.Load() {
		t.Fatal("Unpoll did not withdraw the request")
	}
	// What the waiter waited for comes now, with an FPDU: the receive
	// goroutine keeps the token and reads on.
	done.Store(true)
	wsrc := b.Reg(t, 32, 0)
	fillp(wsrc.Bytes(), 5)
	for i := range 2 {
		if err := b.QP.PostWrite(rdmap.WriteWR{ID: uint64(i + 1), SGL: []rdmap.SGE{{MR: wsrc, Length: 32}}, RemoteSTag: sink.STag(), RemoteTO: uint64(32 * i)}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, func() bool { return writes.Load() == int32(i+1) })
		time.Sleep(2 * time.Millisecond)
		if !held() {
			t.Fatalf("after Write %d the token was handed to a waiter that had left", i+1)
		}
	}
}

// A waiter that goes to sleep without reading (on a send CQ whose send
// queue holds no Read) has the receive goroutine take the token back at
// once, when a waiter that read before (a Read's) left it free: an FPDU
// arriving meanwhile, such as a Send answering a Send, is read as it
// arrives instead of at the receive goroutine's next look, up to two
// leases later. The lease is an hour here, so only the sleeping
// waiter can bring the token back.
func TestSleepingWaiterResumesReceive(t *testing.T) {
	saved := lease
	lease = time.Hour
	t.Cleanup(func() { lease = saved })
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	ac, _ := connectPair(t, Config{}, Config{}, a, b)
	src := b.Reg(t, 64, rdmap.RemoteRead)
	// Reads until one's waiter was handed the token: it reads in the
	// next Read's Wait and lets the token go when that Read completes.
	for i := 0; tokenHeld(ac); i++ {
		if i == 100 {
			t.Fatal("the receive goroutine kept the token through 100 Reads")
		}
		warmUp(t, a, src)
	}
	warmUp(t, a, src)
	if tokenHeld(ac) {
		t.Fatal("the token is held after the Read's waiter let it go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.SCQ.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait on an empty send queue: %v", err)
	}
	waitUntil(t, func() bool { return tokenHeld(ac) })
}

// The token's own rules: it starts taken (the receive goroutine starts
// with it), one goroutine takes it at a time, and a waiter's request is
// granted only once what it waits for is there, and forgotten when it is
// withdrawn.
func TestReceiveToken(t *testing.T) {
	var tok receiveToken
	tok.init()
	if tok.tryTake() {
		t.Fatal("a new token was free: a waiter could read before the receive goroutine started")
	}
	tok.give()
	if !tok.tryTake() || tok.tryTake() {
		t.Fatal("a free token was not taken once, and only once")
	}
	var done atomic.Bool
	if tok.asked() {
		t.Fatal("granted with no request")
	}
	tok.ask(done.Load)
	if tok.asked() {
		t.Fatal("granted before the waiter had what it waits for")
	}
	done.Store(true)
	if !tok.asked() {
		t.Fatal("not granted once the waiter had what it waits for")
	}
	tok.withdraw()
	if tok.asked() || tok.want.Load() {
		t.Fatal("a withdrawn request was still granted")
	}
	tok.hold(context.Background(), done.Load)
	tok.unhold()
	if tok.releases.Load() != 1 || !tok.tryTake() {
		t.Fatal("letting go of the token did not free it and count the release")
	}
}
