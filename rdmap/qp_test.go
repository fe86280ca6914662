package rdmap

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/internal/leaktest"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/term"
)

// side is one end of a test connection.
type side struct {
	dev    *Device
	pd     *ProtectionDomain
	scq    *CompletionQueue
	rcq    *CompletionQueue
	qp     *QueuePair
	end    *ddptest.End
	mu     sync.Mutex
	events []AsyncEvent
}

func (s *side) Events() []AsyncEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AsyncEvent(nil), s.events...)
}

type pairOpts struct {
	pipe ddptest.Options
	cfg  QPConfig
	// hold: the first side's LLP keeps segments until Flush (holdEnd).
	hold bool
}

func newSide(t testing.TB, end *ddptest.End, cfg QPConfig) *side {
	s := &side{end: end}
	s.dev = NewDevice(DeviceConfig{OnEvent: func(e AsyncEvent) { s.mu.Lock(); s.events = append(s.events, e); s.mu.Unlock() }})
	s.pd = s.dev.NewProtectionDomain()
	s.scq, s.rcq = s.dev.NewCompletionQueue(4096), s.dev.NewCompletionQueue(4096)
	cfg.SendCQ, cfg.RecvCQ = s.scq, s.rcq
	qp, err := s.pd.NewQueuePair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.qp = qp
	return s
}

// targetPair connects a fresh initiator side to a queue pair made in pd
// with cfg: several targets can then share one device's resources (a
// shared receive queue, a completion queue).
func targetPair(t testing.TB, pd *ProtectionDomain, cfg QPConfig) (*side, *QueuePair) {
	t.Helper()
	ea, eb := ddptest.New(ddptest.Options{})
	a := newSide(t, ea, QPConfig{})
	qp, err := pd.NewQueuePair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ea.Attach(a.qp.Stream())
	eb.Attach(qp.Stream())
	a.qp.Start(ea, ddp.Start{})
	qp.Start(eb, ddp.Start{})
	t.Cleanup(func() { ea.Close() })
	return a, qp
}

func newPair(t testing.TB, o pairOpts) (*side, *side) {
	t.Helper()
	ea, eb := ddptest.New(o.pipe)
	if o.cfg.Window == 0 && o.pipe.Reorder > 1 {
		o.cfg.Window = o.pipe.Depth + 1
		if o.cfg.Window == 1 {
			o.cfg.Window = 257
		}
	}
	a, b := newSide(t, ea, o.cfg), newSide(t, eb, o.cfg)
	ea.Attach(a.qp.Stream())
	eb.Attach(b.qp.Stream())
	var llp ddp.LLP = ea
	if o.hold {
		llp = &holdEnd{End: ea}
	}
	if err := a.qp.Start(llp, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Start(eb, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		a.qp.Close(ctx)
		b.qp.Close(ctx)
	})
	return a, b
}

func (s *side) reg(t testing.TB, n int, access Access) *MemoryRegion {
	t.Helper()
	mr, err := s.pd.RegisterMemory(make([]byte, n), 0, access)
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

func wait(t testing.TB, cq *CompletionQueue) Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cq.Wait(ctx)
	if err != nil {
		t.Fatalf("no completion: %v", err)
	}
	return c
}

func fill(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestWriteThenSend(t *testing.T) {
	for _, reorder := range []int{0, 8} {
		a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 300, Reorder: reorder, Seed: 3}})
		target := b.reg(t, 10000, RemoteWrite|LocalWrite)
		rbuf := b.reg(t, 100, LocalWrite)
		if err := b.qp.PostRecv(RecvWR{ID: 77, SGL: []SGE{{MR: rbuf, Length: 100}}}); err != nil {
			t.Fatal(err)
		}
		src := a.reg(t, 5000, 0)
		fill(src.Bytes(), 1)
		if err := a.qp.PostWrite(WriteWR{ID: 1, SGL: []SGE{{MR: src, Length: 2000}, {MR: src, Offset: 3000, Length: 2000}}, RemoteSTag: target.STag(), RemoteTO: 100}); err != nil {
			t.Fatal(err)
		}
		copy(src.Bytes()[2500:], "hello")
		if err := a.qp.PostSend(SendWR{ID: 2, SGL: []SGE{{MR: src, Offset: 2500, Length: 5}}}); err != nil {
			t.Fatal(err)
		}
		if c := wait(t, a.scq); c.WRID != 1 || c.Op != WorkWrite || c.Status != StatusSuccess || c.ByteLen != 4000 {
			t.Fatalf("write completion %+v", c)
		}
		if c := wait(t, a.scq); c.WRID != 2 || c.Op != WorkSend || c.Status != StatusSuccess {
			t.Fatalf("send completion %+v", c)
		}
		c := wait(t, b.rcq)
		if c.WRID != 77 || c.Op != WorkRecv || c.ByteLen != 5 || c.Status != StatusSuccess || string(rbuf.Bytes()[:5]) != "hello" {
			t.Fatalf("recv completion %+v", c)
		}
		// The Send was delivered, so the Write before it is placed (RFC
		// 5040 §5.5 rule 10).
		want := append(append([]byte(nil), src.Bytes()[:2000]...), src.Bytes()[3000:5000]...)
		if !bytes.Equal(target.Bytes()[100:4100], want) {
			t.Fatal("written bytes differ")
		}
	}
}

func TestRead(t *testing.T) {
	a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 500, Reorder: 5, Seed: 9}})
	src := b.reg(t, 8192, RemoteRead)
	fill(src.Bytes(), 9)
	sink := a.reg(t, 8192, LocalWrite)
	for i := 0; i < 20; i++ {
		if err := a.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: sink, Offset: uint64(i * 400), Length: 400}, RemoteSTag: src.STag(), RemoteTO: uint64(i * 400)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		if c := wait(t, a.scq); c.WRID != uint64(i) || c.Op != WorkRead || c.Status != StatusSuccess || c.ByteLen != 400 {
			t.Fatalf("read completion %+v", c)
		}
	}
	if !bytes.Equal(sink.Bytes()[:8000], src.Bytes()[:8000]) {
		t.Fatal("read bytes differ")
	}
	// A zero-length Read completes too, without touching memory.
	if err := a.qp.PostRead(ReadWR{ID: 99, Local: SGE{MR: sink}, RemoteSTag: 0xdead}); err != nil {
		t.Fatal(err)
	}
	if c := wait(t, a.scq); c.WRID != 99 || c.Status != StatusSuccess || c.ByteLen != 0 {
		t.Fatalf("zero-length read %+v", c)
	}
	// "A valid RDMA Read Request Message MUST NOT be delivered to the Data
	// Sink's ULP" (RFC 5040 §5.2.1): the responder answered 21 Read
	// Requests and its completion queues hold nothing.
	if n := b.rcq.Poll(make([]Completion, 32)) + b.scq.Poll(make([]Completion, 32)); n != 0 {
		t.Fatalf("the responder's ULP got %d completions for Read Requests", n)
	}
}

func TestSendWithInvalidate(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	target := b.reg(t, 64, RemoteWrite)
	rbuf := b.reg(t, 64, LocalWrite)
	b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rbuf, Length: 64}}})
	src := a.reg(t, 64, 0)
	b.rcq.Arm(true)
	if err := a.qp.PostSend(SendWR{ID: 5, Solicited: true, Invalidate: true, InvalidateSTag: target.STag(), SGL: []SGE{{MR: src, Length: 10}}}); err != nil {
		t.Fatal(err)
	}
	c := wait(t, b.rcq)
	if c.Flags&FlagInvalidated == 0 || c.InvalidatedSTag != target.STag() || c.Flags&FlagSolicited == 0 || c.ByteLen != 10 {
		t.Fatalf("completion %+v", c)
	}
	select {
	case <-b.rcq.Notify():
	case <-time.After(time.Second):
		t.Fatal("no solicited event")
	}
	// The STag is gone: a Write to it is refused with DDP Invalid STag.
	a.qp.PostWrite(WriteWR{ID: 6, SGL: []SGE{{MR: src, Length: 8}}, RemoteSTag: target.STag()})
	wait(t, a.scq) // the Write completes locally
	waitState(t, b.qp, StateTerminating)
	if !errors.Is(b.qp.Err(), term.DDPInvalidSTag) {
		t.Fatalf("target error %v", b.qp.Err())
	}
	waitState(t, a.qp, StateTerminating)
	if e := a.qp.Err(); !errors.Is(e, term.DDPInvalidSTag) || !e.(*term.Error).Remote {
		t.Fatalf("initiator error %v", e)
	}
}

// eventually polls cond every millisecond for up to five seconds and
// reports whether it became true.
func eventually(cond func() bool) bool {
	return waitfor.Until(5*time.Second, cond)
}

func waitState(t testing.TB, qp *QueuePair, want State) {
	t.Helper()
	if !eventually(func() bool { return qp.State() == want }) {
		t.Fatalf("state %v, want %v", qp.State(), want)
	}
}

func TestFlushOnTerminate(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	rbufA := a.reg(t, 64, LocalWrite)
	for i := 0; i < 3; i++ {
		a.qp.PostRecv(RecvWR{ID: uint64(100 + i), SGL: []SGE{{MR: rbufA, Length: 64}}})
	}
	src := a.reg(t, 64, 0)
	// A Send to b, which has no receive buffer: DDP no buffer (0x2/0x02).
	a.qp.PostSend(SendWR{ID: 1, SGL: []SGE{{MR: src, Length: 4}}})
	waitState(t, b.qp, StateTerminating)
	waitState(t, a.qp, StateTerminating)
	if !errors.Is(a.qp.Err(), term.DDPNoBuffer) || !errors.Is(b.qp.Err(), term.DDPNoBuffer) {
		t.Fatalf("errors %v / %v", a.qp.Err(), b.qp.Err())
	}
	// a's posted receives are flushed, in order.
	for i := 0; i < 3; i++ {
		if c := wait(t, a.rcq); c.Status != StatusWRFlushErr || c.WRID != uint64(100+i) {
			t.Fatalf("flush %+v", c)
		}
	}
	if err := a.qp.PostSend(SendWR{ID: 2}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("post after terminate: %v", err)
	}
	ev := a.Events()
	if len(ev) != 1 || ev[0].Type != EventStreamError {
		t.Fatalf("events %+v", ev)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	leaktest.Check(t)
	for i := 0; i < 5; i++ {
		ea, eb := ddptest.New(ddptest.Options{})
		a, b := newSide(t, ea, QPConfig{}), newSide(t, eb, QPConfig{})
		ea.Attach(a.qp.Stream())
		eb.Attach(b.qp.Stream())
		a.qp.Start(ea, ddp.Start{})
		b.qp.Start(eb, ddp.Start{})
		rb := b.reg(t, 8, LocalWrite)
		b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rb, Length: 8}}})
		b.qp.PostRecv(RecvWR{ID: 2, SGL: []SGE{{MR: rb, Length: 8}}})
		a.qp.PostSend(SendWR{ID: 1})
		wait(t, b.rcq)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a.qp.Close(ctx)
		b.qp.Close(ctx)
		cancel()
		if c := wait(t, b.rcq); c.WRID != 2 || c.Status != StatusWRFlushErr {
			t.Fatalf("close flush %+v", c)
		}
		if a.qp.State() != StateClosed {
			t.Fatal(a.qp.State())
		}
	}
}
