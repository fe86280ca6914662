package rdmap

import (
	"bytes"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/iwarpgo/iwarp/term"
)

// The receive side's checks of Figure 4's Tagged flag and Queue Number
// (RFC 5040 §4.1: Figure 4 "MUST be used to define the value of the
// Tagged flag"; §5.1: "An RDMA Write Message MUST reference a Tagged
// Buffer"; §5.2.1: "An RDMA Read Request Message MUST reference an
// Untagged Buffer" and "MUST reference the RDMA Read Request Queue";
// §5.2.2: "An RDMA Read Response Message MUST reference a Tagged
// Buffer"), which TestFigure9Rows does not provoke. Each message is
// well-formed DDP (an untagged one names a posted buffer that it fits),
// so DDP's own checks pass and RDMAP's opcode check is what refuses it:
// §7.2 check 2, "The RDMA OpCode MUST be valid" for the buffer model and
// queue it arrived on, answered with Figure 9's Remote Operation Error,
// Unexpected OpCode (0x0/0x2/0x06). Figure 10: a Remote Operation Error's
// Terminate includes the DDP Segment Length and the Terminated DDP Header,
// not the RDMA Header.
func TestFigure9TaggedFlagAndQueue(t *testing.T) {
	type tc struct {
		name string
		// read: a Read of 16 octets to sink is outstanding first, so that
		// a Read Response is expected (and the refusal is not for want
		// of an outstanding Read).
		read bool
		seg  func(c *crafted) []byte
	}
	rrBody := func(c *crafted) []byte {
		return (&ReadRequest{SinkSTag: 0x5555, SinkTO: 0, RDMARDSZ: 10, SrcSTag: c.src.STag(), SrcTO: 0x1000}).Append(nil)
	}
	cases := []tc{
		{"tagged Read Request", false, func(c *crafted) []byte {
			// To a region the peer may write: if the flag went unchecked
			// its 28 octets would land there.
			return taggedSeg(byte(MakeControl(OpReadRequest)), c.src.STag(), 0x1000, rrBody(c))
		}},
		{"Read Request on queue 0", false, func(c *crafted) []byte {
			return untaggedSeg(byte(MakeControl(OpReadRequest)), 0, QNSend, 1, rrBody(c))
		}},
		{"untagged Read Response", true, func(c *crafted) []byte {
			return untaggedSeg(byte(MakeControl(OpReadResponse)), 0, QNSend, 1, make([]byte, 16))
		}},
		{"untagged RDMA Write", false, func(c *crafted) []byte {
			return untaggedSeg(byte(MakeControl(OpWrite)), 0, QNSend, 1, []byte("write"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCrafted(t)
				sink := c.reg(t, 16, LocalWrite)
				sent := 0
				if tc.read {
					mustPost(t, c.qp.PostRead(ReadWR{ID: 5, Local: SGE{MR: sink, Length: 16}, RemoteSTag: 0x4242}))
					sent = len(c.peer.segsFrom(t, 1))
				}
				before := append([]byte(nil), c.src.Bytes()...)
				seg := tc.seg(c)
				c.peer.send(t, seg)
				th := c.peer.checkTerminate(t, seg, term.RDMAPUnexpectedOpcode)
				if th.R {
					t.Fatalf("a Remote Operation Error's Terminate with an RDMA Header: % x", th.RDMAHeader)
				}
				if !bytes.Equal(before, c.src.Bytes()) || !bytes.Equal(c.rbuf.Bytes(), make([]byte, 64)) || !bytes.Equal(sink.Bytes(), make([]byte, 16)) {
					t.Fatal("memory changed")
				}
				if c.qp.State() != StateTerminating || !errors.Is(c.qp.Err(), term.RDMAPUnexpectedOpcode) {
					t.Fatalf("state %v err %v", c.qp.State(), c.qp.Err())
				}
				if cq := wait(t, c.rcq); cq.Status != StatusWRFlushErr || cq.WRID != 1 {
					t.Fatalf("receive completion %+v", cq)
				}
				if tc.read {
					if cq := wait(t, c.scq); cq.WRID != 5 || cq.Status == StatusSuccess {
						t.Fatalf("the Read completed %+v", cq)
					}
				}
				// Nothing more is placed, and nothing follows the Terminate.
				c.peer.send(t, taggedSeg(byte(MakeControl(OpWrite)), c.src.STag(), 0x1000, []byte("zzz")))
				synctest.Wait()
				if !bytes.Equal(before, c.src.Bytes()) {
					t.Fatal("placed after the Terminate")
				}
				if n := len(c.peer.segsFrom(t, 0)); n != sent+1 {
					t.Fatalf("the queue pair sent %d segments, want %d and the Terminate", n, sent)
				}
				if ev := c.Events(); len(ev) != 1 || ev[0].Type != EventStreamError {
					t.Fatalf("events %+v", ev)
				}
			})
		})
	}
}
