package rdmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"testing/synctest"

	"github.com/iwarpgo/iwarp/ddp"
)

// Placeholders in FuzzQueuePairOutstanding's seeds, replaced by the real
// values of the queue pair under test: the Data Sink STags of its two
// outstanding Reads, and the Request Identifiers of its two Atomics.
const (
	fuzzSink0, fuzzSink1   = 0x4000, 0x5000
	fuzzReqID0, fuzzReqID1 = 0xa1, 0xa2
)

// FuzzQueuePairOutstanding plays a peer against a queue pair that has
// work outstanding, as a peer would target it: two RDMA Reads, two
// Atomic Operations and four posted receive buffers, over an unordered
// LLP (a window of 16 segments, as SCTP's). The input is a list of
// operations, each an octet saying where the segment goes and an octet
// giving its length, then the segment: the low four bits of the first
// octet are the segment's sequence number ahead of the next due (the
// reordering window); bit 4 sends it twice; bit 5 replays, in its place,
// the segment sent before it. Nothing may panic or hang; memory the peer
// may not write stays untouched, and so does the part of each Read's Data
// Sink region outside the buffer the Read named; every work request
// completes exactly once however its responses are duplicated,
// reordered or replayed.
func FuzzQueuePairOutstanding(f *testing.F) {
	c := func(op Opcode) byte { return byte(MakeControl(op)) }
	resp := func(stag uint32, to uint64, fill byte) []byte {
		return taggedSeg(c(OpReadResponse), stag, to, bytes.Repeat([]byte{fill}, 32))
	}
	aresp := func(msn, id uint32, v uint64) []byte {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{c(OpAtomicResponse)}, QN: QNAtomicResp, MSN: msn}
		return (&AtomicResponse{OrigReqID: id, OrigValue: v}).Append(h.Append(nil))
	}
	send := func(msn uint32, s string) []byte { return untaggedSeg(c(OpSend), 0, QNSend, msn, []byte(s)) }
	type op struct {
		where byte
		seg   []byte
	}
	for _, ops := range [][]op{
		// Every response once, in order.
		{{0, resp(fuzzSink0, 16, 1)}, {0, resp(fuzzSink1, 16, 2)}, {0, aresp(1, fuzzReqID0, 7)}, {0, aresp(2, fuzzReqID1, 8)}, {0, send(1, "done")}},
		// Two Read Responses for one Read, the later first.
		{{1, resp(fuzzSink0, 16, 2)}, {0, resp(fuzzSink0, 16, 1)}},
		// Two Atomic Responses for one Atomic Request, the later MSN first.
		{{1, aresp(2, fuzzReqID0, 2)}, {0, aresp(1, fuzzReqID0, 1)}},
		// The second Read's Response before the first's; the first twice.
		{{1, resp(fuzzSink1, 16, 2)}, {0x10, resp(fuzzSink0, 16, 1)}},
		// A response replayed after it completed its Read.
		{{0, resp(fuzzSink0, 16, 1)}, {0x20, nil}},
		// Sends out of order around a Read Response.
		{{2, send(2, "second")}, {1, resp(fuzzSink0, 16, 1)}, {0, send(1, "first")}},
		// A Terminate while everything is outstanding.
		{{0, untaggedSeg(c(OpTerminate), 0, QNTerminate, 1, []byte{0x11, 0, 0, 0})}},
	} {
		var in []byte
		for _, o := range ops {
			in = append(append(in, o.where, byte(len(o.seg))), o.seg...)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		synctest.Test(t, func(t *testing.T) { fuzzQueuePairOutstanding(t, in) })
	})
}

func fuzzQueuePairOutstanding(t *testing.T, in []byte) {
	s, peer := rawSide(t, QPConfig{Window: 16, AtomicORD: 2})
	sinks := []*MemoryRegion{s.reg(t, 64, LocalWrite), s.reg(t, 64, LocalWrite)}
	guard := []*MemoryRegion{s.reg(t, 64, LocalWrite), s.reg(t, 64, RemoteRead)}
	for i, m := range sinks {
		mustPost(t, s.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: m, Offset: 16, Length: 32}, RemoteSTag: 0x1234}))
	}
	for i := range 2 {
		mustPost(t, s.qp.PostAtomic(AtomicWR{ID: uint64(2 + i), Op: FetchAdd, Add: 1, Local: SGE{MR: guard[0], Offset: uint64(8 * i), Length: 8}, RemoteSTag: 0x1234}))
	}
	rbufs := make([]*MemoryRegion, 4)
	for i := range rbufs {
		rbufs[i] = s.reg(t, 64, LocalWrite)
		mustPost(t, s.qp.PostRecv(RecvWR{ID: uint64(10 + i), SGL: []SGE{{MR: rbufs[i], Length: 64}}}))
	}
	reqIDs := map[uint32]uint32{}
	for _, seg := range peer.segsFrom(t, 4) {
		h, hl, err := ddp.ParseHeader(seg)
		if err == nil && Control(h.RsvdULP[0]).Opcode() == OpAtomicRequest {
			req, _, _ := ParseAtomicRequest(seg[hl:])
			reqIDs[uint32(fuzzReqID0+len(reqIDs))] = req.ReqID
		}
	}
	guarded := append([][]byte{guard[1].Bytes()}, sinks[0].Bytes()[:16], sinks[0].Bytes()[48:], sinks[1].Bytes()[:16], sinks[1].Bytes()[48:])
	before := make([][]byte, len(guarded))
	for i, b := range guarded {
		before[i] = bytes.Clone(b)
	}
	// The window: segments waiting for their sequence number.
	next := uint32(0)
	var last []byte
	pending := map[uint32][]byte{}
	feed := func(seq uint32, seg []byte) { s.qp.Stream().Receive(seq, seg) }
	for n := 0; len(in) >= 2 && n < 64; n++ {
		where, l := in[0], min(int(in[1]), len(in)-2)
		seg := bytes.Clone(in[2 : 2+l])
		in = in[2+l:]
		if where&0x20 != 0 && last != nil {
			seg = bytes.Clone(last)
		}
		if h, _, err := ddp.ParseHeader(seg); err == nil {
			switch {
			case h.Tagged && h.STag == fuzzSink0:
				putSTag(seg, sinks[0].STag())
			case h.Tagged && h.STag == fuzzSink1:
				putSTag(seg, sinks[1].STag())
			case !h.Tagged && h.QN == QNAtomicResp && len(seg) >= ddp.UntaggedHeaderLen+4:
				id := binary.BigEndian.Uint32(seg[ddp.UntaggedHeaderLen:])
				if real, ok := reqIDs[id]; ok {
					binary.BigEndian.PutUint32(seg[ddp.UntaggedHeaderLen:], real)
				}
			}
		}
		last = seg
		seq := next + uint32(where&0x0f)
		pending[seq] = seg
		if where&0x10 != 0 {
			feed(seq, seg)
		}
		for p, ok := pending[next]; ok; p, ok = pending[next] {
			delete(pending, next)
			feed(next, p)
			next++
		}
	}
	// What is still waiting arrives now, in any order the map gives.
	for seq, seg := range pending {
		feed(seq, seg)
	}
	// Once the queue pair has taken it all (each of its goroutines
	// waits), close at once: what is still outstanding is flushed.
	synctest.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.qp.Close(ctx)
	for i, b := range guarded {
		if !bytes.Equal(b, before[i]) {
			t.Fatalf("memory %d outside what the peer may write changed: % x", i, b)
		}
	}
	seen := map[uint64]int{}
	var out [32]Completion
	for _, cq := range []*CompletionQueue{s.scq, s.rcq} {
		for k := cq.Poll(out[:]); k > 0; k = cq.Poll(out[:]) {
			for _, c := range out[:k] {
				seen[c.WRID]++
			}
		}
	}
	for _, id := range []uint64{0, 1, 2, 3, 10, 11, 12, 13} {
		if seen[id] != 1 {
			t.Fatalf("work request %d completed %d times (%v)", id, seen[id], seen)
		}
	}
}
