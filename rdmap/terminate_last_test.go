package rdmap

import (
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// RFC 5040 §5.4: "After sending a Terminate Message on an RDMAP Stream,
// the Local Peer MUST NOT send any more Messages on that specific RDMAP
// Stream." The queue pair has work of every kind under way when a
// crafted peer's RDMA Write to an unknown STag stops the stream: an RDMA
// Read outstanding, a second Read waiting for the ORD with a Send and a
// Write behind it, and two of the peer's Read Requests whose Responses
// wait for the send route. After the Terminate the peer answers the
// outstanding Read (which would free the ORD), sends another Read Request
// and a Send, and the ULP posts more work: the Terminate stays the last
// segment on the wire, and the only one.
func TestNothingSentAfterTerminate(t *testing.T) {
	s, peer := rawSide(t, QPConfig{ORD: 1, IRD: 4})
	sink := s.reg(t, 256, LocalWrite)
	src := s.reg(t, 256, RemoteRead)
	fill(src.Bytes(), 3)
	data := s.reg(t, 64, 0)
	rbuf := s.reg(t, 64, LocalWrite)
	mustPost(t, s.qp.PostRecv(RecvWR{ID: 100, SGL: []SGE{{MR: rbuf, Length: 64}}}))
	mustPost(t, s.qp.PostRecv(RecvWR{ID: 101, SGL: []SGE{{MR: rbuf, Length: 64}}}))

	mustPost(t, s.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: sink, Length: 16}, RemoteSTag: 0x9900}))
	mustPost(t, s.qp.PostRead(ReadWR{ID: 2, Local: SGE{MR: sink, Offset: 16, Length: 16}, RemoteSTag: 0x9900, RemoteTO: 16}))
	mustPost(t, s.qp.PostSend(SendWR{ID: 3, SGL: []SGE{{MR: data, Length: 8}}}))
	mustPost(t, s.qp.PostWrite(WriteWR{ID: 4, SGL: []SGE{{MR: data, Length: 8}}, RemoteSTag: 0x9800}))
	if segs := peer.segsFrom(t, 1); len(segs) != 1 || Control(segs[0][1]).Opcode() != OpReadRequest {
		t.Fatalf("%d segments before the error, want the first Read Request alone", len(segs))
	}

	release := holdSend(t, s.qp)
	for msn := uint32(1); msn <= 2; msn++ {
		peer.send(t, rrSeg(msn, ReadRequest{SinkSTag: 0x7700, SinkTO: uint64(msn) * 0x100, RDMARDSZ: 8, SrcSTag: src.STag(), SrcTO: uint64(msn)}))
	}
	waitQueued(t, s.qp, 2)
	peer.send(t, taggedSeg(byte(MakeControl(OpWrite)), 0x12345600, 0, []byte("x")))
	waitState(t, s.qp, StateTerminating)
	release()
	if _, th := peer.terminate(t); !errors.Is(th.Err(), term.DDPInvalidSTag) {
		t.Fatalf("Terminate %v", th.Err())
	}

	// The peer carries on as if nothing happened.
	peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), sink.STag(), sink.Base(), make([]byte, 16)))
	peer.send(t, rrSeg(3, ReadRequest{SinkSTag: 0x7700, SinkTO: 0x300, RDMARDSZ: 8, SrcSTag: src.STag()}))
	peer.send(t, untaggedSeg(byte(MakeControl(OpSend)), 0, QNSend, 1, []byte("late")))
	// So does the ULP. Whether these are refused is not the point here:
	// nothing of them may reach the wire.
	_ = s.qp.PostSend(SendWR{ID: 5, SGL: []SGE{{MR: data, Length: 8}}})
	_ = s.qp.PostWrite(WriteWR{ID: 6, SGL: []SGE{{MR: data, Length: 8}}, RemoteSTag: 0x9800})
	_ = s.qp.PostRead(ReadWR{ID: 7, Local: SGE{MR: sink, Offset: 32, Length: 8}, RemoteSTag: 0x9900})
	_ = s.qp.PostSend(SendWR{ID: 8, WithImm: true, Imm: 1})

	// Each completion: the four posted before the error flush in order.
	for i := 1; i <= 4; i++ {
		if c := wait(t, s.scq); c.WRID != uint64(i) || c.Status == StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	time.Sleep(50 * time.Millisecond)
	segs := peer.segsFrom(t, 0)
	terminates := 0
	for i, seg := range segs {
		h, _, err := ddp.ParseHeader(seg)
		if err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
		if Control(h.RsvdULP[0]).Opcode() == OpTerminate {
			terminates++
		}
	}
	last := segs[len(segs)-1]
	if Control(last[1]).Opcode() != OpTerminate || terminates != 1 {
		for i, seg := range segs {
			h, _, _ := ddp.ParseHeader(seg)
			t.Logf("segment %d: %v (%v)", i, Control(h.RsvdULP[0]).Opcode(), h)
		}
		t.Fatalf("%d segments, %d of them Terminates; the last is a %v: something was sent after the Terminate",
			len(segs), terminates, Control(last[1]).Opcode())
	}
	if s.qp.State() != StateTerminating {
		t.Fatalf("state %v", s.qp.State())
	}
}
