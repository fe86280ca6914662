package rdmap

import (
	"runtime"
	"sync"
	"testing"

	"github.com/iwarpgo/iwarp/trace"
)

// The events of a requester are in causal order: a Read Request is
// observed sent before the completion its Response brings, a completion
// is observed before the ULP can poll it, and a Request waiting for the
// ORD is observed sent only after the completion that freed its place.
// Counting Requests sent less completions seen over the event stream
// therefore stays between 0 and the ORD, as a lab's reader expects.
func TestRequesterEventsInCausalOrder(t *testing.T) {
	const ord, reads, rounds = 2, 8, 300
	var (
		mu          sync.Mutex
		outstanding int
		most        int
		bad         []string
		completed   map[uint64]bool
	)
	obs := trace.Func(func(e trace.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == trace.SegmentSent && Opcode(e.Opcode) == OpReadRequest:
			outstanding++
		case e.Kind == trace.Completion && WorkOp(e.Opcode) == WorkRead:
			outstanding--
			completed[e.WRID] = true
		default:
			return
		}
		most = max(most, outstanding)
		if outstanding < 0 || outstanding > ord {
			bad = append(bad, e.Kind.String())
		}
	})
	a, b := newPair(t, pairOpts{cfg: QPConfig{ORD: ord, IRD: ord, Observer: obs}})
	src := b.reg(t, 4096, RemoteRead)
	dst := a.reg(t, 4096, LocalWrite)
	for round := 0; round < rounds; round++ {
		mu.Lock()
		completed = map[uint64]bool{}
		mu.Unlock()
		for i := range reads {
			mustPost(t, a.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: dst, Offset: uint64(512 * i), Length: 512},
				RemoteSTag: src.STag(), RemoteTO: src.Base() + uint64(512*i)}))
		}
		for i := range reads {
			// Poll, not Wait: a waiter would do the receive work itself,
			// on this goroutine, and the reader's races would not run.
			var cs [1]Completion
			for a.scq.Poll(cs[:]) == 0 {
				runtime.Gosched()
			}
			c := cs[0]
			mu.Lock()
			seen := completed[c.WRID]
			mu.Unlock()
			if c.Status != StatusSuccess || c.WRID != uint64(i) || !seen {
				t.Fatalf("round %d: completion %+v; observed before it could be polled: %v", round, c, seen)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 || most != ord {
		t.Errorf("Requests outstanding over the events reached %d (want the ORD, %d); out of range after %d events: %v", most, ord, len(bad), bad)
	}
}
