package rdmap

import (
	"context"
	"testing"
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
