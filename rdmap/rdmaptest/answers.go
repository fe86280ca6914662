package rdmaptest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// Hostile is a scripted peer's end of one DDP stream over an unordered
// transport: it reads the DDP Segments the queue pair under test sends,
// and writes segments with the sequence numbers it chooses (over SCTP and
// data channels, the DDP-SSN), so that it can send the later one first.
type Hostile interface {
	ReadSegment(ctx context.Context) ([]byte, error)
	WriteSegment(seq uint16, seg []byte) error
}

// segment reads segments until one whose RDMAP opcode is op, and returns
// its payload.
func segment(t testing.TB, ctx context.Context, h Hostile, op rdmap.Opcode) []byte {
	t.Helper()
	for {
		seg, err := h.ReadSegment(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", op, err)
		}
		dh, hl, err := ddp.ParseHeader(seg)
		if err != nil {
			t.Fatal(err)
		}
		if rdmap.Control(dh.RsvdULP[0]).Opcode() == op {
			return seg[hl:]
		}
	}
}

func write(t testing.TB, h Hostile, seq uint16, dh ddp.Header, payload []byte) {
	t.Helper()
	if err := h.WriteSegment(seq, append(dh.Append(nil), payload...)); err != nil {
		t.Fatal(err)
	}
}

// AnswerTwice plays a peer that answers one request of p's twice: an
// RDMA Read with two Read Responses, or (atomic) an Atomic Request with
// two Atomic Responses. With laterFirst (an unordered LLP) the later
// sequence number goes first, and of the Atomic Responses MSN 2 before
// MSN 1. The peer's session has just started, its first segment taking
// sequence number 1. The request completes once; the queue pair sends
// RDMAP's Terminate, Unexpected OpCode (0x0/0x2/0x06) with the Terminated
// DDP Header; and a Read Response sent after it is not placed.
func AnswerTwice(t testing.TB, ctx context.Context, h Hostile, p *Peer, atomic, laterFirst bool) {
	t.Helper()
	sink := p.Reg(t, 64, rdmap.LocalWrite)
	if atomic {
		must(t, p.QP.PostAtomic(rdmap.AtomicWR{ID: 1, Op: rdmap.FetchAdd, Add: 1, Local: rdmap.SGE{MR: sink, Offset: 16, Length: 8}, RemoteSTag: 0x1234}))
		req, _, err := rdmap.ParseAtomicRequest(segment(t, ctx, h, rdmap.OpAtomicRequest))
		if err != nil {
			t.Fatal(err)
		}
		order := []uint32{1, 2}
		if laterFirst {
			order = []uint32{2, 1}
		}
		for _, msn := range order {
			dh := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpAtomicResponse))}, QN: rdmap.QNAtomicResp, MSN: msn}
			write(t, h, uint16(msn), dh, (&rdmap.AtomicResponse{OrigReqID: req.ReqID, OrigValue: uint64(msn)}).Append(nil))
		}
	} else {
		must(t, p.QP.PostRead(rdmap.ReadWR{ID: 1, Local: rdmap.SGE{MR: sink, Offset: 16, Length: 32}, RemoteSTag: 0x1234}))
		rr, _, err := rdmap.ParseReadRequest(segment(t, ctx, h, rdmap.OpReadRequest))
		if err != nil {
			t.Fatal(err)
		}
		dh := ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpReadResponse))}, STag: rr.SinkSTag, TO: rr.SinkTO}
		order := []uint16{1, 2}
		if laterFirst {
			order = []uint16{2, 1}
		}
		for _, seq := range order {
			write(t, h, seq, dh, bytes.Repeat([]byte{byte(seq)}, int(rr.RDMARDSZ)))
		}
		defer func() {
			// After the Terminate: dropped, not placed.
			write(t, h, 3, dh, bytes.Repeat([]byte{0xee}, int(rr.RDMARDSZ)))
			t.Cleanup(func() {
				if bytes.IndexByte(sink.Bytes(), 0xee) >= 0 {
					t.Error("a Read Response sent after the Terminate was placed")
				}
			})
		}()
	}
	if c := Wait(t, p.SCQ); c.WRID != 1 || c.Status != rdmap.StatusSuccess {
		t.Fatalf("the request: %+v", c)
	}
	th, _, err := rdmap.ParseTerminate(segment(t, ctx, h, rdmap.OpTerminate))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(th.Err(), term.RDMAPUnexpectedOpcode) || !th.D {
		t.Fatalf("Terminate %v (D=%v), want %v with the Terminated DDP Header", th.Err(), th.D, term.RDMAPUnexpectedOpcode)
	}
}
