package rdmap

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// Immediate Data, with and without Solicited Event, and an RDMA Write
// with Immediate Data: each consumes a receive buffer, which completes as
// RECV_WITH_IMM with the 8 octets (also in the buffer, big-endian); in
// order; after the Write before it is placed ("Immediate Data is Completed
// after RDMA Write is Placed and Delivered", RFC 7306 §7); only the SE
// one wakes a solicited-only waiter. The sender's completions are those
// of a Send and a Write (§6.4).
func TestImmediateData(t *testing.T) {
	for _, reorder := range []int{0, 6} {
		a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: 200, Reorder: reorder, Seed: 4}})
		rbuf := b.reg(t, 4*16, LocalWrite)
		for i := range 4 {
			mustPost(t, b.qp.PostRecv(RecvWR{ID: uint64(10 + i), SGL: []SGE{{MR: rbuf, Offset: uint64(16 * i), Length: 16}}}))
		}
		target, target2 := b.reg(t, 4096, RemoteWrite), b.reg(t, 4096, RemoteWrite)
		src := a.reg(t, 4096, 0)
		fill(src.Bytes(), 9)
		b.rcq.Arm(true)
		mustPost(t, a.qp.PostSend(SendWR{ID: 1, WithImm: true, Imm: 0x0102030405060708}))
		mustPost(t, a.qp.PostWrite(WriteWR{ID: 2, SGL: []SGE{{MR: src, Length: 4096}}, RemoteSTag: target.STag(), WithImm: true, Imm: 0xfeed}))
		select {
		case <-b.rcq.Notify():
			t.Fatal("an unsolicited Immediate Data message fired a solicited-only notification")
		case <-time.After(20 * time.Millisecond):
		}
		mustPost(t, a.qp.PostSend(SendWR{ID: 3, WithImm: true, Imm: 3, Solicited: true}))
		mustPost(t, a.qp.PostWrite(WriteWR{ID: 4, SGL: []SGE{{MR: src, Length: 10}}, RemoteSTag: target2.STag(), RemoteTO: 100, WithImm: true, Imm: 4, Solicited: true}))
		select {
		case <-b.rcq.Notify():
		case <-time.After(5 * time.Second):
			t.Fatal("no solicited notification")
		}
		for i, op := range []WorkOp{WorkSend, WorkWrite, WorkSend, WorkWrite} {
			if c := wait(t, a.scq); c.WRID != uint64(i+1) || c.Op != op || c.Status != StatusSuccess {
				t.Fatalf("send completion %+v", c)
			}
		}
		want := []struct {
			imm   uint64
			flags uint8
		}{{0x0102030405060708, FlagImm}, {0xfeed, FlagImm}, {3, FlagImm | FlagSolicited}, {4, FlagImm | FlagSolicited}}
		for i, w := range want {
			c := wait(t, b.rcq)
			if c.WRID != uint64(10+i) || c.Op != WorkRecvWithImm || c.Status != StatusSuccess || c.Imm != w.imm || c.Flags != w.flags || c.ByteLen != 8 {
				t.Fatalf("receive %d: %+v", i, c)
			}
			if got := rbuf.Bytes()[16*i : 16*i+8]; !bytes.Equal(got, (&ImmediateData{Data: w.imm}).Append(nil)) {
				t.Fatalf("receive %d: buffer % x", i, got)
			}
			if i == 1 && !bytes.Equal(target.Bytes(), src.Bytes()) {
				t.Fatal("the Immediate Data completed before the Write before it was placed")
			}
		}
	}
}

// Immediate Data needs a receive buffer of 8 octets: a smaller one is
// DDP's "DDP Message too long for available buffer", none is "no buffer
// available".
func TestImmediateDataBuffers(t *testing.T) {
	for _, tc := range []struct {
		n    int // receive buffer; -1: none
		want *term.Error
	}{{4, term.DDPMessageTooLong}, {-1, term.DDPNoBuffer}} {
		a, b := newPair(t, pairOpts{})
		if tc.n >= 0 {
			b.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: b.reg(t, tc.n, LocalWrite), Length: uint32(tc.n)}}})
		}
		mustPost(t, a.qp.PostSend(SendWR{ID: 1, WithImm: true, Imm: 1}))
		waitState(t, b.qp, StateTerminating)
		waitState(t, a.qp, StateTerminating)
		if !errors.Is(b.qp.Err(), tc.want) || !errors.Is(a.qp.Err(), tc.want) {
			t.Fatalf("buffer %d: %v / %v", tc.n, b.qp.Err(), a.qp.Err())
		}
	}
}
