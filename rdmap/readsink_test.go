package rdmap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// An RDMA Read Response may write only the Data Sink buffer its Read
// Request named, not the rest of the region that buffer lies in: "An
// RNIC MUST ensure that a Remote Peer is not able to access memory
// outside of the buffer specified" (RFC 5040 §8.1.1 item 3); the region
// has local rights only. A Response past the 10 octets asked for, or
// before them, gets DDP's "Base or bounds violation" and places nothing;
// one inside them completes the Read.
func TestReadResponseStaysInSink(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   uint64
		n    int
		want *term.Error
	}{
		{"past the sink", 60, 40, term.DDPBaseBounds},
		{"overlapping its end", 25, 10, term.DDPBaseBounds},
		{"before the sink", 10, 10, term.DDPBaseBounds},
		{"the sink itself", 20, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrafted(t)
			sink := c.reg(t, 100, LocalWrite)
			mustPost(t, c.qp.PostRead(ReadWR{ID: 7, Local: SGE{MR: sink, Offset: 20, Length: 10}, RemoteSTag: 0x1234}))
			c.peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), sink.STag(), sink.Base()+tc.to, bytes.Repeat([]byte{0xab}, tc.n)))
			if tc.want == nil {
				if got := wait(t, c.scq); got.WRID != 7 || got.Status != StatusSuccess || !bytes.Equal(sink.Bytes()[20:30], bytes.Repeat([]byte{0xab}, 10)) {
					t.Fatalf("%+v", got)
				}
				return
			}
			if _, th := c.peer.terminate(t); !errors.Is(th.Err(), tc.want) {
				t.Fatalf("Terminate %v, want %v", th.Err(), tc.want)
			}
			if !bytes.Equal(sink.Bytes(), make([]byte, 100)) {
				t.Fatal("the Response was placed")
			}
		})
	}
}

// Over an unordered LLP the second Read's Response may arrive before the
// first's: each segment goes to the Data Sink buffer of the Read whose
// STag and range it names, and both Reads complete, in order. Over an
// ordered one (a Window of one) only the oldest Read can be answered.
func TestReadResponsesOutOfOrder(t *testing.T) {
	ea, eb := ddptest.New(ddptest.Options{})
	peer := &rawPeer{end: ea, got: make(chan struct{}, 1)}
	s := newSide(t, eb, QPConfig{Window: 4})
	ea.Attach(peer)
	eb.Attach(s.qp.Stream())
	s.qp.Start(eb, ddp.Start{})
	t.Cleanup(func() { ea.Close() })
	one, two := s.reg(t, 16, LocalWrite), s.reg(t, 16, LocalWrite)
	mustPost(t, s.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: one, Length: 16}, RemoteSTag: 0x1234}))
	mustPost(t, s.qp.PostRead(ReadWR{ID: 2, Local: SGE{MR: two, Length: 16}, RemoteSTag: 0x1234}))
	resp := byte(MakeControl(OpReadResponse))
	if err := s.qp.Stream().Receive(1, taggedSeg(resp, two.STag(), 0, bytes.Repeat([]byte{2}, 16))); err != nil {
		t.Fatal(err)
	}
	if err := s.qp.Stream().Receive(0, taggedSeg(resp, one.STag(), 0, bytes.Repeat([]byte{1}, 16))); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 2; id++ {
		if got := wait(t, s.scq); got.WRID != id || got.Status != StatusSuccess {
			t.Fatalf("%+v", got)
		}
	}
	if !bytes.Equal(one.Bytes(), bytes.Repeat([]byte{1}, 16)) || !bytes.Equal(two.Bytes(), bytes.Repeat([]byte{2}, 16)) {
		t.Fatal("a Response landed in the other Read's buffer")
	}
	// An ordered queue pair takes a Response for the second Read first
	// as an invalid STag.
	c := newCrafted(t)
	a, b := c.reg(t, 16, LocalWrite), c.reg(t, 16, LocalWrite)
	mustPost(t, c.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: a, Length: 16}, RemoteSTag: 0x1234}))
	mustPost(t, c.qp.PostRead(ReadWR{ID: 2, Local: SGE{MR: b, Length: 16}, RemoteSTag: 0x1234}))
	c.peer.send(t, taggedSeg(resp, b.STag(), 0, []byte("x")))
	if _, th := c.peer.terminate(t); !errors.Is(th.Err(), term.DDPInvalidSTag) {
		t.Fatalf("Terminate %v", th.Err())
	}
}
