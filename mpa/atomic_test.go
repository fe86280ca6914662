//go:build !js

package mpa

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/term"
)

// Atomic Operations over MPA/TCP from several connections, in each MPA
// mode, to one counter and one lock word of one responder device (RFC
// 7306 §5.3: atomicity across the RDMAP Streams of an RNIC): every
// FetchAdd sees a different original value, the counter ends at the
// total, and no update made under the lock is lost.
func TestAtomicConcurrentMPA(t *testing.T) {
	const adds, window, locks = 500, 8, 40
	cfgs := []Config{{}, {Revision: 1}, {Markers: true}, {NoCRC: true}, {Revision: 1, Markers: true}, {ClientServer: true}}
	dev, pd, shared := rdmaptest.AtomicTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var requesters []*rdmaptest.Peer
	var responders []*rdmap.QueuePair
	var respConns []*Conn
	for _, cfg := range cfgs {
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
		requesters = append(requesters, a)
	}
	rdmaptest.RunAtomics(t, ctx, requesters, shared, func() {
		for _, c := range respConns {
			c.Close()
		}
		rdmaptest.CloseAll(responders)
	}, adds, window, locks)
	total := len(cfgs) * adds
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
