package rdmap

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/llptest"
)

// batchEnd is a pipe end that can hold whole messages (ddp.Batcher): what
// it is given between Hold and Release it keeps, by reference as MPA's
// gather list does, and sends at Release.
type batchEnd struct {
	*llptest.End
	mu       sync.Mutex
	holding  bool
	kept     []keptSegment
	holds    int
	maxKept  int // the most segments kept at once
	failWith error
	// atRelease, if set, runs at the start of every Release;
	// beforeWrite at the start of every WriteSegment.
	atRelease   func()
	beforeWrite func()
}

type keptSegment struct {
	hdr     []byte
	payload [][]byte
}

var _ ddp.Batcher = (*batchEnd)(nil)

func (e *batchEnd) WriteSegment(hdr []byte, payload [][]byte) error {
	if e.beforeWrite != nil {
		e.beforeWrite()
	}
	e.mu.Lock()
	if e.holding {
		e.kept = append(e.kept, keptSegment{append([]byte(nil), hdr...), append([][]byte(nil), payload...)})
		e.maxKept = max(e.maxKept, len(e.kept))
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	return e.End.WriteSegment(hdr, payload)
}

func (e *batchEnd) Hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.holding {
		panic("Hold while holding")
	}
	e.holding = true
	e.holds++
}

func (e *batchEnd) Release() error {
	if e.atRelease != nil {
		e.atRelease()
	}
	e.mu.Lock()
	kept := e.kept
	e.kept, e.holding = nil, false
	fail := e.failWith
	e.mu.Unlock()
	if fail != nil {
		return fail
	}
	for _, s := range kept {
		if err := e.End.WriteSegment(s.hdr, s.payload); err != nil {
			return err
		}
	}
	return nil
}

// newBatchPair connects a, whose LLP holds batches, to b.
func newBatchPair(t *testing.T, cfg QPConfig) (*side, *side, *batchEnd) {
	t.Helper()
	a, b := newPair(t, pairOpts{pipe: llptest.Options{MULPDU: 400}, cfg: cfg, batcher: true})
	return a, b, a.qp.llp.(*batchEnd)
}

func queued(cq *CompletionQueue) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.n
}

// TestPostBatch: a batch's work requests go to the LLP between one Hold
// and its Release, in order; Reads beyond the ORD wait for the send
// goroutine; Sends and Writes complete only after the Release.
func TestPostBatch(t *testing.T) {
	a, b, be := newBatchPair(t, QPConfig{ORD: 2, IRD: 2})
	target := b.reg(t, 4096, RemoteWrite)
	rbuf := b.reg(t, 64, LocalWrite)
	for i := range 2 {
		b.qp.PostRecv(RecvWR{ID: uint64(10 + i), SGL: []SGE{{MR: rbuf, Offset: uint64(32 * i), Length: 32}}})
	}
	src := a.reg(t, 4096, 0)
	fill(src.Bytes(), 3)
	rsrc := b.reg(t, 3000, RemoteRead)
	fill(rsrc.Bytes(), 5)
	sink := a.reg(t, 3000, LocalWrite)
	firstKept := -1
	be.atRelease = func() {
		be.mu.Lock()
		defer be.mu.Unlock()
		if firstKept >= 0 {
			return // the send goroutine's hold of what was queued
		}
		firstKept = len(be.kept)
		if n := queued(a.scq); n != 0 {
			t.Errorf("%d completions before the LLP released the batch", n)
		}
	}
	err := a.qp.PostBatch(func() error {
		if err := a.qp.PostWrite(WriteWR{ID: 1, SGL: []SGE{{MR: src, Length: 2000}}, RemoteSTag: target.STag()}); err != nil {
			return err
		}
		if err := a.qp.PostSend(SendWR{ID: 2, SGL: []SGE{{MR: src, Offset: 100, Length: 20}}}); err != nil {
			return err
		}
		for i := range 3 {
			if err := a.qp.PostRead(ReadWR{ID: uint64(3 + i), Local: SGE{MR: sink, Offset: uint64(1000 * i), Length: 1000}, RemoteSTag: rsrc.STag(), RemoteTO: uint64(1000 * i)}); err != nil {
				return err
			}
		}
		if queued(a.scq) != 0 || be.holds != 0 {
			t.Error("work requests started before the batch ended")
		}
		return a.qp.PostSend(SendWR{ID: 6, SGL: []SGE{{MR: src, Offset: 200, Length: 30}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []WorkOp{WorkWrite, WorkSend, WorkRead, WorkRead, WorkRead, WorkSend}
	for i, op := range want {
		if c := wait(t, a.scq); c.WRID != uint64(i+1) || c.Op != op || c.Status != StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	// The Write (6 segments: 386 octets of payload fit in 400), the Send
	// and two Read Requests (the ORD) were held together; the third Read
	// and the Send after it were sent by the send goroutine.
	if firstKept != 9 {
		t.Errorf("the batch's hold kept %d segments, want 9", firstKept)
	}
	for i := range 2 {
		if c := wait(t, b.rcq); c.WRID != uint64(10+i) || c.Status != StatusSuccess {
			t.Fatalf("receive %d: %+v", i, c)
		}
	}
	if !bytes.Equal(target.Bytes()[:2000], src.Bytes()[:2000]) || !bytes.Equal(rbuf.Bytes()[:20], src.Bytes()[100:120]) ||
		!bytes.Equal(rbuf.Bytes()[32:62], src.Bytes()[200:230]) || !bytes.Equal(sink.Bytes(), rsrc.Bytes()) {
		t.Error("the batch's bytes did not arrive where they belong")
	}
}

// TestPostBatchError: what post posted before its error still starts;
// PostBatch returns the error. Batches nest: only the outermost starts
// the work requests.
func TestPostBatchError(t *testing.T) {
	a, b, be := newBatchPair(t, QPConfig{})
	rbuf := b.reg(t, 64, LocalWrite)
	for i := range 3 {
		b.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: rbuf, Length: 64}}})
	}
	src := a.reg(t, 64, 0)
	stop := errors.New("stop here")
	err := a.qp.PostBatch(func() error {
		a.qp.PostSend(SendWR{ID: 1, SGL: []SGE{{MR: src, Length: 8}}})
		if err := a.qp.PostBatch(func() error {
			return a.qp.PostSend(SendWR{ID: 2, SGL: []SGE{{MR: src, Length: 8}}})
		}); err != nil {
			return err
		}
		if be.holds != 0 {
			t.Error("an inner batch started the work requests")
		}
		a.qp.PostSend(SendWR{ID: 3, SGL: []SGE{{MR: src, Length: 8}}})
		return stop
	})
	if err != stop {
		t.Fatalf("PostBatch returned %v", err)
	}
	for i := range 3 {
		if c := wait(t, a.scq); c.WRID != uint64(i+1) || c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
		if c := wait(t, b.rcq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("receive %+v", c)
		}
	}
	if be.holds != 1 {
		t.Errorf("%d holds, want 1", be.holds)
	}
	// A batch on a queue pair that is not running: post's error, nothing
	// held.
	idle := newSide(t, nil, QPConfig{})
	if err := idle.qp.PostBatch(func() error { return idle.qp.PostSend(SendWR{ID: 1}) }); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("batch on an idle queue pair: %v", err)
	}
}

// TestPostBatchReleaseFails: when the LLP cannot send what it held, the
// stream stops and the held Sends complete with WR_FLUSH_ERR, never
// SUCCESS.
func TestPostBatchReleaseFails(t *testing.T) {
	a, b, be := newBatchPair(t, QPConfig{})
	rbuf := b.reg(t, 64, LocalWrite)
	b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rbuf, Length: 64}}})
	src := a.reg(t, 64, 0)
	be.failWith = errors.New("connection reset")
	a.qp.PostBatch(func() error {
		for i := range 4 {
			a.qp.PostSend(SendWR{ID: uint64(i + 1), SGL: []SGE{{MR: src, Length: 8}}})
		}
		return nil
	})
	for i := range 4 {
		if c := wait(t, a.scq); c.WRID != uint64(i+1) || c.Status != StatusWRFlushErr {
			t.Fatalf("completion %+v", c)
		}
	}
	waitState(t, a.qp, StateTerminating)
}

// TestSendGoroutineBatches: work requests posted while the send side is
// busy queue for the send goroutine, which sends those that can start at
// once in one hold of the LLP; one that must wait for Read Responses is
// not held.
func TestSendGoroutineBatches(t *testing.T) {
	a, b, be := newBatchPair(t, QPConfig{})
	rbuf := b.reg(t, 64*8, LocalWrite)
	for i := range 8 {
		b.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: rbuf, Offset: uint64(64 * i), Length: 64}}})
	}
	src := a.reg(t, 64, 0)
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	be.beforeWrite = func() {
		once.Do(func() {
			close(entered)
			<-gate
		})
	}
	first := make(chan error, 1)
	go func() { first <- a.qp.PostSend(SendWR{ID: 0, SGL: []SGE{{MR: src, Length: 8}}}) }()
	<-entered // the first Send is being written: the send side is busy
	for i := 1; i < 6; i++ {
		if err := a.qp.PostSend(SendWR{ID: uint64(i), SGL: []SGE{{MR: src, Length: 8}}}); err != nil {
			t.Fatal(err)
		}
	}
	kept := -1
	released := make(chan struct{})
	be.atRelease = func() {
		be.mu.Lock()
		kept = len(be.kept)
		be.mu.Unlock()
		if n := queued(a.scq); n != 1 {
			t.Errorf("%d completions before the LLP released the queued Sends, want the first one's", n)
		}
		close(released)
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-released
	for i := range 6 {
		if c := wait(t, a.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
		if c := wait(t, b.rcq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("receive %+v", c)
		}
	}
	if be.holds != 1 || kept != 5 {
		t.Errorf("%d holds keeping %d segments, want 1 keeping the 5 queued Sends", be.holds, kept)
	}
}
