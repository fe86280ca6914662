package rdmap

import (
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// "If an RNIC provides the ability to share receive buffers across
// multiple Streams, the combination of the RNIC and the Privileged
// Resource Manager MUST be able to detect if the Remote Peer is attempting
// to consume more than its fair share of resources so that the Local Peer
// can apply countermeasures to detect and prevent the attack." (RFC 5040
// §8.1.2 item 8) A queue pair holds at most min(RecvDepth, its stream's
// reassembly window) of a shared receive queue's buffers at once. A peer
// whose Send names an MSN further ahead (which would make its stream take
// every buffer up to it and hold them) is refused with "Invalid MSN - MSN
// range is not valid" and takes none; the other stream's Send still finds
// its buffer. Within the share, messages that arrive out of order each
// take theirs.
func TestSharedReceiveQueueShare(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	pd := dev.NewProtectionDomain()
	rcq := dev.NewCompletionQueue(64)
	srq := pd.NewSharedReceiveQueue(8)
	buf, _ := pd.RegisterMemory(make([]byte, 64*8), 0, LocalWrite)
	for i := 0; i < 8; i++ {
		mustPost(t, srq.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: buf, Offset: uint64(i * 64), Length: 64}}}))
	}
	var peers []*rawPeer
	var qps []*QueuePair
	for k := 0; k < 2; k++ {
		ea, eb := ddptest.New(ddptest.Options{})
		qp, err := pd.NewQueuePair(QPConfig{SendCQ: dev.NewCompletionQueue(8), RecvCQ: rcq, SRQ: srq, Window: 16, RecvDepth: 2})
		if err != nil {
			t.Fatal(err)
		}
		p := &rawPeer{end: ea, got: make(chan struct{}, 1)}
		ea.Attach(p)
		eb.Attach(qp.Stream())
		qp.Start(eb, ddp.Start{})
		t.Cleanup(func() { ea.Close() })
		peers, qps = append(peers, p), append(qps, qp)
	}
	send := byte(MakeControl(OpSend))
	// The greedy peer's segment comes ahead of its sequence (DDP sequence
	// 5, as an unordered LLP may deliver it) and names MSN 8: seven
	// messages ahead. Taking a buffer for every MSN up to it would leave
	// the queue empty while the stream waits for the segments before it.
	qps[0].Stream().Receive(5, untaggedSeg(send, 0, 0, 8, []byte("greedy")))
	if _, th := peers[0].terminate(t); !errors.Is(th.Err(), term.DDPMSNRange) {
		t.Fatalf("Terminate %v, want %v", th.Err(), term.DDPMSNRange)
	}
	if !errors.Is(qps[0].Err(), term.DDPMSNRange) || srq.Len() != 8 {
		t.Fatalf("%v; %d buffers left", qps[0].Err(), srq.Len())
	}
	// The other stream's LLP delivers its second message (DDP sequence 1,
	// MSN 2) before its first, as SCTP may: within its share of two.
	for _, seg := range []struct {
		seq uint32
		msn uint32
		txt string
	}{{1, 2, "second"}, {0, 1, "first"}} {
		if err := qps[1].Stream().Receive(seg.seq, untaggedSeg(send, 0, 0, seg.msn, []byte(seg.txt))); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{"first", "second"} {
		c := wait(t, rcq)
		if c.QP != qps[1] || c.Status != StatusSuccess || string(buf.Bytes()[c.WRID*64:c.WRID*64+uint64(c.ByteLen)]) != want {
			t.Fatalf("receive %d: %+v", i, c)
		}
	}
	// A third message ahead of those two in flight is beyond the share.
	qps[1].Stream().Receive(2, untaggedSeg(send, 0, 0, 5, []byte("x")))
	if _, th := peers[1].terminate(t); !errors.Is(th.Err(), term.DDPMSNRange) {
		t.Fatalf("Terminate %v", th.Err())
	}
	if srq.Len() != 6 {
		t.Fatalf("%d buffers left, want 6", srq.Len())
	}
}
