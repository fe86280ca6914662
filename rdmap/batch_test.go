package rdmap

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/iwarpgo/iwarp/ddp/ddptest"
)

// holdEnd is a pipe end that keeps every segment until Flush, by
// reference as MPA's gather list does, and sends them then: what the send
// goroutine hands over between two flushes is visible as one flush.
type holdEnd struct {
	*ddptest.End
	mu       sync.Mutex
	kept     []keptSegment
	flushes  []int // segments sent by each Flush that sent any
	failWith error
	// atFlush, if set, runs at the start of every Flush; beforeWrite at
	// the start of every WriteSegment.
	atFlush     func()
	beforeWrite func()
}

type keptSegment struct {
	hdr     []byte
	payload [][]byte
}

func (e *holdEnd) WriteSegment(hdr []byte, payload [][]byte) error {
	if e.beforeWrite != nil {
		e.beforeWrite()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kept = append(e.kept, keptSegment{append([]byte(nil), hdr...), append([][]byte(nil), payload...)})
	return nil
}

func (e *holdEnd) Flush() error {
	if e.atFlush != nil {
		e.atFlush()
	}
	e.mu.Lock()
	kept := e.kept
	e.kept = nil
	fail := e.failWith
	if len(kept) > 0 {
		e.flushes = append(e.flushes, len(kept))
	}
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

func (e *holdEnd) flushed() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.flushes...)
}

// newHoldPair connects a, whose LLP holds segments until Flush, to b.
func newHoldPair(t *testing.T, cfg QPConfig) (*side, *side, *holdEnd) {
	t.Helper()
	a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 400}, cfg: cfg, hold: true})
	return a, b, a.qp.llp.(*holdEnd)
}

func queued(cq *CompletionQueue) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.n
}

// TestPostBatch: a batch's work requests reach the LLP together, in
// order, and leave in one flush; Reads beyond the ORD wait for Read
// Responses; Sends and Writes complete only after the flush.
func TestPostBatch(t *testing.T) {
	a, b, he := newHoldPair(t, QPConfig{ORD: 2, IRD: 2})
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
	var once sync.Once
	he.atFlush = func() {
		once.Do(func() {
			if n := queued(a.scq); n != 0 {
				t.Errorf("%d completions before the LLP flushed the batch", n)
			}
		})
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
		if queued(a.scq) != 0 || len(he.flushed()) != 0 {
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
	// and two Read Requests (the ORD) left in one flush; the third Read
	// and the Send after it waited for a Read Response.
	if f := he.flushed(); len(f) == 0 || f[0] != 9 {
		t.Errorf("flushes of %v segments, want the first of 9", f)
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
	a, b, he := newHoldPair(t, QPConfig{})
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
		if len(he.flushed()) != 0 {
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
	if f := he.flushed(); len(f) != 1 || f[0] != 3 {
		t.Errorf("flushes of %v segments, want one of 3", f)
	}
	// A batch on a queue pair that is not running: post's error.
	idle := newSide(t, nil, QPConfig{})
	if err := idle.qp.PostBatch(func() error { return idle.qp.PostSend(SendWR{ID: 1}) }); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("batch on an idle queue pair: %v", err)
	}
}

// TestFlushFails: when the LLP cannot send what it kept, the stream stops
// and the Sends it kept complete with WR_FLUSH_ERR, never SUCCESS.
func TestFlushFails(t *testing.T) {
	a, b, he := newHoldPair(t, QPConfig{})
	rbuf := b.reg(t, 64, LocalWrite)
	b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rbuf, Length: 64}}})
	src := a.reg(t, 64, 0)
	he.failWith = errors.New("connection reset")
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

// TestSendSideGathers: work requests posted while the send side is busy
// (here a posting goroutine that sends its Send itself) wait for it, and
// it hands them to the LLP together, in one flush.
func TestSendSideGathers(t *testing.T) {
	a, b, he := newHoldPair(t, QPConfig{})
	rbuf := b.reg(t, 64*8, LocalWrite)
	for i := range 8 {
		b.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: rbuf, Offset: uint64(64 * i), Length: 64}}})
	}
	src := a.reg(t, 64, 0)
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	he.beforeWrite = func() {
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
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if c := wait(t, a.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
		if c := wait(t, b.rcq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("receive %+v", c)
		}
	}
	if f := he.flushed(); len(f) != 2 || f[0] != 1 || f[1] != 5 {
		t.Errorf("flushes of %v segments, want the first Send's and then the 5 queued behind it", f)
	}
}

// A batch of RDMA Read Requests leaves in one flush however much the
// Reads will bring: the send route's bound on what one flush carries
// (maxBatchBytes) counts the octets the LLP reads from memory, and a
// Read Request carries none. Counting the Reads' lengths had cut a
// window of 32 Reads of 64 KiB into two flushes of 16.
func TestReadRequestsGather(t *testing.T) {
	const n, size = maxBatch, 64 << 10
	a, b, he := newHoldPair(t, QPConfig{ORD: n, IRD: n})
	rsrc := b.reg(t, size, RemoteRead)
	fill(rsrc.Bytes(), 7)
	sink := a.reg(t, n*size, LocalWrite)
	err := a.qp.PostBatch(func() error {
		for i := range n {
			if err := a.qp.PostRead(ReadWR{ID: uint64(i + 1), Local: SGE{MR: sink, Offset: uint64(i * size), Length: size},
				RemoteSTag: rsrc.STag(), Unsignaled: i < n-1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := wait(t, a.scq); c.WRID != n || c.Status != StatusSuccess {
		t.Fatalf("completion: %+v", c)
	}
	if f := he.flushed(); len(f) == 0 || f[0] != n {
		t.Errorf("flushes of %v segments, want the first of %d", f, n)
	}
	for i := range n {
		if !bytes.Equal(sink.Bytes()[i*size:(i+1)*size], rsrc.Bytes()) {
			t.Fatalf("Read %d brought other octets", i)
		}
	}
}
