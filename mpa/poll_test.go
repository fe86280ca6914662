//go:build !js

package mpa

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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

// A goroutine waiting on a send CQ whose one outstanding work request is
// a Read reads the socket itself; a Write another goroutine posts meanwhile
// completes after the Read, in order, and the waiter sees both.
func TestSendCQWaiterAndLaterWrite(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), slowResponder(t, 200*time.Millisecond)
	connectPair(t, Config{}, Config{}, a, b)
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
	time.Sleep(50 * time.Millisecond) // the waiter is in its read by now
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
	connectPair(t, Config{}, Config{}, a, b)
	src := b.Reg(t, 64, rdmap.RemoteRead)
	sink := a.Reg(t, 64, rdmap.LocalWrite)
	warmUp(t, a, src)
	if err := a.QP.PostRead(rdmap.ReadWR{ID: 1, Local: rdmap.SGE{MR: sink, Length: 64}, RemoteSTag: src.STag()}); err != nil {
		t.Fatal(err)
	}
	got := make(chan rdmap.Completion, 1)
	go func() {
		c, err := a.SCQ.Wait(tctx(t))
		if err == nil {
			got <- c
		}
	}()
	time.Sleep(50 * time.Millisecond)
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
