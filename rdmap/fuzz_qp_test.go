package rdmap

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/iwarpgo/iwarp/ddp"
)

// FuzzQueuePairSegments feeds a queue pair whatever segments a peer may
// send (the input is a list of segments, each after an octet giving its
// length): the queue pair must not panic, and must never change memory
// the peer has no right to write: a region with remote read access only,
// one of another protection domain, one with local access only (RFC 5040
// §8.1.1: "An RNIC MUST ensure that a Remote Peer is not able to access
// memory outside of the buffer specified when the STag was enabled for
// remote access"). Which Terminate each error gets is checked by the
// crafted tests (TestFigure9Rows and others); here the peer is anything.
func FuzzQueuePairSegments(f *testing.F) {
	c := func(op Opcode) byte { return byte(MakeControl(op)) }
	seeds := [][][]byte{
		{taggedSeg(c(OpWrite), 0x1000, 0x1000, []byte("a write"))},
		{untaggedSeg(c(OpSend), 0, QNSend, 1, []byte("a send")), untaggedSeg(c(OpSendInvalidate), 0x1000, QNSend, 2, nil)},
		{rrSeg(1, ReadRequest{SinkSTag: 5, RDMARDSZ: 16, SrcSTag: 0x1000, SrcTO: 0x1000})},
		{atomicSeg(1, AtomicRequest{Op: FetchAdd, STag: 0x1000, TO: 0x1000, AddSwapData: 1, CompareMask: ^uint64(0)})},
		{taggedSeg(c(OpWrite), 0x2000, 0, []byte("to a read-only region"))},
		{taggedSeg(c(OpWrite), 0x1000, 0x1ff8, []byte("past the end of the region"))},
		{{0xc1, 0x40, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{untaggedSeg(c(OpTerminate), 0, QNTerminate, 1, []byte{0x11, 0, 0, 0}), taggedSeg(c(OpWrite), 0x1000, 0x1000, []byte("after"))},
	}
	for _, s := range seeds {
		var in []byte
		for _, seg := range s {
			in = append(append(in, byte(len(seg))), seg...)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) { synctest.Test(t, func(t *testing.T) { fuzzQueuePairSegments(t, in) }) })
}

func fuzzQueuePairSegments(t *testing.T, in []byte) {
	c := newCrafted(t)
	local := c.reg(t, 64, LocalWrite)
	guarded := []*MemoryRegion{c.top, c.foreign, local}
	before := make([][]byte, len(guarded))
	for i, mr := range guarded {
		before[i] = bytes.Clone(mr.Bytes())
	}
	// The STags in the seeds: the crafted regions' own, so that
	// mutations of them reach real regions.
	stags := []uint32{c.src.STag(), c.top.STag(), c.foreign.STag(), c.noread.STag()}
	for n := 0; len(in) > 0 && n < 64; n++ {
		l := min(int(in[0]), len(in)-1)
		seg := bytes.Clone(in[1 : 1+l])
		in = in[1+l:]
		if h, _, err := ddp.ParseHeader(seg); err == nil && h.Tagged && len(seg) >= 6 {
			// 0x1000 and 0x2000 in the seeds stand for src and top.
			switch h.STag {
			case 0x1000:
				putSTag(seg, stags[0])
			case 0x2000:
				putSTag(seg, stags[1])
			case 0x3000:
				putSTag(seg, stags[2])
			}
		}
		_ = c.peer.end.WriteSegment(seg, nil) // refused once the pipe is cut
	}
	// Let the queue pair take what was sent (until each of its
	// goroutines waits); then stop the pipe (its delivery
	// goroutine, which places, ends) and the queue pair (its send
	// goroutine, which runs Atomic Operations, ends).
	synctest.Wait()
	c.peer.end.Close()
	c.qp.Close(context.Background())
	for i, mr := range guarded {
		if !bytes.Equal(mr.Bytes(), before[i]) {
			t.Fatalf("region %d (no remote write access) changed: % x", i, mr.Bytes())
		}
	}
}

// putSTag writes stag into a tagged segment's STag field (RFC 5041 §4.2:
// octets 2 to 5).
func putSTag(seg []byte, stag uint32) {
	seg[2], seg[3], seg[4], seg[5] = byte(stag>>24), byte(stag>>16), byte(stag>>8), byte(stag)
}
