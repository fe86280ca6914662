package rdmap

import (
	"sync"
	"sync/atomic"
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

// The program's own sync/atomic adds on a Word and a peer's FetchAdds on
// the same word, at the same time, lose nothing.
func TestWordBesideRemoteAtomics(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	target := b.reg(t, 16, RemoteAtomic)
	res := a.reg(t, 8, LocalWrite)
	w, err := target.Word(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := target.Word(9); err == nil {
		t.Error("an unaligned word")
	}
	if _, err := target.Word(12); err == nil {
		t.Error("a word past the region's end")
	}
	const n = 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			atomic.AddUint64(w, 1)
		}
	}()
	for i := range n {
		mustPost(t, a.qp.PostAtomic(AtomicWR{ID: uint64(i), Op: FetchAdd, Add: 1, Local: SGE{MR: res, Length: 8}, RemoteSTag: target.STag(), RemoteTO: target.Base() + 8}))
		if c := wait(t, a.scq); c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
	}
	<-done
	if v := atomic.LoadUint64(w); v != 2*n {
		t.Errorf("the word is %d, want %d", v, 2*n)
	}
}
