package rdmap

import (
	"context"
	"testing"
)

// A waiter may read a transport itself only for a CQ that serves the
// receives of exactly one queue pair and no send queue; closing the
// other queue pairs makes the last one eligible again.
func TestCQPollQP(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	pd := dev.NewProtectionDomain()
	rcq, scq := dev.NewCompletionQueue(8), dev.NewCompletionQueue(8)
	pollQP := func() *QueuePair {
		rcq.mu.Lock()
		defer rcq.mu.Unlock()
		return rcq.pollQP()
	}
	a, err := pd.NewQueuePair(QPConfig{SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		t.Fatal(err)
	}
	if pollQP() != a {
		t.Fatal("the receive CQ of one queue pair does not name it")
	}
	b, err := pd.NewQueuePair(QPConfig{SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		t.Fatal(err)
	}
	if pollQP() != nil {
		t.Fatal("a receive CQ shared by two queue pairs names one")
	}
	b.Close(context.Background())
	if pollQP() != a {
		t.Fatal("after the other queue pair closed, the receive CQ does not name the one left")
	}
	c, err := pd.NewQueuePair(QPConfig{SendCQ: rcq, RecvCQ: scq})
	if err != nil {
		t.Fatal(err)
	}
	if pollQP() != nil {
		t.Fatal("a CQ that is also a send CQ names a queue pair")
	}
	c.Close(context.Background())
	a.Close(context.Background())
	if pollQP() != nil {
		t.Fatal("a CQ with no queue pair names one")
	}
}
