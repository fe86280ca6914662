// Package rdmaptest holds what the transports' tests share: an RDMAP
// endpoint (device, protection domain, completion queues, queue pair) and
// Exercise, which runs every RDMAP operation between two connected
// endpoints and checks every byte and completion. Each transport (MPA over
// TCP, DDP over SCTP, WebRTC data channels) connects two Peers its own way
// and calls Exercise.
package rdmaptest

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// Peer is one side's verbs resources.
type Peer struct {
	Dev      *rdmap.Device
	PD       *rdmap.ProtectionDomain
	SCQ, RCQ *rdmap.CompletionQueue
	QP       *rdmap.QueuePair
	// Events receives the device's asynchronous events (the oldest 64
	// that nobody took).
	Events chan rdmap.AsyncEvent
}

// NewPeer makes a Peer whose queue pair has cfg (its completion queues
// are filled in); the queue pair is closed when the test ends.
func NewPeer(t testing.TB, cfg rdmap.QPConfig) *Peer {
	t.Helper()
	p := &Peer{Events: make(chan rdmap.AsyncEvent, 64)}
	p.Dev = rdmap.NewDevice(rdmap.DeviceConfig{OnEvent: func(e rdmap.AsyncEvent) {
		select {
		case p.Events <- e:
		default:
		}
	}})
	p.PD = p.Dev.NewProtectionDomain()
	p.SCQ, p.RCQ = p.Dev.NewCompletionQueue(1024), p.Dev.NewCompletionQueue(1024)
	cfg.SendCQ, cfg.RecvCQ = p.SCQ, p.RCQ
	qp, err := p.PD.NewQueuePair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.QP = qp
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		qp.Close(ctx)
	})
	return p
}

// Reg registers n zeroed octets at Tagged Offset 0 with the given rights.
func (p *Peer) Reg(t testing.TB, n int, a rdmap.Access) *rdmap.MemoryRegion {
	t.Helper()
	mr, err := p.PD.RegisterMemory(make([]byte, n), 0, a)
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

// Wait returns the next completion of cq, failing the test (with every
// goroutine's stack, to show what hangs) after 10 seconds.
func Wait(t testing.TB, cq *rdmap.CompletionQueue) rdmap.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cq.Wait(ctx)
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("no completion: %v\n%s", err, buf[:runtime.Stack(buf, true)])
	}
	return c
}

// Fill writes a pattern that depends on seed into b and returns it.
func Fill(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*11)
	}
	return b
}

// Exercise runs every RDMAP operation from a to b over whatever connects
// them — RDMA Write (1 MiB, and zero-length to an STag that does not
// exist, which must not be checked), Send, Send with Solicited Event,
// RDMA Read (1 MiB, and zero-length), Send with Invalidate, Send with
// Solicited Event and Invalidate — then a Send back from b to a, and
// checks every completion, flag and byte.
func Exercise(t testing.TB, a, b *Peer) {
	t.Helper()
	target := b.Reg(t, 1<<20, rdmap.RemoteWrite|rdmap.RemoteRead)
	rbuf := b.Reg(t, 4096, rdmap.LocalWrite)
	for i := 0; i < 4; i++ {
		must(t, b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(i * 1024), Length: 1024}}}))
	}
	inv := b.Reg(t, 64, rdmap.RemoteWrite)
	src := a.Reg(t, 1<<20, 0)
	Fill(src.Bytes(), 7)
	sink := a.Reg(t, 1<<20, rdmap.LocalWrite)

	must(t, a.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 1 << 20}}, RemoteSTag: target.STag()}))
	must(t, a.QP.PostWrite(rdmap.WriteWR{ID: 2, RemoteSTag: 0xdeadbeef}))
	must(t, a.QP.PostSend(rdmap.SendWR{ID: 3, SGL: []rdmap.SGE{{MR: src, Length: 1000}}}))
	must(t, a.QP.PostSend(rdmap.SendWR{ID: 4, Solicited: true}))
	must(t, a.QP.PostRead(rdmap.ReadWR{ID: 5, Local: rdmap.SGE{MR: sink, Length: 1 << 20}, RemoteSTag: target.STag()}))
	must(t, a.QP.PostRead(rdmap.ReadWR{ID: 6, Local: rdmap.SGE{MR: sink}, RemoteSTag: 0x1}))
	must(t, a.QP.PostSend(rdmap.SendWR{ID: 7, Invalidate: true, InvalidateSTag: inv.STag(), SGL: []rdmap.SGE{{MR: src, Length: 10}}}))
	// The Send that invalidates the STag the Read reads waits for the
	// Read: "RDMA Read Response Messages MAY be generated at the Remote
	// Peer after subsequent RDMA Write Messages or Send Messages have been
	// Placed or Delivered" (RFC 5040 §5.5 rule 12), and a Response not yet
	// generated when its STag is invalidated is not sent.
	must(t, a.QP.PostSend(rdmap.SendWR{ID: 8, Solicited: true, Invalidate: true, InvalidateSTag: target.STag(), Fence: true}))
	for i := 1; i <= 8; i++ {
		if c := Wait(t, a.SCQ); c.WRID != uint64(i) || c.Status != rdmap.StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	if !bytes.Equal(sink.Bytes(), src.Bytes()) {
		t.Fatal("the RDMA Read's bytes differ")
	}
	want := []struct {
		n     uint32
		flags uint8
		inv   uint32
	}{{1000, 0, 0}, {0, rdmap.FlagSolicited, 0}, {10, rdmap.FlagInvalidated, inv.STag()}, {0, rdmap.FlagInvalidated | rdmap.FlagSolicited, target.STag()}}
	for i, w := range want {
		c := Wait(t, b.RCQ)
		if c.WRID != uint64(i) || c.Status != rdmap.StatusSuccess || c.ByteLen != w.n || c.Flags != w.flags || c.InvalidatedSTag != w.inv {
			t.Fatalf("receive %d: %+v", i, c)
		}
	}
	// The target's memory is read only now, after its receive completions:
	// the Sends were delivered after the Write was placed (RFC 5040 §5.5
	// rule 10), and the completion queue orders this goroutine after the
	// placing one.
	if !bytes.Equal(target.Bytes(), src.Bytes()) {
		t.Fatal("the RDMA Write's bytes differ")
	}
	if !bytes.Equal(rbuf.Bytes()[:1000], src.Bytes()[:1000]) {
		t.Fatal("the Send's bytes differ")
	}
	// The other way: a Send from b to a.
	abuf := a.Reg(t, 16, rdmap.LocalWrite)
	must(t, a.QP.PostRecv(rdmap.RecvWR{ID: 9, SGL: []rdmap.SGE{{MR: abuf, Length: 16}}}))
	bsrc := b.Reg(t, 16, 0)
	copy(bsrc.Bytes(), "pong")
	must(t, b.QP.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: bsrc, Length: 4}}}))
	if c := Wait(t, a.RCQ); c.WRID != 9 || c.ByteLen != 4 || string(abuf.Bytes()[:4]) != "pong" {
		t.Fatalf("receive at the initiator: %+v", c)
	}
	exerciseBatch(t, a, b, target, rbuf, src, sink)
}

// exerciseBatch posts Writes, Sends and Reads as one batch
// (QueuePair.PostBatch): they complete in order, and their bytes land
// where they belong.
func exerciseBatch(t testing.TB, a, b *Peer, target, rbuf, src, sink *rdmap.MemoryRegion) {
	t.Helper()
	Fill(src.Bytes(), 11)
	clear(sink.Bytes())
	for i := 0; i < 4; i++ {
		must(t, b.QP.PostRecv(rdmap.RecvWR{ID: uint64(10 + i), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(i * 1024), Length: 1024}}}))
	}
	// A second STag on the target: the Sends with Invalidate above
	// invalidated the first.
	target2, err := b.PD.RegisterMemory(target.Bytes(), 0, rdmap.RemoteWrite|rdmap.RemoteRead)
	must(t, err)
	ops := []rdmap.WorkOp{}
	must(t, a.QP.PostBatch(func() error {
		for i := 0; i < 3; i++ {
			off := uint64(i) << 16
			if err := a.QP.PostWrite(rdmap.WriteWR{ID: uint64(len(ops)), SGL: []rdmap.SGE{{MR: src, Offset: off, Length: 1 << 16}}, RemoteSTag: target2.STag(), RemoteTO: off}); err != nil {
				return err
			}
			ops = append(ops, rdmap.WorkWrite)
			if err := a.QP.PostSend(rdmap.SendWR{ID: uint64(len(ops)), SGL: []rdmap.SGE{{MR: src, Offset: off, Length: 100}}}); err != nil {
				return err
			}
			ops = append(ops, rdmap.WorkSend)
		}
		// They read what the Writes wrote: their Requests reach the peer
		// after the Writes.
		for i := 0; i < 3; i++ {
			off := uint64(i) << 16
			if err := a.QP.PostRead(rdmap.ReadWR{ID: uint64(len(ops)), Local: rdmap.SGE{MR: sink, Offset: off, Length: 1 << 16}, RemoteSTag: target2.STag(), RemoteTO: off}); err != nil {
				return err
			}
			ops = append(ops, rdmap.WorkRead)
		}
		// A fenced Send waits for the Reads' Responses.
		err := a.QP.PostSend(rdmap.SendWR{ID: uint64(len(ops)), SGL: []rdmap.SGE{{MR: src, Length: 100}}, Fence: true})
		ops = append(ops, rdmap.WorkSend)
		return err
	}))
	for i, op := range ops {
		if c := Wait(t, a.SCQ); c.WRID != uint64(i) || c.Op != op || c.Status != rdmap.StatusSuccess {
			t.Fatalf("batch completion %d: %+v", i, c)
		}
	}
	for i := 0; i < 4; i++ {
		off := (i % 3) << 16 // the fenced Send is the first 100 octets again
		if c := Wait(t, b.RCQ); c.WRID != uint64(10+i) || c.Status != rdmap.StatusSuccess || c.ByteLen != 100 ||
			!bytes.Equal(rbuf.Bytes()[i*1024:i*1024+100], src.Bytes()[off:off+100]) {
			t.Fatalf("batch receive %d: %+v", i, c)
		}
	}
	if !bytes.Equal(sink.Bytes()[:3<<16], src.Bytes()[:3<<16]) {
		t.Fatal("the batch's RDMA Reads did not read what its Writes wrote")
	}
}

// CloseWhenStarted closes qp from another goroutine the moment its
// transport has started it (its state leaves IDLE), and returns a channel
// closed once Close has returned: a test of a transport whose start races
// the queue pair's Close.
func CloseWhenStarted(qp *rdmap.QueuePair) <-chan struct{} {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for qp.State() == rdmap.StateIdle {
			runtime.Gosched()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		qp.Close(ctx)
	}()
	return closed
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
