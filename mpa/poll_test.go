//go:build !js

package mpa

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// A goroutine waiting on a receive completion queue reads the connection
// itself (Conn.Poll): a Send ping-pong runs with the waiters reading, every
// message arrives whole and in order, and the receive goroutine takes the
// connection back when nobody waits any more (a Read from the peer is then
// still answered).
func TestConnWaiterReads(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	ac, bc := connectPair(t, Config{}, Config{}, a, b)
	as, bs := a.Reg(t, 64, 0), b.Reg(t, 64, 0)
	ar, br := a.Reg(t, 64, rdmap.LocalWrite), b.Reg(t, 64, rdmap.LocalWrite)
	post := func(p *peer, mr *rdmap.MemoryRegion) {
		t.Helper()
		if err := p.QP.PostRecv(rdmap.RecvWR{SGL: []rdmap.SGE{{MR: mr, Length: 64}}}); err != nil {
			t.Fatal(err)
		}
	}
	post(a, ar)
	post(b, br)
	const rounds = 2000
	echo := make(chan error, 1)
	go func() {
		for i := 0; i < rounds; i++ {
			c, err := b.RCQ.Wait(tctx(t))
			if err != nil || c.Status != rdmap.StatusSuccess {
				echo <- errors.Join(err, c.Err)
				return
			}
			copy(bs.Bytes(), br.Bytes())
			post(b, br)
			if err := b.QP.PostSend(rdmap.SendWR{SGL: []rdmap.SGE{{MR: bs, Length: 64}}, Unsignaled: true}); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	for i := 0; i < rounds; i++ {
		binary.BigEndian.PutUint64(as.Bytes(), uint64(i))
		if err := a.QP.PostSend(rdmap.SendWR{SGL: []rdmap.SGE{{MR: as, Length: 64}}, Unsignaled: true}); err != nil {
			t.Fatal(err)
		}
		c := waitC(t, a.RCQ)
		if c.Status != rdmap.StatusSuccess || binary.BigEndian.Uint64(ar.Bytes()) != uint64(i) {
			t.Fatalf("round %d: %+v, echo of %d", i, c, binary.BigEndian.Uint64(ar.Bytes()))
		}
		post(a, ar)
	}
	if err := <-echo; err != nil {
		t.Fatal(err)
	}
	if ac.releases.Load() == 0 || bc.releases.Load() == 0 {
		t.Fatalf("the waiters never read the connection themselves (%d, %d)", ac.releases.Load(), bc.releases.Load())
	}
	// Nobody waits on b now: its receive goroutine answers a Read.
	src := b.Reg(t, 4096, rdmap.RemoteRead)
	fillp(src.Bytes(), 3)
	sink := a.Reg(t, 4096, rdmap.LocalWrite)
	if err := a.QP.PostRead(rdmap.ReadWR{ID: 7, Local: rdmap.SGE{MR: sink, Length: 4096}, RemoteSTag: src.STag()}); err != nil {
		t.Fatal(err)
	}
	if c := waitC(t, a.SCQ); c.Status != rdmap.StatusSuccess || c.WRID != 7 || string(sink.Bytes()) != string(src.Bytes()) {
		t.Fatalf("Read after the ping-pong: %+v", c)
	}
}

// A waiter that reads the connection itself still sees its context end,
// within a few milliseconds, when nothing arrives (the receive goroutine
// interrupts its read); the connection reads on after that; and a queue
// pair closed under it flushes its receives to it.
func TestConnWaiterReadsContextAndClose(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	connectPair(t, Config{}, Config{}, a, b)
	r := a.Reg(t, 64, rdmap.LocalWrite)
	if err := a.QP.PostRecv(rdmap.RecvWR{ID: 5, SGL: []rdmap.SGE{{MR: r, Length: 64}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		start := time.Now()
		_, err := a.RCQ.Wait(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait with nothing to come: %v", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("Wait returned %v after its context ended", d-30*time.Millisecond)
		}
	}
	// The reads those waits left off were interrupted: the connection
	// still delivers, to a waiter or to the receive goroutine.
	msg := b.Reg(t, 8, 0)
	copy(msg.Bytes(), "after it")
	if err := b.QP.PostSend(rdmap.SendWR{ID: 9, SGL: []rdmap.SGE{{MR: msg, Length: 8}}, Unsignaled: true}); err != nil {
		t.Fatal(err)
	}
	if c := waitC(t, a.RCQ); c.Status != rdmap.StatusSuccess || c.WRID != 5 || string(r.Bytes()[:8]) != "after it" {
		t.Fatalf("a Send after the waits: %+v", c)
	}
	if err := a.QP.PostRecv(rdmap.RecvWR{ID: 6, SGL: []rdmap.SGE{{MR: r, Length: 64}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a.QP.Close(ctx)
	}()
	c := waitC(t, a.RCQ)
	if c.Status != rdmap.StatusWRFlushErr || c.WRID != 6 {
		t.Fatalf("after Close: %+v", c)
	}
}

// A waiter on a receive CQ whose Sends are larger than the Reader's
// buffer leaves the reading to the receive goroutine (it cannot read such
// an FPDU without blocking in its middle), and goes on leaving it for the
// next waits instead of taking the token back for every message; every
// message arrives intact and in order.
func TestConnWaiterBulk(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	_, bc := connectPair(t, Config{}, Config{}, a, b)
	const size, n = 256 << 10, 100
	src := a.Reg(t, size, 0)
	var sinks [4]*rdmap.MemoryRegion
	for i := range sinks {
		sinks[i] = b.Reg(t, size, rdmap.LocalWrite)
		if err := b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: sinks[i], Length: size}}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := tctx(t)
	sent := make(chan error, 1)
	credits := make(chan struct{}, len(sinks))
	for range sinks {
		credits <- struct{}{}
	}
	go func() {
		for i := 0; i < n; i++ {
			<-credits
			fillp(src.Bytes(), byte(i))
			if err := a.QP.PostSend(rdmap.SendWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: src, Length: size}}}); err != nil {
				sent <- err
				return
			}
			// The source is reused: wait until it has left.
			if c, err := a.SCQ.Wait(ctx); err != nil || c.Status != rdmap.StatusSuccess {
				sent <- errors.Join(err, c.Err)
				return
			}
		}
		sent <- nil
	}()
	skipping := 0
	want := make([]byte, size)
	for i := 0; i < n; i++ {
		c := waitC(t, b.RCQ)
		if c.Status != rdmap.StatusSuccess || c.ByteLen != size {
			t.Fatalf("message %d: %+v", i, c)
		}
		fillp(want, byte(i))
		if got := sinks[c.WRID].Bytes(); string(got) != string(want) {
			t.Fatalf("message %d: wrong contents", i)
		}
		if bc.skipPolls.Load() > 0 {
			skipping++
		}
		if err := b.QP.PostRecv(rdmap.RecvWR{ID: c.WRID, SGL: []rdmap.SGE{{MR: sinks[c.WRID], Length: size}}}); err != nil {
			t.Fatal(err)
		}
		credits <- struct{}{}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if skipping < n/2 {
		t.Errorf("the waiter left the reading to the receive goroutine after only %d of %d messages", skipping, n)
	}
}
