package rdmap

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
)

// holdSend keeps qp's send route busy until the returned release runs (or
// the test ends): the receive side then cannot answer a Request itself
// (answer's shortcut) and queues its Responses for the send goroutine,
// which takes them all in one batch once released.
func holdSend(t *testing.T, qp *QueuePair) (release func()) {
	t.Helper()
	qp.sendMu.Lock()
	held := true
	release = func() {
		if held {
			held = false
			qp.sendMu.Unlock()
		}
	}
	t.Cleanup(release)
	return release
}

// waitQueued waits until n Read or Atomic Responses are queued for the
// send route.
func waitQueued(t *testing.T, qp *QueuePair, n int) {
	t.Helper()
	var got int
	var st State
	eventually(func() bool {
		qp.mu.Lock()
		got, st = len(qp.queued), qp.state
		qp.mu.Unlock()
		return got == n || st != StateRunning
	})
	if got != n {
		t.Fatalf("%d Responses queued, want %d (state %v, error %v)", got, n, st, qp.Err())
	}
}

// checkReadResponses checks that segs are the Read Responses to reqs, in
// order: tagged, opcode 0010b, the Data Sink STag and TO of the Request,
// and the Data Source's octets.
func checkReadResponses(t *testing.T, segs [][]byte, src *MemoryRegion, reqs []ReadRequest) {
	t.Helper()
	if len(segs) != len(reqs) {
		t.Fatalf("%d segments for %d Read Requests", len(segs), len(reqs))
	}
	for i, rr := range reqs {
		h, hl, err := ddp.ParseHeader(segs[i])
		if err != nil || !h.Tagged || Control(h.RsvdULP[0]).Opcode() != OpReadResponse {
			t.Fatalf("segment %d is not a Read Response: %v %v", i, h, err)
		}
		if h.STag != rr.SinkSTag || h.TO != rr.SinkTO {
			t.Fatalf("Response %d goes to STag %#x TO %#x; Request %d named %#x %#x: the Responses left out of Request order",
				i, h.STag, h.TO, i, rr.SinkSTag, rr.SinkTO)
		}
		off := rr.SrcTO - src.Base()
		if want := src.Bytes()[off : off+uint64(rr.RDMARDSZ)]; !bytes.Equal(segs[i][hl:], want) {
			t.Fatalf("Response %d carries % x, want % x", i, segs[i][hl:], want)
		}
	}
}

// RFC 5040 §5.2.1 ("The Remote Peer MUST process the RDMA Read Request
// Messages in the order they were sent"), §5.2.2 ("The Data Source RDMAP
// layer MUST pass RDMA Read Response Messages to the DDP layer, in the
// order that the RDMA Read Request Messages were received") and §5.5
// ("the RDMA Read Response Messages MUST be submitted to the DDP layer on
// the Remote Peer in the order the RDMA Read Request Messages were
// received"). A crafted requester sends three Read Requests with distinct
// Data Sink STags and TOs while the responder's send route is busy, so
// that all three Responses wait in the queue together and leave in one
// batch; then a burst of Requests with the send route free, where some
// are answered at once and some queue.
func TestReadResponsesInRequestOrder(t *testing.T) {
	s, peer := rawSide(t, QPConfig{IRD: 32})
	src := s.reg(t, 4096, RemoteRead)
	fill(src.Bytes(), 11)

	release := holdSend(t, s.qp)
	var reqs []ReadRequest
	for i := range 3 {
		rr := ReadRequest{SinkSTag: 0x51000 + uint32(i)*0x100, SinkTO: 0x7000 + uint64(i)*0x111, RDMARDSZ: uint32(10 + i), SrcSTag: src.STag(), SrcTO: uint64(100 * (i + 1))}
		reqs = append(reqs, rr)
		peer.send(t, rrSeg(uint32(i+1), rr))
	}
	waitQueued(t, s.qp, 3)
	if n := len(peer.segsFrom(t, 0)); n != 0 {
		t.Fatalf("%d segments sent while the send route was held", n)
	}
	release()
	checkReadResponses(t, peer.segsFrom(t, 3), src, reqs)

	// A burst, the send route free: the receive side answers what it can
	// at once and queues the rest behind.
	const burst = 30
	burstReqs := make([]ReadRequest, burst)
	for i := range burst {
		burstReqs[i] = ReadRequest{SinkSTag: 0x62000 + uint32(i), SinkTO: uint64(i) * 0x1000, RDMARDSZ: uint32(1 + i), SrcSTag: src.STag(), SrcTO: uint64(50 * i)}
	}
	for i, rr := range burstReqs {
		peer.send(t, rrSeg(uint32(4+i), rr))
	}
	segs := peer.segsFrom(t, 3+burst)
	checkReadResponses(t, segs[3:], src, burstReqs)
	if s.qp.State() != StateRunning {
		t.Fatalf("state %v, error %v", s.qp.State(), s.qp.Err())
	}
}

// RFC 5040 §5.2.1 ("The Local Peer MUST pass to the DDP layer RDMA Read
// Request Messages in the order they were submitted by the ULP") and §5.5
// ("The RDMAP layer MUST submit RDMA Messages to the DDP layer in the
// order the RDMA Operations are submitted to the RDMAP layer by the
// ULP"): a batch of Reads, all within the ORD, reaches the wire in
// posting order, each Request naming its own Data Sink STag and TO; the
// Reads then complete in that order.
func TestReadRequestsInPostingOrder(t *testing.T) {
	s, peer := rawSide(t, QPConfig{ORD: 8})
	const n = 5
	sinks := make([]*MemoryRegion, n)
	for i := range sinks {
		sinks[i] = s.reg(t, 64, LocalWrite)
	}
	err := s.qp.PostBatch(func() error {
		for i := range n {
			if err := s.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: sinks[i], Offset: uint64(4 * i), Length: uint32(8 + i)},
				RemoteSTag: 0x4400 + uint32(i), RemoteTO: 0x10000 * uint64(i+1)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	segs := peer.segsFrom(t, n)
	if len(segs) != n {
		t.Fatalf("%d segments, want %d Read Requests", len(segs), n)
	}
	for i, seg := range segs {
		h, hl, err := ddp.ParseHeader(seg)
		if err != nil || h.Tagged || h.QN != QNReadReq || Control(h.RsvdULP[0]).Opcode() != OpReadRequest {
			t.Fatalf("segment %d is not a Read Request: %v %v", i, h, err)
		}
		rr, _, err := ParseReadRequest(seg[hl:])
		if err != nil {
			t.Fatal(err)
		}
		want := ReadRequest{SinkSTag: sinks[i].STag(), SinkTO: sinks[i].Base() + uint64(4*i), RDMARDSZ: uint32(8 + i),
			SrcSTag: 0x4400 + uint32(i), SrcTO: 0x10000 * uint64(i+1)}
		if h.MSN != uint32(i+1) || rr != want {
			t.Fatalf("Read Request %d on the wire: MSN %d %+v; posted %d was %+v", i, h.MSN, rr, i, want)
		}
	}
	for i, seg := range segs {
		_, hl, _ := ddp.ParseHeader(seg)
		rr, _, _ := ParseReadRequest(seg[hl:])
		peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), rr.SinkSTag, rr.SinkTO, bytes.Repeat([]byte{byte(0xa0 + i)}, int(rr.RDMARDSZ))))
	}
	for i := range n {
		c := wait(t, s.scq)
		if c.WRID != uint64(i) || c.Op != WorkRead || c.Status != StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
		got := sinks[i].Bytes()[4*i : 4*i+8+i]
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(0xa0 + i)}, 8+i)) {
			t.Fatalf("sink %d holds % x", i, got)
		}
	}
}

// RFC 5040 §5.1 ("The Data Source RDMAP layer MUST issue RDMA Write
// Messages to the DDP layer in the order they were submitted by the ULP")
// and §5.5 rule 13's MUST: two RDMA Writes to overlapping ranges, then a
// Send, all in one batch. Once the Send is delivered both Writes are
// placed (§5.5 rule 10), and over an ordered LLP the second Write's octets
// are what the overlap holds.
func TestOverlappingWritesInOrder(t *testing.T) {
	for _, mulpdu := range []int{0, 100} {
		t.Run(fmt.Sprintf("MULPDU %d", mulpdu), func(t *testing.T) {
			a, b := newPair(t, pairOpts{pipe: ddptest.Options{MULPDU: mulpdu}})
			target := b.reg(t, 512, RemoteWrite)
			rbuf := b.reg(t, 16, LocalWrite)
			mustPost(t, b.qp.PostRecv(RecvWR{ID: 9, SGL: []SGE{{MR: rbuf, Length: 16}}}))
			src := a.reg(t, 512, 0)
			first, second := src.Bytes()[:200], src.Bytes()[200:400]
			for i := range first {
				first[i] = 0x11
			}
			for i := range second {
				second[i] = 0x22
			}
			copy(src.Bytes()[400:], "done")
			err := a.qp.PostBatch(func() error {
				if err := a.qp.PostWrite(WriteWR{ID: 1, SGL: []SGE{{MR: src, Length: 200}}, RemoteSTag: target.STag(), RemoteTO: 10}); err != nil {
					return err
				}
				if err := a.qp.PostWrite(WriteWR{ID: 2, SGL: []SGE{{MR: src, Offset: 200, Length: 200}}, RemoteSTag: target.STag(), RemoteTO: 110}); err != nil {
					return err
				}
				return a.qp.PostSend(SendWR{ID: 3, SGL: []SGE{{MR: src, Offset: 400, Length: 4}}})
			})
			if err != nil {
				t.Fatal(err)
			}
			if c := wait(t, b.rcq); c.WRID != 9 || c.Status != StatusSuccess || string(rbuf.Bytes()[:4]) != "done" {
				t.Fatalf("receive completion %+v", c)
			}
			got := target.Bytes()
			want := make([]byte, 512)
			copy(want[10:], first)
			copy(want[110:], second)
			if !bytes.Equal(got, want) {
				t.Fatalf("target after Write 1 (0x11 at 10..210), Write 2 (0x22 at 110..310), Send:\n% x\nthe Writes reached DDP out of posting order", got[:320])
			}
			for i := 1; i <= 3; i++ {
				if c := wait(t, a.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
					t.Fatalf("completion %+v", c)
				}
			}
		})
	}
}
