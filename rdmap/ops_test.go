package rdmap

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/term"
)

// Zero-length forms of every operation, with RFC 5040's semantics: a
// zero-length Write places nothing, a zero-length Send consumes a receive
// buffer (§5.3), a zero-length Read returns a zero-length Response
// without validating the source STag (§5.2.1).
func TestZeroLengthOperations(t *testing.T) {
	for _, reorder := range []int{0, 4} {
		a, b := newPair(t, pairOpts{pipe: ddptest.Options{Reorder: reorder}})
		rbuf := b.reg(t, 16, LocalWrite)
		for i := 0; i < 4; i++ {
			b.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: rbuf, Length: 16}}})
		}
		sink := a.reg(t, 16, LocalWrite)
		mustPost(t, a.qp.PostWrite(WriteWR{ID: 1, RemoteSTag: 0xbad0bad0, RemoteTO: ^uint64(0)}))
		mustPost(t, a.qp.PostSend(SendWR{ID: 2}))
		mustPost(t, a.qp.PostSend(SendWR{ID: 3, Solicited: true}))
		mustPost(t, a.qp.PostRead(ReadWR{ID: 4, Local: SGE{MR: sink}, RemoteSTag: 0xbad0bad0}))
		want := []WorkOp{WorkWrite, WorkSend, WorkSend, WorkRead}
		for i, op := range want {
			if c := wait(t, a.scq); c.WRID != uint64(i+1) || c.Op != op || c.Status != StatusSuccess || c.ByteLen != 0 {
				t.Fatalf("completion %+v", c)
			}
		}
		for i := 0; i < 2; i++ {
			if c := wait(t, b.rcq); c.WRID != uint64(i) || c.ByteLen != 0 || c.Status != StatusSuccess {
				t.Fatalf("receive %+v", c)
			}
		}
		if b.qp.State() != StateRunning || a.qp.State() != StateRunning {
			t.Fatal("a zero-length operation stopped the stream")
		}
	}
}

func mustPost(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A Send with Solicited Event and Invalidate invalidates a memory window
// bound with narrower rights; the window's rights and range are enforced.
func TestMemoryWindows(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	mr := b.reg(t, 1000, RemoteWrite|RemoteRead|LocalWrite)
	w, err := mr.BindWindow(100, 50, RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if w.STag() == mr.STag() || w.Base() != 100 || w.Len() != 50 {
		t.Fatalf("window %#x base %d len %d", w.STag(), w.Base(), w.Len())
	}
	if _, err := mr.BindWindow(990, 20, RemoteWrite); !errors.Is(err, ErrBounds) {
		t.Fatalf("window past the region: %v", err)
	}
	ro := b.reg(t, 10, RemoteRead)
	if _, err := ro.BindWindow(0, 5, RemoteWrite); !errors.Is(err, ErrRights) {
		t.Fatalf("window wider than the region: %v", err)
	}
	if err := mr.Deregister(); !errors.Is(err, ErrWindowBound) {
		t.Fatalf("deregister with a window bound: %v", err)
	}
	src := a.reg(t, 64, 0)
	fill(src.Bytes(), 3)
	mustPost(t, a.qp.PostWrite(WriteWR{ID: 1, SGL: []SGE{{MR: src, Length: 50}}, RemoteSTag: w.STag(), RemoteTO: 100}))
	rbuf := b.reg(t, 8, LocalWrite)
	b.qp.PostRecv(RecvWR{ID: 9, SGL: []SGE{{MR: rbuf, Length: 8}}})
	mustPost(t, a.qp.PostSend(SendWR{ID: 2, Solicited: true, Invalidate: true, InvalidateSTag: w.STag()}))
	c := wait(t, b.rcq)
	if c.InvalidatedSTag != w.STag() || c.Flags != FlagInvalidated|FlagSolicited {
		t.Fatalf("receive %+v", c)
	}
	if !bytes.Equal(mr.Bytes()[100:150], src.Bytes()[:50]) {
		t.Fatal("write through the window missing")
	}
	// The window is gone; the region can go now.
	if err := mr.Deregister(); err != nil {
		t.Fatal(err)
	}
	mustPost(t, a.qp.PostWrite(WriteWR{ID: 3, SGL: []SGE{{MR: src, Length: 1}}, RemoteSTag: w.STag(), RemoteTO: 100}))
	waitState(t, b.qp, StateTerminating)
	if !errors.Is(b.qp.Err(), term.DDPInvalidSTag) {
		t.Fatal(b.qp.Err())
	}
}

func TestWindowRightsAndRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   uint64
		n    uint32
		want *term.Error
	}{
		{"past the window", 140, 20, term.DDPBaseBounds},
		{"before the window", 90, 5, term.DDPBaseBounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t, pairOpts{})
			mr := b.reg(t, 1000, RemoteWrite)
			w, _ := mr.BindWindow(100, 50, RemoteWrite)
			src := a.reg(t, 64, 0)
			mustPost(t, a.qp.PostWrite(WriteWR{SGL: []SGE{{MR: src, Length: tc.n}}, RemoteSTag: w.STag(), RemoteTO: tc.to}))
			waitState(t, b.qp, StateTerminating)
			if !errors.Is(b.qp.Err(), tc.want) || !bytes.Equal(mr.Bytes(), make([]byte, 1000)) {
				t.Fatalf("%v", b.qp.Err())
			}
		})
	}
}

func TestLocalInvalidate(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	mr := b.reg(t, 10, RemoteWrite)
	if err := b.pd.Invalidate(mr.STag()); err != nil {
		t.Fatal(err)
	}
	if err := b.pd.Invalidate(mr.STag()); !errors.Is(err, ErrInvalidSTag) {
		t.Fatalf("second invalidate: %v", err)
	}
	other := b.dev.NewProtectionDomain()
	mr2 := b.reg(t, 10, RemoteWrite)
	if err := other.Invalidate(mr2.STag()); !errors.Is(err, ErrWrongPD) {
		t.Fatalf("invalidate from another domain: %v", err)
	}
	// Through the send queue, ordered with other work.
	mine := a.reg(t, 10, LocalWrite)
	mustPost(t, a.qp.PostInvalidate(5, mine.STag(), false))
	mustPost(t, a.qp.PostInvalidate(6, mine.STag(), false))
	if c := wait(t, a.scq); c.WRID != 5 || c.Op != WorkLocalInvalidate || c.Status != StatusSuccess {
		t.Fatalf("%+v", c)
	}
	if c := wait(t, a.scq); c.WRID != 6 || c.Status != StatusInvSTagErr {
		t.Fatalf("%+v", c)
	}
}

func TestSTagAllocation(t *testing.T) {
	dev := NewDevice(DeviceConfig{MaxSTags: 300})
	pd := dev.NewProtectionDomain()
	seen := map[uint32]bool{}
	var last uint32
	sequential := 0
	for i := 0; i < 300; i++ {
		mr, err := pd.RegisterMemory(make([]byte, 1), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := mr.STag()
		if s == 0 || s>>8 == 0 || seen[s>>8] {
			t.Fatalf("STag %#x", s)
		}
		if s>>8 == last>>8+1 {
			sequential++
		}
		seen[s>>8], last = true, s
	}
	if sequential > 3 {
		t.Fatalf("%d of 300 indices followed the previous one: predictable", sequential)
	}
	if _, err := pd.RegisterMemory(make([]byte, 1), 0, 0); !errors.Is(err, ErrTooManySTags) {
		t.Fatalf("over the limit: %v", err)
	}
}

// A domain's limits hold one peer's connection to its share: the domain at
// its limit refuses, another domain of the same device still registers,
// and deregistering (or invalidating a window) gives the room back.
func TestPDLimits(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	a, b := dev.NewProtectionDomain(), dev.NewProtectionDomain()
	a.SetLimits(3, 1000)
	mr1, err := a.RegisterMemory(make([]byte, 600), 0, RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RegisterMemory(make([]byte, 401), 0, RemoteWrite); !errors.Is(err, ErrPDLimit) {
		t.Fatalf("1001 octets in a domain limited to 1000: %v", err)
	}
	mr2, err := a.RegisterMemory(make([]byte, 400), 0, RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	w, err := mr1.BindWindow(0, 100, RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mr2.BindWindow(0, 10, RemoteWrite); !errors.Is(err, ErrPDLimit) {
		t.Fatalf("a fourth STag in a domain limited to 3: %v", err)
	}
	if _, err := b.RegisterMemory(make([]byte, 1<<20), 0, RemoteWrite); err != nil {
		t.Fatalf("another domain of the device: %v", err)
	}
	if err := a.Invalidate(w.STag()); err != nil {
		t.Fatal(err)
	}
	if err := mr2.Deregister(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RegisterMemory(make([]byte, 400), 0, 0); err != nil {
		t.Fatalf("after deregistering: %v", err)
	}
	if _, err := a.RegisterMemory(make([]byte, 1), 0, 0); !errors.Is(err, ErrPDLimit) {
		t.Fatalf("1001 octets again: %v", err)
	}
}

func TestKeyChangesOnReRegistration(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	dev.fixedIndex = 0x123456
	pd := dev.NewProtectionDomain()
	var prev uint32
	for i := 0; i < 300; i++ {
		mr, err := pd.RegisterMemory(make([]byte, 1), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if mr.STag()>>8 != 0x123456 || mr.STag() == prev {
			t.Fatalf("registration %d: STag %#x after %#x", i, mr.STag(), prev)
		}
		prev = mr.STag()
		mr.Deregister()
	}
}

// With ORD 1 the second Read Request waits for the first Response; a
// fenced Write waits for every earlier Read. The responder is a raw peer,
// so the test decides when each Response goes back.
func TestORDAndFence(t *testing.T) { synctest.Test(t, testORDAndFence) }

func testORDAndFence(t *testing.T) {
	ea, eb := ddptest.New(ddptest.Options{})
	peer := &rawPeer{end: ea, got: make(chan struct{}, 16)}
	a := newSide(t, eb, QPConfig{ORD: 1})
	ea.Attach(peer)
	eb.Attach(a.qp.Stream())
	a.qp.Start(eb, ddp.Start{})
	defer ea.Close()
	defer a.qp.Close(context.Background())
	sink := a.reg(t, 100, LocalWrite)
	for i := 0; i < 3; i++ {
		mustPost(t, a.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: sink, Offset: uint64(10 * i), Length: 10}, RemoteSTag: 0x777, RemoteTO: 0}))
	}
	mustPost(t, a.qp.PostWrite(WriteWR{ID: 9, SGL: []SGE{{MR: sink, Length: 10}}, RemoteSTag: 0x777, Fence: true}))
	segs := func() [][]byte {
		synctest.Wait()
		peer.mu.Lock()
		defer peer.mu.Unlock()
		return append([][]byte(nil), peer.segs...)
	}
	for i := 0; i < 3; i++ {
		got := segs()
		if len(got) != i+1 {
			t.Fatalf("after %d responses the peer has %d segments; ORD 1 allows one outstanding Read Request", i, len(got))
		}
		h, hl, _ := ddp.ParseHeader(got[i])
		rr, _, _ := ParseReadRequest(got[i][hl:])
		if Control(h.RsvdULP[0]).Opcode() != OpReadRequest || h.MSN != uint32(i+1) || rr.SinkTO != uint64(10*i) {
			t.Fatalf("segment %d: %v %+v", i, h, rr)
		}
		peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), rr.SinkSTag, rr.SinkTO, fill(make([]byte, 10), byte(i))))
		if c := wait(t, a.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("read %d: %+v", i, c)
		}
	}
	got := segs()
	if len(got) != 4 || Control(got[3][1]).Opcode() != OpWrite {
		t.Fatalf("the fenced Write did not follow the last Response: %d segments", len(got))
	}
	wait(t, a.scq)
}

// gatedPeer is a raw peer that stops reading until the gate opens.
type gatedPeer struct {
	rawPeer
	gate chan struct{}
}

func (p *gatedPeer) Receive(seq uint32, seg []byte) error {
	<-p.gate
	return p.rawPeer.Receive(seq, seg)
}

// A peer that floods Read Requests past the IRD gets DDP "no buffer" on
// queue 1: IRD bounds the responder's work (RFC 5042 §5.3).
func TestIRDEnforced(t *testing.T) {
	ea, eb := ddptest.New(ddptest.Options{Depth: 1})
	peer := &gatedPeer{rawPeer: rawPeer{end: ea, got: make(chan struct{}, 1)}, gate: make(chan struct{})}
	s := newSide(t, eb, QPConfig{IRD: 2})
	ea.Attach(peer)
	eb.Attach(s.qp.Stream())
	s.qp.Start(eb, ddp.Start{})
	defer ea.Close()
	src := s.reg(t, 100, RemoteRead)
	for msn := uint32(1); msn <= 8; msn++ {
		peer.send(t, rrSeg(msn, ReadRequest{SinkSTag: 1, RDMARDSZ: 10, SrcSTag: src.STag()}))
	}
	waitState(t, s.qp, StateTerminating)
	if !errors.Is(s.qp.Err(), term.DDPNoBuffer) {
		t.Fatalf("error %v", s.qp.Err())
	}
	close(peer.gate)
	_, th := peer.terminate(t)
	if !errors.Is(th.Err(), term.DDPNoBuffer) || ddp_QN(th.DDPHeader) != QNReadReq {
		t.Fatalf("Terminate %v for % x", th.Err(), th.DDPHeader)
	}
}

func ddp_QN(h []byte) uint32 { return u32(h[6:10]) }

func TestInlineAndUnsignaled(t *testing.T) {
	a, b := newPair(t, pairOpts{cfg: QPConfig{MaxInline: 16}})
	rbuf := b.reg(t, 32, LocalWrite)
	b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rbuf, Length: 32}}})
	src := a.reg(t, 32, 0)
	copy(src.Bytes(), "inline!")
	mustPost(t, a.qp.PostSend(SendWR{ID: 1, SGL: []SGE{{MR: src, Length: 7}}, Inline: true, Unsignaled: true}))
	copy(src.Bytes(), "changed")
	if err := a.qp.PostSend(SendWR{SGL: []SGE{{MR: src, Length: 17}}, Inline: true}); !errors.Is(err, ErrInlineTooBig) {
		t.Fatalf("oversize inline: %v", err)
	}
	wait(t, b.rcq)
	if string(rbuf.Bytes()[:7]) != "inline!" {
		t.Fatalf("got %q", rbuf.Bytes()[:7])
	}
	mustPost(t, a.qp.PostSend(SendWR{ID: 2}))
	b.qp.PostRecv(RecvWR{ID: 2, SGL: []SGE{{MR: rbuf, Length: 32}}})
	// Only the signaled request completes.
	if c := wait(t, a.scq); c.WRID != 2 {
		t.Fatalf("%+v", c)
	}
}

func TestPostErrors(t *testing.T) {
	a, b := newPair(t, pairOpts{cfg: QPConfig{SendDepth: 1, RecvDepth: 1}})
	other := b.dev.NewProtectionDomain()
	foreign, _ := other.RegisterMemory(make([]byte, 8), 0, LocalWrite)
	noWrite := b.reg(t, 8, 0)
	ok := b.reg(t, 8, LocalWrite)
	for _, tc := range []struct {
		err  error
		want error
	}{
		{b.qp.PostRecv(RecvWR{SGL: []SGE{{MR: foreign, Length: 8}}}), ErrWrongPD},
		{b.qp.PostRecv(RecvWR{SGL: []SGE{{MR: noWrite, Length: 8}}}), ErrRights},
		{b.qp.PostRecv(RecvWR{SGL: []SGE{{MR: ok, Offset: 4, Length: 5}}}), ErrBounds},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("got %v, want %v", tc.err, tc.want)
		}
	}
	mustPost(t, b.qp.PostRecv(RecvWR{SGL: []SGE{{MR: ok, Length: 8}}}))
	if err := b.qp.PostRecv(RecvWR{SGL: []SGE{{MR: ok, Length: 8}}}); !errors.Is(err, ErrRecvQueue) {
		t.Errorf("recv queue overflow: %v", err)
	}
	src := a.reg(t, 8, 0)
	src.Deregister()
	if err := a.qp.PostSend(SendWR{SGL: []SGE{{MR: src, Length: 1}}}); !errors.Is(err, ErrInvalidSTag) {
		t.Errorf("deregistered source: %v", err)
	}
}

func TestSharedReceiveQueue(t *testing.T) {
	// Two initiators, one target device whose two queue pairs share an SRQ.
	var mu sync.Mutex
	var events []AsyncEvent
	dev := NewDevice(DeviceConfig{OnEvent: func(e AsyncEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	pd := dev.NewProtectionDomain()
	rcq := dev.NewCompletionQueue(64)
	srq := pd.NewSharedReceiveQueue(8)
	buf, _ := pd.RegisterMemory(make([]byte, 64*4), 0, LocalWrite)
	for i := 0; i < 4; i++ {
		mustPost(t, srq.PostRecv(RecvWR{ID: uint64(100 + i), SGL: []SGE{{MR: buf, Offset: uint64(i * 64), Length: 64}}}))
	}
	srq.SetLimit(3)
	var inits []*side
	var targets []*QueuePair
	for k := 0; k < 2; k++ {
		a, qp := targetPair(t, pd, QPConfig{SendCQ: dev.NewCompletionQueue(8), RecvCQ: rcq, SRQ: srq})
		inits, targets = append(inits, a), append(targets, qp)
		if err := qp.PostRecv(RecvWR{}); err == nil {
			t.Fatal("PostRecv on an SRQ queue pair")
		}
	}
	for k, a := range inits {
		src := a.reg(t, 8, 0)
		copy(src.Bytes(), []byte{byte('A' + k)})
		mustPost(t, a.qp.PostSend(SendWR{SGL: []SGE{{MR: src, Length: 1}}}))
		c := wait(t, rcq)
		if c.QP != targets[k] || c.WRID != uint64(100+k) || buf.Bytes()[k*64] != byte('A'+k) {
			t.Fatalf("receive %+v", c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Type != EventSRQLimitReached || srq.Len() != 2 {
		t.Fatalf("events %+v, %d left", events, srq.Len())
	}
}

func TestArmSolicitedOnly(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	rbuf := b.reg(t, 8, LocalWrite)
	for i := 0; i < 2; i++ {
		b.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: rbuf, Length: 8}}})
	}
	b.rcq.Arm(true)
	mustPost(t, a.qp.PostSend(SendWR{ID: 1}))
	wait(t, b.rcq)
	select {
	case <-b.rcq.Notify():
		t.Fatal("notified for an unsolicited Send")
	case <-time.After(20 * time.Millisecond):
	}
	mustPost(t, a.qp.PostSend(SendWR{ID: 2, Solicited: true}))
	select {
	case <-b.rcq.Notify():
	case <-time.After(5 * time.Second):
		t.Fatal("no notification for a solicited Send")
	}
}

// A graceful close drains outstanding work first.
func TestCloseDrains(t *testing.T) {
	a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 100}})
	target := b.reg(t, 1<<16, RemoteWrite)
	src := a.reg(t, 1<<16, 0)
	for i := 0; i < 20; i++ {
		mustPost(t, a.qp.PostWrite(WriteWR{ID: uint64(i), SGL: []SGE{{MR: src, Length: 1 << 16}}, RemoteSTag: target.STag()}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.qp.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var cs [32]Completion
	n := a.scq.Poll(cs[:])
	if n != 20 {
		t.Fatalf("%d completions", n)
	}
	for _, c := range cs[:n] {
		if c.Status != StatusSuccess {
			t.Fatalf("%+v", c)
		}
	}
}

// A fenced request waits for every earlier Read to complete; an unfenced
// one does not.
func TestFence(t *testing.T) { synctest.Test(t, testFence) }

func testFence(t *testing.T) {
	ea, eb := ddptest.New(ddptest.Options{})
	peer := &rawPeer{end: ea, got: make(chan struct{}, 16)}
	a := newSide(t, eb, QPConfig{ORD: 8})
	ea.Attach(peer)
	eb.Attach(a.qp.Stream())
	a.qp.Start(eb, ddp.Start{})
	defer ea.Close()
	defer a.qp.Close(context.Background())
	sink := a.reg(t, 100, LocalWrite)
	count := func() int {
		synctest.Wait()
		peer.mu.Lock()
		defer peer.mu.Unlock()
		return len(peer.segs)
	}
	mustPost(t, a.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: sink, Length: 10}, RemoteSTag: 0x777}))
	mustPost(t, a.qp.PostWrite(WriteWR{ID: 2, SGL: []SGE{{MR: sink, Length: 10}}, RemoteSTag: 0x777}))
	if n := count(); n != 2 {
		t.Fatalf("unfenced Write: %d segments, want the Read Request and the Write", n)
	}
	mustPost(t, a.qp.PostSend(SendWR{ID: 3, Fence: true}))
	if n := count(); n != 2 {
		t.Fatalf("the fenced Send went before the Read completed (%d segments)", n)
	}
	peer.mu.Lock()
	rr, _, _ := ParseReadRequest(peer.segs[0][ddp.UntaggedHeaderLen:])
	peer.mu.Unlock()
	peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), rr.SinkSTag, rr.SinkTO, make([]byte, 10)))
	if n := count(); n != 3 {
		t.Fatalf("the fenced Send did not follow the Read's completion (%d segments)", n)
	}
	for i := 1; i <= 3; i++ {
		if c := wait(t, a.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("%+v", c)
		}
	}
}

// A completion queue set to poll before sleeping still hands out every
// completion, whether it arrives during the polling or after.
func TestCQSpin(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	a.scq.SetSpin(2 * time.Millisecond)
	target := b.reg(t, 8, RemoteWrite)
	src := a.reg(t, 8, 0)
	for i := 0; i < 20; i++ {
		mustPost(t, a.qp.PostWrite(WriteWR{ID: uint64(i), SGL: []SGE{{MR: src, Length: 8}}, RemoteSTag: target.STag()}))
		if c := wait(t, a.scq); c.WRID != uint64(i) {
			t.Fatalf("%+v", c)
		}
	}
	go func() {
		// Once the waiter has polled its while and sleeps.
		waitfor.Until(5*time.Second, func() bool {
			a.scq.mu.Lock()
			defer a.scq.mu.Unlock()
			return a.scq.sleepers > 0
		})
		a.qp.PostWrite(WriteWR{ID: 99, SGL: []SGE{{MR: src, Length: 8}}, RemoteSTag: target.STag()})
	}()
	if c := wait(t, a.scq); c.WRID != 99 {
		t.Fatalf("%+v", c)
	}
}

// A peer may not invalidate an STag enabled for remote access that
// several streams share (RFC 5040 §8.1.1 item 7): here, one whose
// protection domain has two queue pairs.
func TestRemoteInvalidateSharedSTag(t *testing.T) {
	c := newCrafted(t)
	// A second queue pair in the same domain shares every STag of it.
	c.otherQP(t)
	c.peer.send(t, untaggedSeg(byte(MakeControl(OpSendInvalidate)), c.src.STag(), 0, 1, []byte("x")))
	_, th := c.peer.terminate(t)
	if !errors.Is(th.Err(), term.RDMAPProtCannotInvalidate) {
		t.Fatalf("Terminate %v", th.Err())
	}
	// The STag is still valid: the Write that follows on another stream
	// could still use it.
	if _, f := c.dev.lookup(c.qp, c.src.STag(), RemoteWrite); f != stagOK {
		t.Fatalf("the shared STag was invalidated: %v", f.ddp())
	}
	// Locally it can be invalidated.
	if err := c.pd.Invalidate(c.src.STag()); err != nil {
		t.Fatal(err)
	}
}

// A Send's Data needs no registered memory: it is copied at the post, so
// the slice may change at once; it is bounded by MaxInline and excludes
// an SGL.
func TestSendData(t *testing.T) {
	a, b := newPair(t, pairOpts{cfg: QPConfig{MaxInline: 16}})
	rbuf := b.reg(t, 32, LocalWrite)
	b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rbuf, Length: 32}}})
	msg := []byte("by value")
	mustPost(t, a.qp.PostSend(SendWR{ID: 1, Data: msg}))
	copy(msg, "changed!")
	if c := wait(t, b.rcq); c.Status != StatusSuccess || c.ByteLen != 8 || string(rbuf.Bytes()[:8]) != "by value" {
		t.Fatalf("%+v, %q", c, rbuf.Bytes()[:8])
	}
	if c := wait(t, a.scq); c.WRID != 1 || c.Status != StatusSuccess {
		t.Fatalf("%+v", c)
	}
	if err := a.qp.PostSend(SendWR{Data: make([]byte, 17)}); !errors.Is(err, ErrInlineTooBig) {
		t.Fatalf("17 octets of Data: %v", err)
	}
	src := a.reg(t, 8, 0)
	if err := a.qp.PostSend(SendWR{Data: msg, SGL: []SGE{{MR: src, Length: 8}}}); err == nil {
		t.Fatal("a Send with Data and an SGL was posted")
	}
}
