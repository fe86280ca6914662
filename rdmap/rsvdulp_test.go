package rdmap

import (
	"bytes"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
)

// RFC 5040 §4.1: "For Send with Invalidate and Send with Solicited Event
// and Invalidate, the second through fifth octets of the DDP RsvdULP
// field MUST be used by RDMAP to carry the Invalidate STag", and for the
// other messages "the Invalidate STag field MUST be set to zero on
// transmit" (RFC 7306 §4.1 likewise for its messages). The segments as the
// raw peer receives them, octet by octet: DDP control, the RDMAP control
// octet, the four RsvdULP octets with the STag most significant octet
// first (network order, RFC 5040 §3), QN, MSN, MO, payload.
func TestInvalidateSTagOctets(t *testing.T) {
	s, peer := rawSide(t, QPConfig{})
	src := s.reg(t, 8, 0)
	copy(src.Bytes(), "abcd")
	sink := s.reg(t, 8, LocalWrite)
	mustPost(t, s.qp.PostSend(SendWR{ID: 1, Invalidate: true, InvalidateSTag: 0x8a7b6c5d, SGL: []SGE{{MR: src, Length: 4}}}))
	mustPost(t, s.qp.PostSend(SendWR{ID: 2, Invalidate: true, Solicited: true, InvalidateSTag: 0x01020304, SGL: []SGE{{MR: src, Length: 2}}}))
	// The ones that carry no Invalidate STag, though the work request
	// names one: zero.
	mustPost(t, s.qp.PostSend(SendWR{ID: 3, InvalidateSTag: 0xffffffff, SGL: []SGE{{MR: src, Length: 1}}}))
	mustPost(t, s.qp.PostSend(SendWR{ID: 4, Solicited: true, InvalidateSTag: 0xffffffff}))
	mustPost(t, s.qp.PostRead(ReadWR{ID: 5, Local: SGE{MR: sink, Length: 8}, RemoteSTag: 0x11223344, RemoteTO: 0x55}))
	want := []string{
		"41 44 8a7b6c5d 00000000 00000001 00000000 61626364",
		"41 46 01020304 00000000 00000002 00000000 6162",
		"41 43 00000000 00000000 00000003 00000000 61",
		"41 45 00000000 00000000 00000004 00000000",
		"41 41 00000000 00000001 00000001 00000000",
	}
	segs := peer.segsFrom(t, len(want))
	for i, w := range want {
		wb := unhex(t, w)
		got := segs[i]
		if i == 4 {
			got = got[:ddp.UntaggedHeaderLen] // a Read Request's header; its body names the local sink
		}
		if !bytes.Equal(got, wb) {
			t.Errorf("segment %d: % x\nwant      % x", i, got, wb)
		}
	}
	peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), sink.STag(), 0, make([]byte, 8)))
	for i := 1; i <= 5; i++ {
		if c := wait(t, s.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
	}
}

// RFC 5040 §4.1: the RDMAP Control octet is RV (bits 24-25), Rsv (bits
// 26-27) and Opcode (bits 28-31), and Rsv is "set to zero by sender,
// ignored by the receiver". 0x73 is 01 11 0011: version 1, both reserved
// bits set, opcode 0011b, a Send. Messages whose reserved bits are set
// are processed as if they were clear: Sends (with SE, with Invalidate),
// an RDMA Write, a Read Request, also with RV 00b ("Both version numbers
// are valid").
func TestReservedControlBitsIgnored(t *testing.T) {
	c := newCrafted(t)
	rbuf := c.reg(t, 64*6, LocalWrite)
	for i := range 6 {
		mustPost(t, c.qp.PostRecv(RecvWR{ID: uint64(10 + i), SGL: []SGE{{MR: rbuf, Offset: uint64(64 * i), Length: 64}}}))
	}
	inv := c.reg(t, 8, RemoteWrite)
	msgs := []struct {
		ctl   byte
		inv   uint32
		flags uint8
	}{
		{0x73, 0, 0}, // newCrafted's own 64-octet buffer, ID 1
		{0x53, 0, 0},
		{0x63, 0, 0},
		{0x33, 0, 0},                        // RV 00b
		{0x75, 0, FlagSolicited},            // Send with SE
		{0x74, inv.STag(), FlagInvalidated}, // Send with Invalidate
		{0x76, 0, FlagSolicited | FlagInvalidated}, // Send with SE and Invalidate, below
	}
	inv2 := c.reg(t, 8, RemoteWrite)
	msgs[6].inv = inv2.STag()
	for i, m := range msgs {
		c.peer.send(t, untaggedSeg(m.ctl, m.inv, QNSend, uint32(i+1), []byte{'m', byte('0' + i)}))
	}
	for i, m := range msgs {
		cq := wait(t, c.rcq)
		id := uint64(1)
		if i > 0 {
			id = uint64(10 + i - 1)
		}
		if cq.Status != StatusSuccess || cq.WRID != id || cq.Op != WorkRecv || cq.ByteLen != 2 || cq.Flags != m.flags {
			t.Fatalf("control %#x: completion %+v", m.ctl, cq)
		}
		if m.flags&FlagInvalidated != 0 && cq.InvalidatedSTag != m.inv {
			t.Fatalf("control %#x: invalidated %#x, want %#x", m.ctl, cq.InvalidatedSTag, m.inv)
		}
	}
	if string(c.rbuf.Bytes()[:2]) != "m0" || string(rbuf.Bytes()[64*5:64*5+2]) != "m6" {
		t.Fatalf("receive buffers % x / % x", c.rbuf.Bytes()[:2], rbuf.Bytes()[64*5:64*5+2])
	}
	// An RDMA Write with control 0x70; Read Requests with 0x71 and, RV
	// 00b, 0x31.
	c.peer.send(t, taggedSeg(0x70, c.src.STag(), 0x1000, []byte("placed")))
	for i, ctl := range []byte{0x71, 0x31} {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{ctl}, QN: QNReadReq, MSN: uint32(i + 1)}
		c.peer.send(t, (&ReadRequest{SinkSTag: 0x99, SinkTO: uint64(i), RDMARDSZ: 6, SrcSTag: c.src.STag(), SrcTO: 0x1000}).Append(h.Append(nil)))
	}
	// The Responses follow the Write on the same receive goroutine: once
	// the peer has them, the Write is placed.
	segs := c.peer.segsFrom(t, 2)
	if string(c.src.Bytes()[:6]) != "placed" {
		t.Fatalf("the Write with control 0x70 placed % x", c.src.Bytes()[:6])
	}
	for i, seg := range segs {
		// The Responses' own control octets have Rsv zero (0x42).
		if w := append(unhex(t, "c1 42 00000099"), 0, 0, 0, 0, 0, 0, 0, byte(i)); !bytes.Equal(seg[:len(w)], w) || string(seg[len(w):]) != "placed" {
			t.Fatalf("segment %d: % x", i, seg)
		}
	}
	if c.qp.State() != StateRunning || len(c.peer.segsFrom(t, 0)) != 2 {
		t.Fatalf("state %v, error %v, %d segments", c.qp.State(), c.qp.Err(), len(c.peer.segsFrom(t, 0)))
	}
	if got := Control(0x73); got.RV() != 1 || got.Opcode() != OpSend || !got.ValidVersion() {
		t.Fatalf("0x73: RV %d opcode %v", got.RV(), got.Opcode())
	}
}

// RFC 7306 §4.1: all its messages have an "Invalidate STag: Set to zero
// by the sender, ignored by the receiver." A crafted peer sends Immediate
// Data, Immediate Data with SE, an Atomic Request and an Atomic Response,
// each with Invalidate STag 0xdeadbeef (not an STag here), and an
// Immediate Data carrying the live STag of a region: each is processed as
// if the field were zero, and the region stays valid.
func TestRFC7306InvalidateSTagIgnored(t *testing.T) {
	s, peer := rawSide(t, QPConfig{})
	rbuf := s.reg(t, 3*16, LocalWrite)
	for i := range 3 {
		mustPost(t, s.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{{MR: rbuf, Offset: uint64(16 * i), Length: 16}}}))
	}
	target := s.reg(t, 64, RemoteAtomic|RemoteWrite)
	setWord(target, 8, 100)
	res := s.reg(t, 8, LocalWrite)
	mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 7, Op: FetchAdd, Add: 1, Local: SGE{MR: res, Length: 8}, RemoteSTag: 0x1234}))
	segs := peer.segsFrom(t, 1)
	_, hl, _ := ddp.ParseHeader(segs[0])
	areq, _, err := ParseAtomicRequest(segs[0][hl:])
	if err != nil {
		t.Fatal(err)
	}

	imm := func(op Opcode, inv, msn uint32, v uint64) []byte {
		return untaggedSeg(byte(MakeControl(op)), inv, QNSend, msn, (&ImmediateData{Data: v}).Append(nil))
	}
	peer.send(t, imm(OpImmediate, 0xdeadbeef, 1, 0x0102030405060708))
	peer.send(t, imm(OpImmediateSE, 0xdeadbeef, 2, 0x1112131415161718))
	peer.send(t, imm(OpImmediate, target.STag(), 3, 42))
	h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicRequest)), 0xde, 0xad, 0xbe, 0xef}, QN: QNReadReq, MSN: 1}
	peer.send(t, (&AtomicRequest{Op: FetchAdd, ReqID: 0x77, STag: target.STag(), TO: 8, AddSwapData: 5, CompareMask: ^uint64(0)}).Append(h.Append(nil)))
	h = ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse)), 0xde, 0xad, 0xbe, 0xef}, QN: QNAtomicResp, MSN: 1}
	peer.send(t, (&AtomicResponse{OrigReqID: areq.ReqID, OrigValue: 0xabc}).Append(h.Append(nil)))

	for i, w := range []struct {
		imm   uint64
		flags uint8
	}{{0x0102030405060708, FlagImm}, {0x1112131415161718, FlagImm | FlagSolicited}, {42, FlagImm}} {
		c := wait(t, s.rcq)
		if c.WRID != uint64(i) || c.Status != StatusSuccess || c.Op != WorkRecvWithImm || c.Imm != w.imm || c.Flags != w.flags || c.InvalidatedSTag != 0 {
			t.Fatalf("Immediate Data %d: %+v", i, c)
		}
	}
	if c := wait(t, s.scq); c.WRID != 7 || c.Status != StatusSuccess || c.Op != WorkFetchAdd || word(res, 0) != 0xabc {
		t.Fatalf("the Atomic Response: %+v, original value %#x", c, word(res, 0))
	}
	// The Atomic Request was carried out and answered: Atomic Response,
	// Request Identifier 0x77, original value 100, its own Invalidate STag
	// zero.
	segs = peer.segsFrom(t, 2)
	if w := unhex(t, "41 4b 00000000 00000003 00000001 00000000 00000077 0000000000000064"); !bytes.Equal(segs[1], w) {
		t.Fatalf("Atomic Response % x\nwant % x", segs[1], w)
	}
	if word(target, 8) != 105 {
		t.Fatalf("the word is %d after FetchAdd 5", word(target, 8))
	}
	// The region named in the third Immediate Data's RsvdULP is still
	// valid: a Write to it is placed, as the Send after it shows (RFC 5040
	// §5.5 rule 10).
	mustPost(t, s.qp.PostRecv(RecvWR{ID: 3, SGL: []SGE{{MR: rbuf, Length: 16}}}))
	peer.send(t, taggedSeg(byte(MakeControl(OpWrite)), target.STag(), 0, []byte("still")))
	peer.send(t, untaggedSeg(byte(MakeControl(OpSend)), 0, QNSend, 4, nil))
	if c := wait(t, s.rcq); c.WRID != 3 || c.Status != StatusSuccess {
		t.Fatalf("the Write to STag %#x and the Send after it: %+v, state %v, error %v", target.STag(), c, s.qp.State(), s.qp.Err())
	}
	if string(target.Bytes()[:5]) != "still" {
		t.Fatalf("the Write to STag %#x placed % x", target.STag(), target.Bytes()[:5])
	}
	if s.qp.State() != StateRunning {
		t.Fatalf("state %v, error %v", s.qp.State(), s.qp.Err())
	}
}

// RFC 5040 §4.1: "For Send, Send with Solicited Event, RDMA Read Request,
// and Terminate, the Invalidate STag field MUST be set to zero on
// transmit and ignored by the receiver." A crafted peer names a valid
// STag of this end there in a Send, a Send with SE and a Read Request:
// nothing is invalidated (the receives complete without
// FlagInvalidated, and the region still takes a Write and a Read
// afterwards). This end's Terminate carries zero there.
func TestInvalidateSTagZeroAndIgnored(t *testing.T) {
	c := newCrafted(t)
	rbuf := c.reg(t, 64, LocalWrite)
	mustPost(t, c.qp.PostRecv(RecvWR{ID: 2, SGL: []SGE{{MR: rbuf, Length: 64}}}))
	victim := c.src.STag()
	c.peer.send(t, untaggedSeg(byte(MakeControl(OpSend)), victim, QNSend, 1, []byte("s1")))
	c.peer.send(t, untaggedSeg(byte(MakeControl(OpSendSE)), victim, QNSend, 2, []byte("s2")))
	for id := uint64(1); id <= 2; id++ {
		cq := wait(t, c.rcq)
		if cq.Status != StatusSuccess || cq.WRID != id || cq.Flags&FlagInvalidated != 0 || cq.InvalidatedSTag != 0 {
			t.Fatalf("receive %d: %+v", id, cq)
		}
	}
	h := ddp.Header{Last: true, DV: 1, QN: QNReadReq, MSN: 1,
		RsvdULP: [5]byte{byte(MakeControl(OpReadRequest)), byte(victim >> 24), byte(victim >> 16), byte(victim >> 8), byte(victim)}}
	c.peer.send(t, (&ReadRequest{SinkSTag: 0x99, SinkTO: 0, RDMARDSZ: 4, SrcSTag: victim, SrcTO: 0x1000}).Append(h.Append(nil)))
	// Still valid: a Write to it is placed, and a second Read of it is
	// answered with what the Write placed.
	c.peer.send(t, taggedSeg(byte(MakeControl(OpWrite)), victim, 0x1000, []byte("kept")))
	c.peer.send(t, rrSeg(2, ReadRequest{SinkSTag: 0x98, SinkTO: 0, RDMARDSZ: 4, SrcSTag: victim, SrcTO: 0x1000}))
	segs := c.peer.segsFrom(t, 2)
	if last := segs[1]; string(last[len(last)-4:]) != "kept" {
		t.Fatalf("the second Read Response carries %q", last[len(last)-4:])
	}
	if c.qp.State() != StateRunning {
		t.Fatalf("state %v: %v", c.qp.State(), c.qp.Err())
	}
	// A Write to an STag that does not exist: this end terminates, and
	// its Terminate's Invalidate STag octets are zero.
	c.peer.send(t, taggedSeg(byte(MakeControl(OpWrite)), 0x7fffff00, 0, []byte("x")))
	segs = c.peer.segsFrom(t, 3)
	tm := segs[2]
	if len(tm) < ddp.UntaggedHeaderLen || Control(tm[1]).Opcode() != OpTerminate {
		t.Fatalf("not a Terminate: % x", tm)
	}
	if !bytes.Equal(tm[2:6], []byte{0, 0, 0, 0}) {
		t.Fatalf("the Terminate's Invalidate STag octets are % x", tm[2:6])
	}
}
