package rdmap

import (
	"sync"
	"testing"
)

// "An RNIC MUST ensure that if a CQ overflows, any Streams that do not use
// the CQ MUST remain unaffected." (RFC 5040 §8.1.1 item 10) One device,
// two target queue pairs: the first's receive completions go to a CQ of
// two entries, which three Sends overrun (one CQ_ERROR event, naming that
// CQ, and the completion that did not fit is lost); the second queue
// pair, on CQs of its own, goes on sending and receiving.
func TestCQOverrunIsolated(t *testing.T) {
	var mu sync.Mutex
	var events []AsyncEvent
	dev := NewDevice(DeviceConfig{OnEvent: func(e AsyncEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	pd := dev.NewProtectionDomain()
	small := dev.NewCompletionQueue(2)
	buf, _ := pd.RegisterMemory(make([]byte, 64*8), 0, LocalWrite)
	var inits []*side
	var targets []*QueuePair
	var rcqs []*CompletionQueue
	for k := 0; k < 2; k++ {
		rcq := small
		if k == 1 {
			rcq = dev.NewCompletionQueue(8)
		}
		a, qp := targetPair(t, pd, QPConfig{SendCQ: dev.NewCompletionQueue(8), RecvCQ: rcq})
		for i := 0; i < 4; i++ {
			mustPost(t, qp.PostRecv(RecvWR{ID: uint64(10*k + i), SGL: []SGE{{MR: buf, Offset: uint64(64 * (4*k + i)), Length: 64}}}))
		}
		inits, targets, rcqs = append(inits, a), append(targets, qp), append(rcqs, rcq)
	}
	src := inits[0].reg(t, 8, 0)
	for i := 0; i < 3; i++ {
		mustPost(t, inits[0].qp.PostSend(SendWR{ID: uint64(i), SGL: []SGE{{MR: src, Length: 1}}}))
		if c := wait(t, inits[0].scq); c.Status != StatusSuccess {
			t.Fatalf("send %d: %+v", i, c)
		}
	}
	// The third Send's completion found the CQ full.
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) > 0
	})
	mu.Lock()
	if len(events) != 1 || events[0].Type != EventCQError || events[0].CQ != small {
		t.Fatalf("events %+v", events)
	}
	mu.Unlock()
	// The other stream is unaffected.
	src1 := inits[1].reg(t, 8, 0)
	for i := 0; i < 3; i++ {
		mustPost(t, inits[1].qp.PostSend(SendWR{ID: uint64(i), SGL: []SGE{{MR: src1, Length: 1}}}))
		if c := wait(t, rcqs[1]); c.Status != StatusSuccess || c.QP != targets[1] || c.WRID != uint64(10+i) {
			t.Fatalf("the other stream's receive %d: %+v", i, c)
		}
	}
	if targets[1].State() != StateRunning {
		t.Fatalf("the other stream is %v", targets[1].State())
	}
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !eventually(cond) {
		t.Fatal("timed out")
	}
}
