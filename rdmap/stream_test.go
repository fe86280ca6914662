package rdmap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// RFC 5041 §8.2: "DDP MUST support Protection Domain association and DDP
// Stream association mechanisms for associating an STag and a DDP
// Stream." Under the second, "if the DDP Stream ID of the DDP Stream is
// not the same as the DDP Stream ID of the STag targeted by the Tagged
// DDP Message, then the DDP Segment is not Placed and the DDP layer MUST
// surface a local error to the ULP." A window that QueuePair.BindWindow
// binds to another queue pair of the same domain is refused on this one,
// with the STag-not-associated Terminate of each layer, and nothing is
// placed; the local error is the queue pair's.
func TestWindowOfAnotherStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  func(c *crafted, stag uint32) []byte
		want *term.Error
	}{
		{"RDMA Write", func(c *crafted, stag uint32) []byte { return taggedSeg(0x40, stag, 0x1000, []byte("x")) }, term.DDPSTagNotAssociated},
		{"RDMA Read Request", func(c *crafted, stag uint32) []byte {
			return rrSeg(1, ReadRequest{SinkSTag: 0x5555, RDMARDSZ: 10, SrcSTag: stag, SrcTO: 0x1000})
		}, term.RDMAPSTagNotAssociated},
		{"Send with Invalidate", func(c *crafted, stag uint32) []byte {
			return untaggedSeg(byte(MakeControl(OpSendInvalidate)), stag, 0, 1, []byte("x"))
		}, term.RDMAPProtCannotInvalidate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrafted(t)
			other := c.otherQP(t)
			w, err := other.BindWindow(c.src, 0, 100, RemoteRead|RemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			before := bytes.Clone(c.src.Bytes())
			c.peer.send(t, tc.seg(c, w.STag()))
			_, th := c.peer.terminate(t)
			if !errors.Is(th.Err(), tc.want) {
				t.Fatalf("Terminate %v, want %v", th.Err(), tc.want)
			}
			waitState(t, c.qp, StateTerminating)
			if !errors.Is(c.qp.Err(), tc.want) {
				t.Fatalf("the local error is %v", c.qp.Err())
			}
			if !bytes.Equal(c.src.Bytes(), before) {
				t.Fatal("the segment was placed")
			}
			// The window is still valid on its own stream.
			if _, f := c.dev.lookup(other, w.STag(), RemoteWrite); f != stagOK {
				t.Fatalf("on its own queue pair: %v", f.ddp())
			}
		})
	}
}

// A window bound to this queue pair works on it, and, since no other
// stream shares it, the peer may invalidate it with a Send with
// Invalidate although the domain has another queue pair (RFC 5040 §8.1.1
// item 7 forbids that only for an STag "shared on multiple streams"). A
// region's STag in that domain is shared: TestRemoteInvalidateSharedSTag.
func TestWindowOfThisStream(t *testing.T) {
	c := newCrafted(t)
	other := c.otherQP(t)
	if _, err := c.qp.BindWindow(c.foreign, 0, 10, RemoteWrite); !errors.Is(err, ErrWrongPD) {
		t.Fatalf("a window on another domain's region: %v", err)
	}
	w, err := c.qp.BindWindow(c.src, 0x100, 100, RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, f := c.dev.lookup(other, w.STag(), RemoteWrite); f != stagNotAssociated {
		t.Fatalf("on another queue pair of the domain: %v", f)
	}
	if err := c.pd.Invalidate(c.src.STag()); !errors.Is(err, ErrWindowBound) {
		t.Fatalf("the region with a window bound: %v", err)
	}
	c.peer.send(t, taggedSeg(0x40, w.STag(), 0x1100, []byte("placed")))
	c.peer.send(t, untaggedSeg(byte(MakeControl(OpSendInvalidate)), w.STag(), 0, 1, []byte("x")))
	got := wait(t, c.rcq)
	if got.Status != StatusSuccess || got.InvalidatedSTag != w.STag() || got.Flags&FlagInvalidated == 0 {
		t.Fatalf("receive %+v", got)
	}
	if string(c.src.Bytes()[0x100:0x106]) != "placed" {
		t.Fatalf("the Write through the window: %q", c.src.Bytes()[0x100:0x106])
	}
	if _, f := c.dev.lookup(c.qp, w.STag(), RemoteWrite); f != stagInvalid {
		t.Fatalf("after the Send with Invalidate: %v", f)
	}
	if c.dev.invalidate(c.pd, w.STag(), c.qp) == nil {
		t.Fatal("invalidated twice")
	}
}
