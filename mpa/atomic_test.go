//go:build !js

package mpa

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// atomicWorkload is what each connection does to the responder's memory
// (as rdmap's TestAtomicConcurrentStreams): adds FetchAdds of 1 to the
// counter at TO 0, window at a time; then locks times it takes the lock
// word at TO 8 with CmpSwap (0 to id), adds one to the word at TO 16 with
// an RDMA Read and an RDMA Write, and gives the lock back with CmpSwap.
// It returns the original values its FetchAdds saw.
func atomicWorkload(ctx context.Context, p *peer, stag uint32, id uint64, adds, window, locks int) ([]uint64, error) {
	local, err := p.PD.RegisterMemory(make([]byte, 8*(window+2)), 0, rdmap.LocalWrite)
	if err != nil {
		return nil, err
	}
	w := func(i int) uint64 { return binary.NativeEndian.Uint64(local.Bytes()[8*i:]) }
	next := func(want rdmap.WorkOp) (rdmap.Completion, error) {
		c, err := p.SCQ.Wait(ctx)
		if err == nil && (c.Status != rdmap.StatusSuccess || c.Op != want) {
			err = fmt.Errorf("completion %+v, want %v: %v", c, want, c.Err)
		}
		return c, err
	}
	var seen []uint64
	for done := 0; done < adds; {
		n := min(window, adds-done)
		err := p.QP.PostBatch(func() error {
			for i := range n {
				if err := p.QP.PostAtomic(rdmap.AtomicWR{ID: uint64(i), Op: rdmap.FetchAdd, Add: 1,
					Local: rdmap.SGE{MR: local, Offset: uint64(8 * i), Length: 8}, RemoteSTag: stag}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for range n {
			c, err := next(rdmap.WorkFetchAdd)
			if err != nil {
				return nil, err
			}
			seen = append(seen, w(int(c.WRID)))
		}
		done += n
	}
	lockRes := rdmap.SGE{MR: local, Offset: uint64(8 * window), Length: 8}
	val := rdmap.SGE{MR: local, Offset: uint64(8*window + 8), Length: 8}
	for range locks {
		for {
			if err := p.QP.PostAtomic(rdmap.AtomicWR{Op: rdmap.CmpSwap, Compare: 0, Swap: id, Local: lockRes, RemoteSTag: stag, RemoteTO: 8}); err != nil {
				return nil, err
			}
			if _, err := next(rdmap.WorkCompSwap); err != nil {
				return nil, err
			}
			if w(window) == 0 {
				break
			}
		}
		if err := p.QP.PostRead(rdmap.ReadWR{Local: val, RemoteSTag: stag, RemoteTO: 16}); err != nil {
			return nil, err
		}
		if _, err := next(rdmap.WorkRead); err != nil {
			return nil, err
		}
		binary.NativeEndian.PutUint64(local.Bytes()[8*window+8:], w(window+1)+1)
		// The Write is placed before the Atomic Request after it is
		// carried out: RFC 7306 §7, "RDMA Write, Atomic".
		err := p.QP.PostBatch(func() error {
			if err := p.QP.PostWrite(rdmap.WriteWR{SGL: []rdmap.SGE{val}, RemoteSTag: stag, RemoteTO: 16, Unsignaled: true}); err != nil {
				return err
			}
			return p.QP.PostAtomic(rdmap.AtomicWR{Op: rdmap.CmpSwap, Compare: id, Swap: 0, Local: lockRes, RemoteSTag: stag, RemoteTO: 8})
		})
		if err != nil {
			return nil, err
		}
		if _, err := next(rdmap.WorkCompSwap); err != nil {
			return nil, err
		}
		if got := w(window); got != id {
			return nil, fmt.Errorf("connection %d released a lock held by %d", id, got)
		}
	}
	return seen, nil
}

// Atomic Operations over MPA/TCP from several connections, in each MPA
// mode, to one counter and one lock word of one responder device (RFC
// 7306 §5.3: atomicity across the RDMAP Streams of an RNIC): every
// FetchAdd sees a different original value, the counter ends at the
// total, and no update made under the lock is lost.
func TestAtomicConcurrentMPA(t *testing.T) {
	const adds, window, locks = 500, 8, 40
	cfgs := []Config{{}, {Revision: 1}, {Markers: true}, {NoCRC: true}, {Revision: 1, Markers: true}, {ClientServer: true}}
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	shared, err := pd.RegisterMemory(make([]byte, 64), 0, rdmap.RemoteAtomic|rdmap.RemoteRead|rdmap.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seen := make([][]uint64, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	var responders []*rdmap.QueuePair
	var respConns []*Conn
	for i, cfg := range cfgs {
		l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cq := dev.NewCompletionQueue(64)
		resp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		responders = append(responders, resp)
		acc := make(chan error, 1)
		var rc *Conn
		go func() {
			r, err := l.Accept(ctx)
			if err == nil {
				rc, err = r.Accept(resp, nil)
			}
			acc <- err
		}()
		a := newPeer(t, rdmap.QPConfig{})
		ac, err := Dial(ctx, "tcp", l.Addr().String(), a.QP, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ac.Close()
		if err := <-acc; err != nil {
			t.Fatal(err)
		}
		respConns = append(respConns, rc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen[i], errs[i] = atomicWorkload(ctx, a, shared.STag(), uint64(i+1), adds, window, locks)
		}()
	}
	wg.Wait()
	// Stop the responders, whose goroutines wrote the memory: once they
	// have, it is the test's to read.
	for i, resp := range responders {
		respConns[i].Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp.Close(ctx)
		cancel()
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("connection %d (%+v): %v", i, cfgs[i], err)
		}
	}
	total := len(cfgs) * adds
	got := make([]bool, total)
	for _, s := range seen {
		for _, v := range s {
			if v >= uint64(total) || got[v] {
				t.Fatalf("FetchAdd original value %d seen twice or out of range", v)
			}
			got[v] = true
		}
	}
	w := func(off int) uint64 { return binary.NativeEndian.Uint64(shared.Bytes()[off:]) }
	if w(0) != uint64(total) || w(8) != 0 || w(16) != uint64(len(cfgs)*locks) {
		t.Fatalf("counter %d (want %d), lock %d, guarded %d (want %d)", w(0), total, w(8), w(16), len(cfgs)*locks)
	}
	t.Logf("%d MPA connections: %d FetchAdds, %d locked updates", len(cfgs), total, len(cfgs)*locks)
}

// Immediate Data over MPA: a Write with Immediate Data and Immediate Data
// with SE complete receives with their 8 octets.
func TestImmediateDataMPA(t *testing.T) {
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	connectPair(t, Config{}, Config{}, a, b)
	target := b.Reg(t, 4096, rdmap.RemoteWrite)
	rbuf := b.Reg(t, 16, rdmap.LocalWrite)
	for i := range 2 {
		b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(8 * i), Length: 8}}})
	}
	src := a.Reg(t, 4096, 0)
	fillp(src.Bytes(), 3)
	if err := a.QP.PostWrite(rdmap.WriteWR{SGL: []rdmap.SGE{{MR: src, Length: 4096}}, RemoteSTag: target.STag(), WithImm: true, Imm: 4096}); err != nil {
		t.Fatal(err)
	}
	if err := a.QP.PostSend(rdmap.SendWR{WithImm: true, Imm: 0x0102030405060708, Solicited: true}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{4096, 0x0102030405060708} {
		c := waitC(t, b.RCQ)
		if c.WRID != uint64(i) || c.Op != rdmap.WorkRecvWithImm || c.Imm != want || c.Status != rdmap.StatusSuccess {
			t.Fatalf("receive %+v", c)
		}
		if i == 0 && string(target.Bytes()) != string(src.Bytes()) {
			t.Fatal("the Immediate Data completed before the Write was placed")
		}
	}
}

// An Atomic Request to a peer without atomics (QPConfig.NoAtomics, as
// Linux siw is) over MPA: the peer answers with a Terminate "Unexpected
// OpCode", the atomic work request completes with REM_OP_ERR, and the
// connection ends (RFC 7306 §1.1).
func TestAtomicPeerWithoutAtomicsMPA(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{NoAtomics: true})
	connectPair(t, Config{}, Config{}, a, b)
	res := a.Reg(t, 8, rdmap.LocalWrite)
	if err := a.QP.PostAtomic(rdmap.AtomicWR{ID: 7, Op: rdmap.FetchAdd, Local: rdmap.SGE{MR: res, Length: 8}, RemoteSTag: 0x100}); err != nil {
		t.Fatal(err)
	}
	c := waitC(t, a.SCQ)
	if c.WRID != 7 || c.Status != rdmap.StatusRemOpErr || !errors.Is(c.Err, term.RDMAPUnexpectedOpcode) {
		t.Fatalf("completion %+v", c)
	}
	for _, p := range []*peer{a, b} {
		select {
		case <-p.QP.Terminated():
		case <-time.After(5 * time.Second):
			t.Fatal("the stream did not stop")
		}
	}
}
