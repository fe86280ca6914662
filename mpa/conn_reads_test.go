//go:build !js

package mpa

import (
	"bytes"
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
