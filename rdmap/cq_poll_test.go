package rdmap

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
)

// A waiter may read a transport itself only for a CQ that serves one
// queue pair (its receives, its send queue or both); closing the other
// queue pairs makes the last one eligible again.
func TestCQPollQP(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	pd := dev.NewProtectionDomain()
	rcq, scq := dev.NewCompletionQueue(8), dev.NewCompletionQueue(8)
	pollQP := func(cq *CompletionQueue) (*QueuePair, bool) {
		cq.mu.Lock()
		defer cq.mu.Unlock()
		return cq.pollQP()
	}
	check := func(what string, cq *CompletionQueue, want *QueuePair, wantSends bool) {
		t.Helper()
		if qp, sends := pollQP(cq); qp != want || sends != wantSends {
			t.Fatalf("%s: pollQP = %p, %v; want %p, %v", what, qp, sends, want, wantSends)
		}
	}
	a, err := pd.NewQueuePair(QPConfig{SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		t.Fatal(err)
	}
	check("the receive CQ of one queue pair", rcq, a, false)
	check("the send CQ of one queue pair", scq, a, true)
	b, err := pd.NewQueuePair(QPConfig{SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		t.Fatal(err)
	}
	check("a receive CQ shared by two queue pairs", rcq, nil, false)
	check("a send CQ shared by two queue pairs", scq, nil, false)
	b.Close(context.Background())
	check("the receive CQ after the other queue pair closed", rcq, a, false)
	c, err := pd.NewQueuePair(QPConfig{SendCQ: rcq, RecvCQ: scq})
	if err != nil {
		t.Fatal(err)
	}
	check("a CQ that is also another queue pair's send CQ", rcq, nil, false)
	c.Close(context.Background())
	a.Close(context.Background())
	check("a CQ with no queue pair", rcq, nil, false)
	one := dev.NewCompletionQueue(8)
	d, err := pd.NewQueuePair(QPConfig{SendCQ: one, RecvCQ: one})
	if err != nil {
		t.Fatal(err)
	}
	check("the one CQ of one queue pair", one, d, true)
	if d.awaitsWire() {
		t.Fatal("an empty send queue awaits the wire")
	}
	d.Close(context.Background())
}

// pollEnd is a pipe end whose Poll, like MPA's when another goroutine
// receives, keeps the caller's request and returns false; it counts the
// requests kept and withdrawn.
type pollEnd struct {
	*ddptest.End
	kept, withdrawn atomic.Int32
}

func (e *pollEnd) Poll(context.Context, func() bool) bool {
	e.kept.Add(1)
	return false
}

func (e *pollEnd) Unpoll() { e.withdrawn.Add(1) }

// A waiter whose LLP kept its request for the receive work withdraws it
// when it leaves, with its completion or its context's end, so that the
// LLP does not hand that work to nobody later (ddp.Poller).
func TestCQWaiterWithdrawsRequest(t *testing.T) {
	synctest.Test(t, testCQWaiterWithdrawsRequest)
}

func testCQWaiterWithdrawsRequest(t *testing.T) {
	ea, eb := ddptest.New(ddptest.Options{})
	a, b := newSide(t, ea, QPConfig{}), newSide(t, eb, QPConfig{})
	pe := &pollEnd{End: ea}
	ea.Attach(a.qp.Stream())
	eb.Attach(b.qp.Stream())
	if err := a.qp.Start(pe, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Start(eb, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.qp.Close(context.Background())
		b.qp.Close(context.Background())
	})
	buf := a.reg(t, 8, LocalWrite)
	mustPost(t, a.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: buf, Length: 8}}}))

	// Its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.rcq.Wait(ctx); err == nil {
		t.Fatal("Wait returned a completion before any arrived")
	}
	if k, w := pe.kept.Load(), pe.withdrawn.Load(); k == 0 || w != 1 {
		t.Fatalf("after a Wait whose context ended: %d requests kept, %d withdrawn; want some kept and 1 withdrawn", k, w)
	}
	// Its completion arrives while it sleeps.
	got := make(chan Completion, 1)
	go func() { got <- wait(t, a.rcq) }()
	synctest.Wait()
	if k := pe.kept.Load(); k < 2 {
		t.Fatalf("a sleeping waiter: %d requests kept, want 2 or more", k)
	}
	mustPost(t, b.qp.PostSend(SendWR{ID: 9, SGL: []SGE{{MR: b.reg(t, 8, 0), Length: 8}}}))
	if c := <-got; c.WRID != 1 || c.Status != StatusSuccess {
		t.Fatalf("completion %+v", c)
	}
	if w := pe.withdrawn.Load(); w != 2 {
		t.Fatalf("after a Wait that took its completion: %d requests withdrawn, want 2", w)
	}
}

// A waiter on the send queue's completions may do the receive work itself
// while the send queue holds Reads only, or one Atomic: nothing else can
// complete them, and nothing posted meanwhile is reported before them.
func TestAwaitsWire(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(8)
	qp, err := pd.NewQueuePair(QPConfig{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close(context.Background())
	for _, c := range []struct {
		what  string
		kinds []sqKind
		want  bool
	}{
		{"an empty send queue", nil, false},
		{"one Read", []sqKind{kindRead}, true},
		{"a window of Reads", []sqKind{kindRead, kindRead, kindRead}, true},
		{"one Atomic", []sqKind{kindAtomic}, true},
		{"a window of Atomics (received beside the poster)", []sqKind{kindAtomic, kindAtomic}, false},
		{"Reads and an Atomic", []sqKind{kindRead, kindAtomic}, false},
		{"a Read, then a Write the send route completes", []sqKind{kindRead, kindWrite}, false},
		{"a Send, then a Read", []sqKind{kindSend, kindRead}, false},
		{"a Read, then an Invalidate", []sqKind{kindRead, kindInvalidate}, false},
	} {
		qp.mu.Lock()
		qp.sq = qp.sq[:0]
		for _, k := range c.kinds {
			qp.sq = append(qp.sq, &sqEntry{kind: k})
		}
		qp.mu.Unlock()
		if got := qp.awaitsWire(); got != c.want {
			t.Errorf("%s: awaitsWire = %v, want %v", c.what, got, c.want)
		}
	}
	qp.mu.Lock()
	qp.sq = qp.sq[:0]
	qp.mu.Unlock()
}

// A Read Response wakes the send goroutine only when it lets the work
// request that waits to start go (here the ORD of one): a wake-up for
// a work request that waits for something else (a batch still being
// posted) is a hand-off for nothing, one per Response in a window of
// Reads.
func TestReadResponseWakesOnlyWhatItFrees(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(8)
	qp, err := pd.NewQueuePair(QPConfig{SendCQ: cq, RecvCQ: cq, ORD: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close(context.Background())
	var h ddp.Header
	h.Tagged, h.Last = true, true
	h.RsvdULP[0] = byte(MakeControl(OpReadResponse))
	woken := func() bool {
		select {
		case <-qp.wake:
			return true
		default:
			return false
		}
	}
	for _, c := range []struct {
		what string
		next sqKind // the work request posted after the outstanding Read
		want bool
	}{
		{"a Read beyond the ORD", kindRead, true},
		{"a Write posted in a batch", kindWrite, false},
	} {
		read := &sqEntry{kind: kindRead}
		qp.mu.Lock()
		qp.sq = append(qp.sq[:0], read, &sqEntry{kind: c.next})
		qp.started = 1
		qp.reads = append(qp.reads[:0], read)
		qp.mu.Unlock()
		woken()
		(*receiver)(qp).Deliver(&ddp.Delivery{Header: h})
		if got := woken(); got != c.want {
			t.Errorf("the Response to a Read with %s waiting: woke the send goroutine %v, want %v", c.what, got, c.want)
		}
		qp.mu.Lock()
		qp.sq, qp.started, qp.reads = qp.sq[:0], 0, qp.reads[:0]
		qp.mu.Unlock()
	}
}
