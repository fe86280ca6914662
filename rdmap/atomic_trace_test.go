package rdmap

import (
	"runtime"
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
// the same word, at the same time, lose nothing: RFC 7306 §5.4 rule 2's
// note makes atomicity with local processor accesses OPTIONAL, and
// MemoryRegion.Word offers it. A goroutine adds 1 to the word without
// pause from before the first FetchAdd until after the last, while the
// peer keeps AtomicORD FetchAdds of 1 outstanding. The Original Remote
// Data Values the FetchAdds return show the local adds falling between
// them (they overlapped), and the word ends as the sum of both.
func TestWordBesideRemoteAtomics(t *testing.T) {
	a, b := newPair(t, pairOpts{cfg: QPConfig{AtomicORD: 8, AtomicIRD: 8}})
	target := b.reg(t, 16, RemoteAtomic)
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
	const n, window = 2000, 8
	res := a.reg(t, 8*n, LocalWrite)
	var local atomic.Uint64 // the local adds made
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			atomic.AddUint64(w, 1)
			if local.Add(1)%256 == 0 {
				// Without preemption (js/wasm) the queue pairs would
				// never run.
				runtime.Gosched()
			}
		}
	}()
	for local.Load() == 0 {
		runtime.Gosched()
	}
	posted := 0
	for completed := 0; completed < n; completed++ {
		for ; posted < n && posted-completed < window; posted++ {
			mustPost(t, a.qp.PostAtomic(AtomicWR{ID: uint64(posted), Op: FetchAdd, Add: 1, Local: SGE{MR: res, Offset: uint64(8 * posted), Length: 8},
				RemoteSTag: target.STag(), RemoteTO: target.Base() + 8}))
		}
		if c := wait(t, a.scq); c.Status != StatusSuccess || c.WRID != uint64(completed) {
			close(stop)
			t.Fatalf("completion %+v", c)
		}
		if completed%100 == 0 {
			// On a loaded machine the adder may get no CPU while the
			// FetchAdds run: every hundredth time, the next FetchAdd
			// waits for a local add, so that some fall between them.
			for l := local.Load(); local.Load() == l; {
				runtime.Gosched()
			}
		}
	}
	close(stop)
	<-done
	if v, l := atomic.LoadUint64(w), local.Load(); v != l+n {
		t.Errorf("the word is %d after %d local adds and %d FetchAdds: %d lost", v, l, n, l+n-v)
	}
	// The FetchAdds ran in order, each seeing the one before it plus the
	// local adds in between.
	between := 0
	prev := word(res, 0)
	if prev == 0 {
		t.Error("the first FetchAdd saw none of the local adds made before it")
	}
	for i := 1; i < n; i++ {
		v := word(res, 8*i)
		if v <= prev {
			t.Fatalf("FetchAdd %d saw %d, FetchAdd %d saw %d", i-1, prev, i, v)
		}
		if v-prev > 1 {
			between++
		}
		prev = v
	}
	if between == 0 {
		t.Errorf("no local add fell between two of the %d FetchAdds: they did not overlap", n)
	}
	t.Logf("%d local adds; local adds between %d of %d pairs of consecutive FetchAdds", local.Load(), between, n-1)
}
