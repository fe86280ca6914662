package rdmap

import (
	"bytes"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
)

// RFC 7306 §5.2.2 item 4: "The Responder MUST ensure that a sufficient
// number of Untagged Buffers are available on the RDMA Read Request Queue
// (Queue with DDP Queue Number 1) to support the maximum number of Atomic
// Operation Requests negotiated by the ULP in addition to the maximum
// number of RDMA Read Requests negotiated by the ULP." With IRD 2 and
// AtomicIRD 2 a requester may have two of each outstanding at once: it
// sends them back to back while the responder cannot answer yet (its send
// route is held, so no queue 1 buffer is posted again), and all four find
// a buffer. The stream keeps running; once free, the responder answers
// them in Request order.
func TestQueue1BuffersForReadsAndAtomics(t *testing.T) {
	s, peer := rawSide(t, QPConfig{IRD: 2, AtomicIRD: 2})
	mem := s.reg(t, 64, RemoteRead|RemoteAtomic)
	fill(mem.Bytes(), 1)
	setWord(mem, 8, 7)
	wantRead := func(off int) []byte { return append([]byte(nil), mem.Bytes()[off:off+8]...) }
	read0, read1 := wantRead(0), wantRead(16)

	release := holdSend(t, s.qp)
	peer.send(t, rrSeg(1, ReadRequest{SinkSTag: 0x10, SinkTO: 0x100, RDMARDSZ: 8, SrcSTag: mem.STag(), SrcTO: 0}))
	peer.send(t, atomicSeg(2, AtomicRequest{Op: FetchAdd, ReqID: 0xa1, STag: mem.STag(), TO: 8, AddSwapData: 1, CompareMask: ^uint64(0)}))
	peer.send(t, rrSeg(3, ReadRequest{SinkSTag: 0x10, SinkTO: 0x200, RDMARDSZ: 8, SrcSTag: mem.STag(), SrcTO: 16}))
	peer.send(t, atomicSeg(4, AtomicRequest{Op: FetchAdd, ReqID: 0xa2, STag: mem.STag(), TO: 8, AddSwapData: 2, CompareMask: ^uint64(0)}))
	// waitQueued fails if the stream stopped: a Request that found no
	// buffer gets DDP "no buffer available" (0x2/0x02).
	waitQueued(t, s.qp, 4)
	if s.qp.State() != StateRunning {
		t.Fatalf("state %v, error %v", s.qp.State(), s.qp.Err())
	}
	release()

	segs := peer.segsFrom(t, 4)
	readResp := func(i int, to uint64, want []byte) {
		h, hl, err := ddp.ParseHeader(segs[i])
		if err != nil || !h.Tagged || Control(h.RsvdULP[0]).Opcode() != OpReadResponse || h.STag != 0x10 || h.TO != to || !bytes.Equal(segs[i][hl:], want) {
			t.Fatalf("segment %d: % x, want the Read Response to TO %#x", i, segs[i], to)
		}
	}
	atomicResp := func(i int, msn, id uint32, orig uint64) {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: msn}
		if w := (&AtomicResponse{OrigReqID: id, OrigValue: orig}).Append(h.Append(nil)); !bytes.Equal(segs[i], w) {
			t.Fatalf("segment %d: % x\nwant        % x", i, segs[i], w)
		}
	}
	readResp(0, 0x100, read0)
	atomicResp(1, 1, 0xa1, 7)
	readResp(2, 0x200, read1)
	atomicResp(3, 2, 0xa2, 8)
	if word(mem, 8) != 10 {
		t.Fatalf("the word is %d after FetchAdds of 1 and 2 to 7", word(mem, 8))
	}
	// The buffers were posted again: another round fits.
	peer.send(t, rrSeg(5, ReadRequest{SinkSTag: 0x10, SinkTO: 0x300, RDMARDSZ: 8, SrcSTag: mem.STag(), SrcTO: 0}))
	peer.send(t, atomicSeg(6, AtomicRequest{Op: FetchAdd, ReqID: 0xa3, STag: mem.STag(), TO: 8, AddSwapData: 5, CompareMask: ^uint64(0)}))
	segs = peer.segsFrom(t, 6)
	readResp(4, 0x300, read0)
	atomicResp(5, 3, 0xa3, 10)
	if s.qp.State() != StateRunning {
		t.Fatalf("state %v, error %v", s.qp.State(), s.qp.Err())
	}
}

// RFC 7306 §5.2.2 item 5: "The Requester MUST ensure that a sufficient
// number of Untagged Buffers are available on the RDMA Atomic Response
// Queue (Queue with DDP Queue Number 3) to support the maximum number of
// Atomic Operation Requests negotiated by the ULP." With AtomicORD 2 two
// Atomic Requests are outstanding, and their two Responses come back to
// back. Over an unordered LLP (SCTP; QPConfig.Window) the second may reach
// DDP before the first: it is placed at once, in a queue 3 buffer of its
// own, while the first's buffer is still waiting for it (RFC 5041 §5.3
// untagged placement by MSN). The test hands DDP the two segments in that
// order, as such an LLP would; then two more Responses, in order.
func TestAtomicResponseBuffers(t *testing.T) {
	s, peer := rawSide(t, QPConfig{AtomicORD: 2, Window: 2})
	res := s.reg(t, 32, LocalWrite)
	for i := range 4 {
		mustPost(t, s.qp.PostAtomic(AtomicWR{ID: uint64(i), Op: FetchAdd, Add: 1, Local: SGE{MR: res, Offset: uint64(8 * i), Length: 8}, RemoteSTag: 0x1234, RemoteTO: uint64(8 * i)}))
	}
	reqIDs := func(from, n int) []uint32 {
		segs := peer.segsFrom(t, from+n)
		if len(segs) != from+n {
			t.Fatalf("%d Atomic Requests outstanding, AtomicORD 2", len(segs))
		}
		var ids []uint32
		for _, seg := range segs[from:] {
			_, hl, _ := ddp.ParseHeader(seg)
			req, _, err := ParseAtomicRequest(seg[hl:])
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, req.ReqID)
		}
		return ids
	}
	resp := func(msn, id uint32, v uint64) []byte {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: msn}
		return (&AtomicResponse{OrigReqID: id, OrigValue: v}).Append(h.Append(nil))
	}
	ids := reqIDs(0, 2)
	// Stream sequence 1 (MSN 2) before sequence 0 (MSN 1). Nothing else
	// feeds this stream: the raw peer has sent it nothing.
	if err := s.qp.Stream().Receive(1, resp(2, ids[1], 0x22)); err != nil {
		t.Fatalf("the second Atomic Response, placed first: %v", err)
	}
	if err := s.qp.Stream().Receive(0, resp(1, ids[0], 0x11)); err != nil {
		t.Fatalf("the first Atomic Response: %v", err)
	}
	for i, v := range []uint64{0x11, 0x22} {
		if c := wait(t, s.scq); c.WRID != uint64(i) || c.Status != StatusSuccess || word(res, 8*i) != v {
			t.Fatalf("completion %+v, original value %#x", c, word(res, 8*i))
		}
	}
	// The two waiting Atomics go now; their Responses come back to back,
	// in order this time (stream sequence 2 and 3).
	ids = reqIDs(2, 2)
	for i, v := range []uint64{0x33, 0x44} {
		if err := s.qp.Stream().Receive(uint32(2+i), resp(uint32(3+i), ids[i], v)); err != nil {
			t.Fatalf("Atomic Response %d: %v", 3+i, err)
		}
	}
	for i, v := range []uint64{0x33, 0x44} {
		if c := wait(t, s.scq); c.WRID != uint64(2+i) || c.Status != StatusSuccess || word(res, 8*(2+i)) != v {
			t.Fatalf("completion %+v, original value %#x", c, word(res, 8*(2+i)))
		}
	}
	if s.qp.State() != StateRunning {
		t.Fatalf("state %v, error %v", s.qp.State(), s.qp.Err())
	}
}
