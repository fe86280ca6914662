package rdmap

import (
	"sync"
	"testing"

	"github.com/iwarpgo/iwarp/trace"
)

// The responder reports each Atomic Operation it carries out, with the
// target's STag and TO, on the goroutine that changed the word: the
// observer reads the new value there.
func TestAtomicExecutedEvent(t *testing.T) {
	var mu sync.Mutex
	var seen []trace.Event
	var values []uint64
	var target *MemoryRegion
	obs := trace.Func(func(e trace.Event) {
		if e.Kind != trace.AtomicExecuted {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
		values = append(values, word(target, int(e.TO-target.Base())))
	})
	a, b := newPair(t, pairOpts{cfg: QPConfig{Observer: obs}})
	target = b.reg(t, 64, RemoteAtomic)
	res := a.reg(t, 8, LocalWrite)
	for i, wr := range []AtomicWR{{Op: FetchAdd, Add: 5}, {Op: CmpSwap, Compare: 5, Swap: 9}} {
		wr.ID, wr.Local, wr.RemoteSTag, wr.RemoteTO = uint64(i), SGE{MR: res, Length: 8}, target.STag(), target.Base()+16
		mustPost(t, a.qp.PostAtomic(wr))
		if c := wait(t, a.scq); c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d atomic-executed events, want 2: %+v", len(seen), seen)
	}
	for i, op := range []AtomicOp{FetchAdd, CmpSwap} {
		e := seen[i]
		if !e.Tagged || e.STag != target.STag() || e.TO != target.Base()+16 || e.Len != 8 || AtomicOp(e.Opcode) != op {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if values[0] != 5 || values[1] != 9 {
		t.Errorf("the observer read %v, want [5 9]", values)
	}
	if e := trace.AtomicExecuted.String(); e != "atomic-executed" {
		t.Errorf("kind %q", e)
	}
}
