//go:build !js

package mpa

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

// Both ends read from each other at once, IRD = ORD = 16 outstanding each
// way, with Read Responses of 256 KiB and more, more than the sockets hold:
// nothing deadlocks (the receive goroutines never write; each end's send
// goroutine sends its Responses while its own Requests wait), every Read
// completes in order, and every octet lands where its Read asked.
func TestConnCrossedReads(t *testing.T) {
	noLeaks(t)
	qcfg := rdmap.QPConfig{IRD: 16, ORD: 16, SendDepth: 64}
	a, b := newPeer(t, qcfg), newPeer(t, qcfg)
	connectPair(t, Config{}, Config{}, a, b)
	const (
		small = 256 << 10
		large = small + 4096
		reads = 96
	)
	run := func(from, to *peer, seed byte) error {
		src := to.Reg(t, 4<<20, rdmap.RemoteRead)
		fillp(src.Bytes(), seed)
		sinks := make([]*rdmap.MemoryRegion, 16)
		for i := range sinks {
			sinks[i] = from.Reg(t, large+reads, rdmap.LocalWrite)
		}
		check := func(i int) error {
			n, off := readShape(i, small, large)
			if got, want := sinks[i%16].Bytes()[:n], src.Bytes()[off:off+n]; !bytes.Equal(got, want) {
				return fmt.Errorf("read %d: the sink does not hold the %d octets at offset %d", i, n, off)
			}
			return nil
		}
		done := 0
		for i := 0; i < reads; i++ {
			if i >= 16 {
				// The Read that used this sink has completed, in order.
				c := waitC(t, from.SCQ)
				if c.Status != rdmap.StatusSuccess || c.WRID != uint64(done) {
					return fmt.Errorf("completion %+v, want WRID %d", c, done)
				}
				if err := check(done); err != nil {
					return err
				}
				done++
			}
			n, off := readShape(i, small, large)
			wr := rdmap.ReadWR{ID: uint64(i), Local: rdmap.SGE{MR: sinks[i%16], Length: uint32(n)}, RemoteSTag: src.STag(), RemoteTO: uint64(off)}
			if err := from.QP.PostRead(wr); err != nil {
				return err
			}
		}
		for ; done < reads; done++ {
			c := waitC(t, from.SCQ)
			if c.Status != rdmap.StatusSuccess || c.WRID != uint64(done) {
				return fmt.Errorf("completion %+v, want WRID %d", c, done)
			}
			if err := check(done); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = run(a, b, 1) }()
	go func() { defer wg.Done(); errs[1] = run(b, a, 2) }()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readShape is the length and source offset of read i: two in three
// below small, one in three above large.
func readShape(i, small, large int) (n, off int) {
	n = small - i*7
	if i%3 == 2 {
		n = large + i
	}
	return n, (i * 4099) % (3 << 20)
}

// While the requester's receive goroutine is slow to read, the
// responder's Read Responses fill its socket: they wait in its send
// goroutine and go out in order, and every Read completes with the right
// octets.
func TestConnReadResponsesSlowReader(t *testing.T) {
	noLeaks(t)
	var stall atomic.Int32
	stall.Store(40)
	slow := trace.Func(func(e trace.Event) {
		if e.Kind == trace.SegmentPlaced && stall.Add(-1) >= 0 {
			time.Sleep(5 * time.Millisecond)
		}
	})
	a := newPeer(t, rdmap.QPConfig{IRD: 16, ORD: 16, Observer: slow})
	b := newPeer(t, rdmap.QPConfig{IRD: 16, ORD: 16})
	ac, bc := connectPair(t, Config{}, Config{}, a, b)
	bc.nc.(*net.TCPConn).SetWriteBuffer(64 << 10)
	ac.nc.(*net.TCPConn).SetReadBuffer(128 << 10)
	src := b.Reg(t, 4<<20, rdmap.RemoteRead)
	fillp(src.Bytes(), 9)
	const n = 200 << 10
	sinks := make([]*rdmap.MemoryRegion, 16)
	for i := range sinks {
		sinks[i] = a.Reg(t, n, rdmap.LocalWrite)
		wr := rdmap.ReadWR{ID: uint64(i), Local: rdmap.SGE{MR: sinks[i], Length: n}, RemoteSTag: src.STag(), RemoteTO: uint64(i * 4099)}
		if err := a.QP.PostRead(wr); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sinks {
		c := waitC(t, a.SCQ)
		if c.Status != rdmap.StatusSuccess || c.WRID != uint64(i) {
			t.Fatalf("completion %+v, want WRID %d", c, i)
		}
		if !bytes.Equal(sinks[i].Bytes(), src.Bytes()[i*4099:i*4099+n]) {
			t.Fatalf("read %d: the sink does not hold what was read", i)
		}
	}
	ac.Close()
	bc.Close()
}

// Both ends, at once, RDMA Write 128 KiB to each other, then Read a few
// KiB back and FetchAdd a counter on the other end, each operation waited
// for before the next, with socket buffers far smaller than the Writes:
// the receive side answers the Reads and Atomics itself when it can
// (WriteNow) and the send goroutine answers otherwise, the requester's
// waiter reads its socket itself while its one Read or Atomic is
// outstanding; nothing deadlocks, every Read returns what the Writes put
// there, and each counter ends at the number of FetchAdds.
func TestConnAnswersBesideWrites(t *testing.T) {
	noLeaks(t)
	qcfg := rdmap.QPConfig{IRD: 4, ORD: 4, AtomicIRD: 2, AtomicORD: 2, SendDepth: 16}
	a, b := newPeer(t, qcfg), newPeer(t, qcfg)
	ac, bc := connectPair(t, Config{}, Config{}, a, b)
	for _, c := range []*Conn{ac, bc} {
		c.nc.(*net.TCPConn).SetWriteBuffer(24 << 10)
		c.nc.(*net.TCPConn).SetReadBuffer(48 << 10)
		// Every other answer the socket takes only half of at once, so
		// that the rest of it leaves on the connection's writeLoop (the
		// requester waits for it before it sends anything more).
		c.wmu.Lock()
		c.tryNow = halveEveryOther(c.tryNow)
		c.wmu.Unlock()
	}
	const (
		rounds = 150
		wlen   = 128 << 10
		rlen   = 6000
	)
	type side struct {
		p                   *peer
		src, sink, res, ctr *rdmap.MemoryRegion
		target, counter     *rdmap.MemoryRegion // the other end's
	}
	mk := func(p *peer, seed byte) *side {
		s := &side{p: p, src: p.Reg(t, wlen, 0), sink: p.Reg(t, rlen, rdmap.LocalWrite), res: p.Reg(t, 8, rdmap.LocalWrite)}
		fillp(s.src.Bytes(), seed)
		s.ctr = p.Reg(t, wlen, rdmap.RemoteWrite|rdmap.RemoteRead|rdmap.RemoteAtomic)
		return s
	}
	sa, sb := mk(a, 3), mk(b, 4)
	sa.target, sb.target = sb.ctr, sa.ctr
	run := func(s *side) error {
		ctx := tctx(t)
		wait := func(id uint64) error {
			c, err := s.p.SCQ.Wait(ctx)
			if err != nil {
				return err
			}
			if c.Status != rdmap.StatusSuccess || c.WRID != id {
				return fmt.Errorf("completion %+v, want WRID %d", c, id)
			}
			return nil
		}
		for i := range rounds {
			id := uint64(i) * 3
			off := 8 + (i*977)%(wlen-8-rlen)
			if err := s.p.QP.PostWrite(rdmap.WriteWR{ID: id, SGL: []rdmap.SGE{{MR: s.src, Offset: 8, Length: wlen - 8}}, RemoteSTag: s.target.STag(), RemoteTO: 8}); err != nil {
				return err
			}
			if err := wait(id); err != nil {
				return err
			}
			if err := s.p.QP.PostRead(rdmap.ReadWR{ID: id + 1, Local: rdmap.SGE{MR: s.sink, Length: rlen}, RemoteSTag: s.target.STag(), RemoteTO: uint64(off)}); err != nil {
				return err
			}
			if err := wait(id + 1); err != nil {
				return err
			}
			if !bytes.Equal(s.sink.Bytes(), s.src.Bytes()[off:off+rlen]) {
				return fmt.Errorf("round %d: the Read did not return what the Write put at %d", i, off)
			}
			if err := s.p.QP.PostAtomic(rdmap.AtomicWR{ID: id + 2, Op: rdmap.FetchAdd, Add: 1, Local: rdmap.SGE{MR: s.res, Length: 8}, RemoteSTag: s.target.STag(), RemoteTO: 0}); err != nil {
				return err
			}
			if err := wait(id + 2); err != nil {
				return err
			}
			if got := binary.NativeEndian.Uint64(s.res.Bytes()); got != uint64(i) {
				return fmt.Errorf("round %d: FetchAdd returned %d", i, got)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = run(sa) }()
	go func() { defer wg.Done(); errs[1] = run(sb) }()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*side{sa, sb} {
		w, err := s.ctr.Word(0)
		if err != nil {
			t.Fatal(err)
		}
		if got := atomic.LoadUint64(w); got != rounds {
			t.Fatalf("counter %d, want %d", got, rounds)
		}
	}
}

// halveEveryOther wraps a WriteNow write: every other call offers it only
// the first half of the gather list's octets.
func halveEveryOther(try func([][]byte) (int, error)) func([][]byte) (int, error) {
	var calls int
	return func(bufs [][]byte) (int, error) {
		calls++
		if calls%2 == 0 {
			return try(bufs)
		}
		total := 0
		for _, b := range bufs {
			total += len(b)
		}
		var half [][]byte
		for left := total / 2; left > 0 && len(bufs) > 0; bufs = bufs[1:] {
			k := min(left, len(bufs[0]))
			half = append(half, bufs[0][:k])
			left -= k
		}
		return try(half)
	}
}
