package rdmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// word reads the 64-bit word at off of a region in the machine's byte
// order, which Atomic Operations use (RFC 7306 §5.1.1: "performed in the
// endian format of the target memory").
func word(mr *MemoryRegion, off int) uint64 { return wordOf(mr.Bytes()[off:]) }

func wordOf(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

func setWord(mr *MemoryRegion, off int, v uint64) { binary.NativeEndian.PutUint64(mr.Bytes()[off:], v) }

// FetchAdd and CmpSwap, plain and masked: the peer's word changes as RFC
// 7306 §5.1 says, the original value lands in the local SGE, and the
// completions say which operation and 8 octets.
func TestAtomicOperations(t *testing.T) {
	for _, reorder := range []int{0, 4} {
		a, b := newPair(t, pairOpts{pipe: ddptest.Options{Reorder: reorder, Seed: 9}})
		target := b.reg(t, 64, RemoteAtomic)
		res := a.reg(t, 64, LocalWrite)
		setWord(target, 8, 100)
		type step struct {
			wr       AtomicWR
			op       WorkOp
			orig     uint64
			newValue uint64
		}
		steps := []step{
			{AtomicWR{Op: FetchAdd, Add: 5}, WorkFetchAdd, 100, 105},
			{AtomicWR{Op: FetchAdd, Add: ^uint64(0)}, WorkFetchAdd, 105, 104}, // adding -1
			{AtomicWR{Op: CmpSwap, Compare: 1, Swap: 7}, WorkCompSwap, 104, 104},
			{AtomicWR{Op: CmpSwap, Compare: 104, Swap: 7}, WorkCompSwap, 104, 7},
			// Masked: two 32-bit fields; the low one overflows without
			// carrying into the high one.
			{AtomicWR{Op: FetchAdd, Add: 0x00000001_fffffffa, AddMask: 0x80000000_80000000, Masked: true}, WorkFetchAdd, 7, 0x00000001_00000001},
			// Masked CmpSwap: compare the high half only, swap the low half only.
			{AtomicWR{Op: CmpSwap, Compare: 0x00000001_12345678, CompareMask: 0xffffffff_00000000,
				Swap: 0xdddddddd_0000abcd, SwapMask: 0x00000000_ffffffff, Masked: true}, WorkCompSwap, 0x00000001_00000001, 0x00000001_0000abcd},
			// A masked compare that fails.
			{AtomicWR{Op: CmpSwap, Compare: 0, CompareMask: 1, Swap: 0, SwapMask: ^uint64(0), Masked: true}, WorkCompSwap, 0x00000001_0000abcd, 0x00000001_0000abcd},
		}
		for i, s := range steps {
			wr := s.wr
			wr.ID, wr.Local, wr.RemoteSTag, wr.RemoteTO = uint64(i), SGE{MR: res, Offset: 16, Length: 8}, target.STag(), 8
			mustPost(t, a.qp.PostAtomic(wr))
			c := wait(t, a.scq)
			if c.WRID != uint64(i) || c.Op != s.op || c.Status != StatusSuccess || c.ByteLen != 8 {
				t.Fatalf("step %d: completion %+v", i, c)
			}
			if got := word(res, 16); got != s.orig {
				t.Fatalf("step %d: original value %#x, want %#x", i, got, s.orig)
			}
			// The Response was delivered after the responder changed the
			// word; the pipe orders that.
			if got := word(target, 8); got != s.newValue {
				t.Fatalf("step %d: remote value %#x, want %#x", i, got, s.newValue)
			}
		}
		// Nothing reached the responder's ULP (RFC 7306 §5.2.1 item 3).
		if n := b.rcq.Poll(make([]Completion, 4)) + b.scq.Poll(make([]Completion, 4)); n != 0 {
			t.Fatalf("the responder got %d completions", n)
		}
	}
}

func atomicSeg(msn uint32, r AtomicRequest) []byte {
	h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicRequest))}, QN: QNReadReq, MSN: msn}
	return r.Append(h.Append(nil))
}

// segsFrom waits until the raw peer holds at least n segments and returns
// them.
func (p *rawPeer) segsFrom(t testing.TB, n int) [][]byte {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		p.mu.Lock()
		if len(p.segs) >= n {
			s := append([][]byte(nil), p.segs...)
			p.mu.Unlock()
			return s
		}
		p.mu.Unlock()
		select {
		case <-p.got:
		case <-deadline:
			t.Fatalf("the raw peer has not received %d segments", n)
		}
	}
}

// rawSide is a queue pair facing a raw peer.
func rawSide(t *testing.T, cfg QPConfig) (*side, *rawPeer) {
	ea, eb := ddptest.New(ddptest.Options{MULPDU: 2000})
	peer := &rawPeer{end: ea, got: make(chan struct{}, 1)}
	s := newSide(t, eb, cfg)
	ea.Attach(peer)
	eb.Attach(s.qp.Stream())
	if err := s.qp.Start(eb, ddp.Start{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ea.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.qp.Close(ctx)
	})
	return s, peer
}

// The DDP segments of RFC 7306 Appendix A, octet by octet, as the queue
// pair sends them: A.1 an Atomic Request (untagged, QN 1, opcode 1010b,
// Invalidate STag zero), A.2 an Atomic Response (QN 3, opcode 1011b), A.3
// Immediate Data and Immediate Data with SE (QN 0, opcodes 1000b and
// 1001b, 8 octets), and an RDMA Write with Immediate as a Write followed
// by Immediate Data.
func TestRFC7306Segments(t *testing.T) {
	s, peer := rawSide(t, QPConfig{})
	res := s.reg(t, 16, LocalWrite)
	target, _ := s.pd.RegisterMemory(make([]byte, 64), 0x1000, RemoteAtomic)
	setWord(target, 8, 41)
	src := s.reg(t, 4, 0)
	copy(src.Bytes(), "data")

	mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 1, Op: CmpSwap, Local: SGE{MR: res, Length: 8}, RemoteSTag: 0x11223344, RemoteTO: 0x0102030405060708,
		Compare: 0xc1c2c3c4c5c6c7c8, Swap: 0xa1a2a3a4a5a6a7a8}))
	mustPost(t, s.qp.PostSend(SendWR{ID: 2, WithImm: true, Imm: 0x0102030405060708}))
	mustPost(t, s.qp.PostSend(SendWR{ID: 3, WithImm: true, Imm: 0x1112131415161718, Solicited: true}))
	mustPost(t, s.qp.PostWrite(WriteWR{ID: 4, SGL: []SGE{{MR: src, Length: 4}}, RemoteSTag: 0x55667788, RemoteTO: 0x10, WithImm: true, Imm: 42}))
	segs := peer.segsFrom(t, 5)
	// The Request Identifier is the queue pair's choice; it is the first
	// Atomic Request's, 1.
	want := []string{
		"41 4a 00000000 00000001 00000001 00000000" + " 00000002 00000001 11223344 0102030405060708 a1a2a3a4a5a6a7a8 ffffffffffffffff c1c2c3c4c5c6c7c8 ffffffffffffffff",
		"41 48 00000000 00000000 00000001 00000000" + " 0102030405060708",
		"41 49 00000000 00000000 00000002 00000000" + " 1112131415161718",
		"c1 40 55667788 0000000000000010" + " 64617461",
		"41 48 00000000 00000000 00000003 00000000" + " 000000000000002a",
	}
	for i, w := range want {
		if !bytes.Equal(segs[i], unhex(t, w)) {
			t.Fatalf("segment %d: % x\nwant % x", i, segs[i], unhex(t, w))
		}
	}
	// FetchAdd: Compare Data zero and Compare Mask all ones on transmit
	// (§5.2.1), Add Mask zero when not masked.
	mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 5, Op: FetchAdd, Local: SGE{MR: res, Offset: 8, Length: 8}, RemoteSTag: 1, RemoteTO: 8, Add: 3}))
	segs = peer.segsFrom(t, 6)
	if w := unhex(t, "41 4a 00000000 00000001 00000002 00000000 00000000 00000002 00000001 0000000000000008 0000000000000003 0000000000000000 0000000000000000 ffffffffffffffff"); !bytes.Equal(segs[5], w) {
		t.Fatalf("FetchAdd segment % x\nwant % x", segs[5], w)
	}

	// A.2: the queue pair answers the peer's FetchAdd on its own memory
	// with an Atomic Response on queue 3, MSN 1, and carries it out.
	peer.send(t, atomicSeg(1, AtomicRequest{Op: FetchAdd, ReqID: 0xabcdef01, STag: target.STag(), TO: 0x1008, AddSwapData: 1, CompareMask: ^uint64(0)}))
	segs = peer.segsFrom(t, 7)
	if w := unhex(t, "41 4b 00000000 00000003 00000001 00000000 abcdef01 0000000000000029"); !bytes.Equal(segs[6], w) {
		t.Fatalf("Atomic Response % x\nwant % x", segs[6], w)
	}
	if word(target, 8) != 42 {
		t.Fatalf("the FetchAdd left %d", word(target, 8))
	}
	// The Responses to its own requests complete them, in order.
	for _, r := range []AtomicResponse{{OrigReqID: 1, OrigValue: 0xc1c2c3c4c5c6c7c8}, {OrigReqID: 2, OrigValue: 77}} {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: r.OrigReqID}
		peer.send(t, r.Append(h.Append(nil)))
	}
	for i, op := range []WorkOp{WorkCompSwap, WorkSend, WorkSend, WorkWrite, WorkFetchAdd} {
		c := wait(t, s.scq)
		if c.WRID != uint64(i+1) || c.Op != op || c.Status != StatusSuccess {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	if word(res, 0) != 0xc1c2c3c4c5c6c7c8 || word(res, 8) != 77 {
		t.Fatalf("original values %#x %#x", word(res, 0), word(res, 8))
	}
}

// Every error RFC 7306 names on an incoming message, provoked by a crafted
// peer: the queue pair answers with exactly that Terminate, with the DDP
// Segment Length and Terminated DDP Header and without a Terminated RDMA
// Header ("the Error Type, Error Code, and Terminated DDP Header fields are
// included in the Terminate Message, but the Terminated RDMA Header field
// is set to zero", §8.1 item 2), and memory is unchanged.
func TestRFC7306Errors(t *testing.T) {
	type fixture struct {
		atom, noatom, top, foreign *MemoryRegion
	}
	req := func(op AtomicOp, stag func(f *fixture) uint32, to uint64) func(f *fixture) []byte {
		return func(f *fixture) []byte {
			return atomicSeg(1, AtomicRequest{Op: op, ReqID: 9, STag: stag(f), TO: to, AddSwapData: 1, CompareMask: ^uint64(0)})
		}
	}
	atom := func(f *fixture) uint32 { return f.atom.STag() }
	imm := func(ctl byte, n int) func(f *fixture) []byte {
		return func(f *fixture) []byte { return untaggedSeg(ctl, 0, 0, 1, bytes.Repeat([]byte{7}, n)) }
	}
	for _, tc := range []struct {
		name string
		seg  func(f *fixture) []byte
		want *term.Error
		cfg  QPConfig
	}{
		// §8.2: "The RDMAP layer MUST validate that the Remote Peer's
		// Tagged ULP Buffer address references a ULP Buffer address that
		// is 64-bit aligned. In the case of an error, ... Remote Operation
		// Error with Error Code Name "Catastrophic error, localized to
		// RDMAP Stream"".
		{"FetchAdd misaligned", req(FetchAdd, atom, 0x1004), term.RDMAPCatastrophicStream, QPConfig{}},
		{"CmpSwap misaligned", req(CmpSwap, atom, 0x1001), term.RDMAPCatastrophicStream, QPConfig{}},
		// §5.2.1 item 4: an AOpCode the RNIC does not support.
		{"reserved AOpCode 0001b", req(1, atom, 0x1000), term.RDMAPUnexpectedOpcode, QPConfig{}},
		{"unassigned AOpCode 1111b", req(0xf, atom, 0x1000), term.RDMAPUnexpectedOpcode, QPConfig{}},
		// The remote addressing of Reads (§5): RFC 5040 Figure 9's codes.
		{"invalid STag", req(FetchAdd, func(f *fixture) uint32 { return f.atom.STag() ^ 0xff00 }, 0x1000), term.RDMAPInvalidSTag, QPConfig{}},
		{"no remote atomic rights", req(FetchAdd, func(f *fixture) uint32 { return f.noatom.STag() }, 0), term.RDMAPAccessRights, QPConfig{}},
		{"another domain's STag", req(FetchAdd, func(f *fixture) uint32 { return f.foreign.STag() }, 0), term.RDMAPSTagNotAssociated, QPConfig{}},
		{"below the base", req(FetchAdd, atom, 0xff8), term.RDMAPBaseBounds, QPConfig{}},
		{"past the end", req(FetchAdd, atom, 0x1040), term.RDMAPBaseBounds, QPConfig{}},
		{"last octets past the end", req(FetchAdd, atom, 0x103c), term.RDMAPBaseBounds, QPConfig{}},
		{"TO wrap", req(FetchAdd, func(f *fixture) uint32 { return f.top.STag() }, ^uint64(0)-3), term.RDMAPTOWrap, QPConfig{}},
		// Malformed messages.
		{"short Atomic Request", func(f *fixture) []byte { return untaggedSeg(0x4a, 0, 1, 1, make([]byte, 20)) }, term.RDMAPOpUnspecified, QPConfig{}},
		{"Atomic Request on queue 0", func(f *fixture) []byte { return untaggedSeg(0x4a, 0, 0, 1, make([]byte, 52)) }, term.RDMAPUnexpectedOpcode, QPConfig{}},
		{"tagged Atomic Request", func(f *fixture) []byte { return taggedSeg(0x4a, f.atom.STag(), 0x1000, make([]byte, 8)) }, term.RDMAPUnexpectedOpcode, QPConfig{}},
		{"Atomic Response never requested", func(f *fixture) []byte { return untaggedSeg(0x4b, 0, 3, 1, make([]byte, 12)) }, term.RDMAPUnexpectedOpcode, QPConfig{}},
		// §8.2: "The RDMA Version MUST be valid"; §4.1: RV 01b.
		{"Immediate Data with RDMAP version 0", imm(0x08, 8), term.RDMAPInvalidVersion, QPConfig{}},
		{"Atomic Request with RDMAP version 0", func(f *fixture) []byte {
			s := req(FetchAdd, atom, 0x1000)(f)
			s[1] = 0x0a
			return s
		}, term.RDMAPInvalidVersion, QPConfig{}},
		// §6.3: "The Remote Peer MUST check that Immediate Data and
		// Immediate Data with SE Messages include exactly 8 bytes".
		{"Immediate Data of 4 octets", imm(0x48, 4), term.RDMAPOpUnspecified, QPConfig{}},
		{"Immediate Data with SE of 12 octets", imm(0x49, 12), term.RDMAPOpUnspecified, QPConfig{}},
		{"Immediate Data of 0 octets", imm(0x48, 0), term.RDMAPOpUnspecified, QPConfig{}},
		// A queue pair without the extensions (§1.1).
		{"Atomic Request without atomics", req(FetchAdd, atom, 0x1000), term.RDMAPUnexpectedOpcode, QPConfig{NoAtomics: true}},
		{"Immediate Data without immediate data", imm(0x48, 8), term.RDMAPUnexpectedOpcode, QPConfig{NoImmediate: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, peer := rawSide(t, tc.cfg)
			f := &fixture{}
			f.atom, _ = s.pd.RegisterMemory(fill(make([]byte, 64), 1), 0x1000, RemoteAtomic|RemoteRead|RemoteWrite)
			f.noatom = s.reg(t, 64, RemoteRead|RemoteWrite)
			f.top, _ = s.pd.RegisterMemory(make([]byte, 64), ^uint64(0)-63, RemoteAtomic)
			f.foreign, _ = s.dev.NewProtectionDomain().RegisterMemory(make([]byte, 64), 0, RemoteAtomic)
			rbuf := s.reg(t, 64, LocalWrite)
			s.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: rbuf, Length: 64}}})
			before := bytes.Clone(f.atom.Bytes())
			seg := tc.seg(f)
			peer.send(t, seg)
			h, th := peer.terminate(t)
			if h.Tagged || h.QN != QNTerminate || !h.Last {
				t.Fatalf("Terminate's DDP header %v", h)
			}
			if got := th.Err(); !errors.Is(got, tc.want) {
				t.Fatalf("Terminate %v, want %v", got, tc.want)
			}
			hl := ddp.Control(seg[0]).HeaderLen()
			if !th.M || !th.D || !bytes.Equal(th.DDPHeader, seg[:hl]) || int(th.SegLen) != len(seg) || th.R {
				t.Fatalf("Terminate M=%v D=%v R=%v % x seglen %d; want the DDP header % x and length %d, no RDMA header", th.M, th.D, th.R, th.DDPHeader, th.SegLen, seg[:hl], len(seg))
			}
			// "the Responder's memory MUST NOT be modified" (§5.1.1).
			if !bytes.Equal(before, f.atom.Bytes()) || !bytes.Equal(f.top.Bytes(), make([]byte, 64)) {
				t.Fatal("memory changed")
			}
			if s.qp.State() != StateTerminating || !errors.Is(s.qp.Err(), tc.want) {
				t.Fatalf("state %v err %v", s.qp.State(), s.qp.Err())
			}
			// The receive buffer: flushed, or (Immediate Data of the wrong
			// length, which consumed it) completed in error.
			if c := wait(t, s.rcq); c.Status == StatusSuccess || (c.Status == StatusLocLenErr) != (tc.want == term.RDMAPOpUnspecified && seg[1]&0x0e == 0x08) {
				t.Fatalf("receive completion %+v", c)
			}
		})
	}
}

// An Atomic Request whose region goes away between its delivery and its
// turn in the send route fails then: "For errors detected while creating
// an ... Atomic Response, ... the Terminate Message and Error code are
// sent instead of the Message. In this case, the Error Type and Error
// Code fields are included in the Terminate Message, but the Terminated
// DDP Header and Terminated RDMA Header fields are set to zero." (RFC 7306
// §8.1 item 1)
func TestAtomicResponseCreationError(t *testing.T) {
	s, peer := rawSide(t, QPConfig{})
	target := s.reg(t, 64, RemoteAtomic)
	s.qp.sendMu.Lock() // the send route waits
	peer.send(t, atomicSeg(1, AtomicRequest{Op: FetchAdd, ReqID: 3, STag: target.STag(), TO: 0, AddSwapData: 1, CompareMask: ^uint64(0)}))
	if !eventually(func() bool {
		s.qp.mu.Lock()
		defer s.qp.mu.Unlock()
		return len(s.qp.queued) == 1
	}) {
		t.Fatal("the Atomic Request was not delivered")
	}
	if err := target.Deregister(); err != nil {
		t.Fatal(err)
	}
	s.qp.sendMu.Unlock()
	signal(s.qp.wake)
	_, th := peer.terminate(t)
	if !errors.Is(th.Err(), term.RDMAPInvalidSTag) || th.M || th.D || th.R || th.Len() != 4 {
		t.Fatalf("Terminate %v", &th)
	}
	if word(target, 0) != 0 {
		t.Fatal("the atomic changed deregistered memory")
	}
	for _, seg := range peer.segsFrom(t, 1) {
		if Control(seg[1]).Opcode() == OpAtomicResponse {
			t.Fatal("an Atomic Response was sent")
		}
	}
}

// "Atomic Operation Request Messages MUST NOT start processing at the
// Responder until they have been Delivered to RDMAP by DDP" (RFC 7306
// §5.4 rule 3): a request in two segments does nothing before its last.
func TestAtomicProcessedOnDelivery(t *testing.T) { synctest.Test(t, testAtomicProcessedOnDelivery) }

func testAtomicProcessedOnDelivery(t *testing.T) {
	s, peer := rawSide(t, QPConfig{})
	target := s.reg(t, 64, RemoteAtomic)
	setWord(target, 0, 10)
	body := (&AtomicRequest{Op: FetchAdd, ReqID: 5, STag: target.STag(), AddSwapData: 1, CompareMask: ^uint64(0)}).Append(nil)
	h := ddp.Header{DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicRequest))}, QN: QNReadReq, MSN: 1}
	peer.send(t, append(h.Append(nil), body[:30]...))
	synctest.Wait()
	if word(target, 0) != 10 || len(peer.segsFrom(t, 0)) != 0 {
		t.Fatal("the Atomic Request was processed before it was delivered")
	}
	h.Last, h.MO = true, 30
	peer.send(t, append(h.Append(nil), body[30:]...))
	segs := peer.segsFrom(t, 1)
	resp, _, err := ParseAtomicResponse(segs[0][ddp.UntaggedHeaderLen:])
	if err != nil || resp.OrigReqID != 5 || resp.OrigValue != 10 || word(target, 0) != 11 {
		t.Fatalf("response %+v %v, word %d", resp, err, word(target, 0))
	}
}

// The responder's ordering of Read and Atomic Responses, RFC 7306 §7:
// "RDMA Read Response Message will not be generated until Atomic Response
// Message has been generated" (Atomic, then Read), "Atomic Response
// Message will not be generated until RDMA Read Response has been
// generated" (Read, then Atomic) and "Second Atomic Request Message will
// not be processed until first Atomic Response has been generated". The
// requests go as one batch, and the responder's LLP (a) keeps segments by
// reference until it flushes, as MPA's gather list does: a Read before an
// Atomic still returns the word from before it.
func TestAtomicOrderWithReads(t *testing.T) {
	a, b := newPair(t, pairOpts{hold: true})
	target := a.reg(t, 64, RemoteAtomic|RemoteRead)
	setWord(target, 0, 7)
	sink := b.reg(t, 64, LocalWrite)
	res := b.reg(t, 64, LocalWrite)
	for round := 0; round < 3; round++ {
		v := word(target, 0)
		err := b.qp.PostBatch(func() error {
			if err := b.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: sink, Offset: 0, Length: 8}, RemoteSTag: target.STag()}); err != nil {
				return err
			}
			if err := b.qp.PostAtomic(AtomicWR{ID: 2, Op: FetchAdd, Add: 1, Local: SGE{MR: res, Offset: 0, Length: 8}, RemoteSTag: target.STag()}); err != nil {
				return err
			}
			if err := b.qp.PostRead(ReadWR{ID: 3, Local: SGE{MR: sink, Offset: 8, Length: 8}, RemoteSTag: target.STag()}); err != nil {
				return err
			}
			if err := b.qp.PostAtomic(AtomicWR{ID: 4, Op: CmpSwap, Compare: v + 1, Swap: 100 * v, Local: SGE{MR: res, Offset: 8, Length: 8}, RemoteSTag: target.STag()}); err != nil {
				return err
			}
			if err := b.qp.PostAtomic(AtomicWR{ID: 5, Op: FetchAdd, Add: 3, Local: SGE{MR: res, Offset: 16, Length: 8}, RemoteSTag: target.STag()}); err != nil {
				return err
			}
			return b.qp.PostRead(ReadWR{ID: 6, Local: SGE{MR: sink, Offset: 16, Length: 8}, RemoteSTag: target.STag()})
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 6; i++ {
			if c := wait(t, b.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
				t.Fatalf("completion %+v", c)
			}
		}
		got := []uint64{word(sink, 0), word(res, 0), word(sink, 8), word(res, 8), word(res, 16), word(sink, 16)}
		want := []uint64{v, v, v + 1, v + 1, 100 * v, 100*v + 3}
		if !slicesEqual(got, want) {
			t.Fatalf("round %d: read, add, read, swap, add, read saw %d, want %d", round, got, want)
		}
	}
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// At most AtomicORD Atomic Requests are outstanding; the rest wait in the
// send queue. A Fence waits for earlier Atomics as for Reads.
func TestAtomicORDAndFence(t *testing.T) { synctest.Test(t, testAtomicORDAndFence) }

func testAtomicORDAndFence(t *testing.T) {
	s, peer := rawSide(t, QPConfig{AtomicORD: 2})
	res := s.reg(t, 64, LocalWrite)
	for i := range 5 {
		mustPost(t, s.qp.PostAtomic(AtomicWR{ID: uint64(i), Op: FetchAdd, Add: 1, Local: SGE{MR: res, Offset: uint64(8 * i), Length: 8}, RemoteSTag: 1}))
	}
	mustPost(t, s.qp.PostSend(SendWR{ID: 5, Fence: true}))
	count := func() (atomics, sends int) {
		synctest.Wait()
		for _, seg := range peer.segsFrom(t, 0) {
			switch Control(seg[1]).Opcode() {
			case OpAtomicRequest:
				atomics++
			case OpSend:
				sends++
			}
		}
		return
	}
	if n, _ := count(); n != 2 {
		t.Fatalf("%d Atomic Requests outstanding with an AtomicORD of 2", n)
	}
	respond := func(id uint32) {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: id}
		peer.send(t, (&AtomicResponse{OrigReqID: id, OrigValue: uint64(id)}).Append(h.Append(nil)))
	}
	respond(1)
	if c := wait(t, s.scq); c.WRID != 0 || c.Op != WorkFetchAdd || word(res, 0) != 1 {
		t.Fatalf("completion %+v", c)
	}
	if n, _ := count(); n != 3 {
		t.Fatalf("%d Atomic Requests after one Response, want 3", n)
	}
	for id := uint32(2); id <= 3; id++ {
		respond(id)
		if n, _ := count(); n != int(id)+2 {
			t.Fatalf("%d Atomic Requests after %d Responses", n, id)
		}
	}
	respond(4)
	if n, sends := count(); n != 5 || sends != 0 {
		t.Fatalf("%d Atomic Requests, %d Sends: the fenced Send went before the last Atomic completed", n, sends)
	}
	respond(5)
	if _, sends := count(); sends != 1 {
		t.Fatal("the fenced Send did not go once the Atomics completed")
	}
	for i := 1; i <= 5; i++ {
		if c := wait(t, s.scq); c.WRID != uint64(i) || c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
	}
	// A Response whose Original Request Identifier is not the oldest
	// outstanding request's is invalid (§5.2.2 item 7).
	mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 6, Op: FetchAdd, Local: SGE{MR: res, Length: 8}, RemoteSTag: 1}))
	count()
	h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpAtomicResponse))}, QN: QNAtomicResp, MSN: 6}
	peer.send(t, (&AtomicResponse{OrigReqID: 99}).Append(h.Append(nil)))
	if _, th := peer.terminate(t); !errors.Is(th.Err(), term.RDMAPOpUnspecified) || !th.D {
		t.Fatalf("Terminate %v", th.Err())
	}
	if c := wait(t, s.scq); c.WRID != 6 || c.Status != StatusWRFlushErr {
		t.Fatalf("completion %+v", c)
	}
}

// A peer that floods Atomic Requests past the AtomicIRD, or Read Requests
// past the IRD, gets DDP "no buffer" on queue 1, though the two share the
// queue's IRD+AtomicIRD buffers (RFC 7306 §5.2.2 rule 4).
func TestAtomicIRDEnforced(t *testing.T) {
	for _, reads := range []bool{false, true} {
		ea, eb := ddptest.New(ddptest.Options{Depth: 1})
		peer := &gatedPeer{rawPeer: rawPeer{end: ea, got: make(chan struct{}, 1)}, gate: make(chan struct{})}
		s := newSide(t, eb, QPConfig{IRD: 2, AtomicIRD: 2})
		ea.Attach(peer)
		eb.Attach(s.qp.Stream())
		s.qp.Start(eb, ddp.Start{})
		target := s.reg(t, 64, RemoteAtomic|RemoteRead)
		for msn := uint32(1); msn <= 8; msn++ {
			if reads {
				peer.send(t, rrSeg(msn, ReadRequest{SinkSTag: 1, RDMARDSZ: 8, SrcSTag: target.STag()}))
			} else {
				peer.send(t, atomicSeg(msn, AtomicRequest{Op: FetchAdd, ReqID: msn, STag: target.STag(), AddSwapData: 1, CompareMask: ^uint64(0)}))
			}
		}
		waitState(t, s.qp, StateTerminating)
		if !errors.Is(s.qp.Err(), term.DDPNoBuffer) {
			t.Fatalf("reads %v: error %v", reads, s.qp.Err())
		}
		close(peer.gate)
		_, th := peer.terminate(t)
		if !errors.Is(th.Err(), term.DDPNoBuffer) || ddp_QN(th.DDPHeader) != QNReadReq {
			t.Fatalf("Terminate %v for % x", th.Err(), th.DDPHeader)
		}
		ea.Close()
	}
}

// An Atomic Operation to a peer without atomics (QPConfig.NoAtomics, as
// Linux siw is) fails cleanly: the peer answers with a Terminate
// "Unexpected OpCode" naming the request's DDP header, the work request
// completes with REM_OP_ERR and the peer's reason, later ones flush, and
// both streams stop. RFC 7306 §1.1: "the new operations can be attempted,
// and reported errors can be used to determine a remote peer's
// capabilities ... A Remote Operation Error or Unexpected OpCode error
// will be reported by the remote peer".
func TestAtomicToPeerWithoutAtomics(t *testing.T) {
	ea, eb := ddptest.New(ddptest.Options{})
	a, b := newSide(t, ea, QPConfig{}), newSide(t, eb, QPConfig{NoAtomics: true, NoImmediate: true})
	ea.Attach(a.qp.Stream())
	eb.Attach(b.qp.Stream())
	a.qp.Start(ea, ddp.Start{})
	b.qp.Start(eb, ddp.Start{})
	defer ea.Close()
	res := a.reg(t, 16, LocalWrite)
	if err := b.qp.PostAtomic(AtomicWR{Op: FetchAdd, Local: SGE{MR: b.reg(t, 8, LocalWrite), Length: 8}}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("PostAtomic without atomics: %v", err)
	}
	if err := b.qp.PostSend(SendWR{WithImm: true}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Immediate Data without it: %v", err)
	}
	// "a FetchAdd operation with "Add Data" set to 0 can safely be used to
	// determine the existence of Atomic Operations" (§1.1).
	mustPost(t, a.qp.PostAtomic(AtomicWR{ID: 1, Op: FetchAdd, Add: 0, Local: SGE{MR: res, Length: 8}, RemoteSTag: 0x1234}))
	mustPost(t, a.qp.PostAtomic(AtomicWR{ID: 2, Op: CmpSwap, Local: SGE{MR: res, Offset: 8, Length: 8}, RemoteSTag: 0x1234}))
	c := wait(t, a.scq)
	if c.WRID != 1 || c.Op != WorkFetchAdd || c.Status != StatusRemOpErr || !errors.Is(c.Err, term.RDMAPUnexpectedOpcode) {
		t.Fatalf("completion %+v", c)
	}
	if te, ok := c.Err.(*term.Error); !ok || te.Local() {
		t.Fatalf("the error is not the peer's: %v", c.Err)
	}
	if c := wait(t, a.scq); c.WRID != 2 || c.Status != StatusWRFlushErr {
		t.Fatalf("completion %+v", c)
	}
	waitState(t, a.qp, StateTerminating)
	waitState(t, b.qp, StateTerminating)
	if !errors.Is(b.qp.Err(), term.RDMAPUnexpectedOpcode) || !errors.Is(a.qp.Err(), term.RDMAPUnexpectedOpcode) {
		t.Fatalf("errors %v / %v", a.qp.Err(), b.qp.Err())
	}
}

// A peer without RFC 7306 answers an Atomic Request with Unexpected
// OpCode and no Terminated DDP Header: the oldest outstanding Atomic takes
// the peer's error. Linux siw sends that Terminate with its Layer and
// Error Type nibbles swapped (20 06 00 00, what mpa.TestAtomicSiw
// records): decoded by RFC 5040 §4.8, it is MPA's Insufficient IRD, which
// names no request, and the atomic is flushed with it.
func TestAtomicPeerWithoutAtomics(t *testing.T) {
	for _, tc := range []struct {
		wire   string
		status Status
		want   *term.Error
	}{
		{"02060000", StatusRemOpErr, term.RDMAPUnexpectedOpcode},
		{"20060000", StatusWRFlushErr, term.MPAInsufficientIRD},
	} {
		s, peer := rawSide(t, QPConfig{})
		res := s.reg(t, 16, LocalWrite)
		mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 1, Op: FetchAdd, Local: SGE{MR: res, Length: 8}, RemoteSTag: 1}))
		mustPost(t, s.qp.PostAtomic(AtomicWR{ID: 2, Op: FetchAdd, Local: SGE{MR: res, Offset: 8, Length: 8}, RemoteSTag: 1}))
		peer.segsFrom(t, 2)
		peer.send(t, untaggedSeg(0x47, 0, QNTerminate, 1, unhex(t, tc.wire)))
		if c := wait(t, s.scq); c.WRID != 1 || c.Status != tc.status || !errors.Is(c.Err, tc.want) {
			t.Fatalf("%s: completion %+v", tc.wire, c)
		}
		if c := wait(t, s.scq); c.WRID != 2 || c.Status != StatusWRFlushErr {
			t.Fatalf("%s: completion %+v", tc.wire, c)
		}
		if !errors.Is(s.qp.Err(), tc.want) {
			t.Fatalf("%s: %v", tc.wire, s.qp.Err())
		}
	}
}

// A peer's protection error on an Atomic Request (the Terminate names its
// queue 1 MSN) completes that request with REM_ACCESS_ERR.
func TestAtomicRemoteAccessError(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	res := a.reg(t, 8, LocalWrite)
	noatom := b.reg(t, 64, RemoteRead|RemoteWrite)
	sink := a.reg(t, 8, LocalWrite)
	mustPost(t, a.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: sink, Length: 8}, RemoteSTag: noatom.STag()}))
	if c := wait(t, a.scq); c.Status != StatusSuccess {
		t.Fatalf("read %+v", c)
	}
	mustPost(t, a.qp.PostAtomic(AtomicWR{ID: 2, Op: FetchAdd, Add: 1, Local: SGE{MR: res, Length: 8}, RemoteSTag: noatom.STag()}))
	if c := wait(t, a.scq); c.WRID != 2 || c.Status != StatusRemAccessErr || !errors.Is(c.Err, term.RDMAPAccessRights) {
		t.Fatalf("completion %+v", c)
	}
	if !bytes.Equal(noatom.Bytes(), make([]byte, 64)) {
		t.Fatal("memory changed")
	}
}

// Posting checks: the local SGE is 8 octets with LocalWrite; the
// operation is FetchAdd or CmpSwap; the atomic ORD is not 0; Immediate Data
// has no payload and no Invalidate STag.
func TestRFC7306PostErrors(t *testing.T) {
	a, _ := newPair(t, pairOpts{})
	lw := a.reg(t, 16, LocalWrite)
	ro := a.reg(t, 16, 0)
	for _, wr := range []AtomicWR{
		{Op: FetchAdd, Local: SGE{MR: lw, Length: 4}},
		{Op: FetchAdd, Local: SGE{MR: lw, Length: 16}},
		{Op: FetchAdd, Local: SGE{MR: ro, Length: 8}},
		{Op: FetchAdd, Local: SGE{MR: lw, Offset: 12, Length: 8}},
		{Op: 1, Local: SGE{MR: lw, Length: 8}},
		{Op: FetchAdd},
	} {
		if err := a.qp.PostAtomic(wr); err == nil {
			t.Errorf("%+v posted", wr)
		}
	}
	for _, wr := range []SendWR{
		{WithImm: true, SGL: []SGE{{MR: lw, Length: 1}}},
		{WithImm: true, Invalidate: true, InvalidateSTag: 1},
	} {
		if err := a.qp.PostSend(wr); err == nil {
			t.Errorf("%+v posted", wr)
		}
	}
	ea, _ := ddptest.New(ddptest.Options{})
	s := newSide(t, ea, QPConfig{})
	if err := s.qp.SetAtomicLimits(9, 0); err == nil {
		t.Error("SetAtomicLimits raised the AtomicIRD")
	}
	if err := s.qp.SetAtomicLimits(4, 0); err != nil {
		t.Fatal(err)
	}
	if ird, ord := s.qp.AtomicLimits(); ird != 4 || ord != 0 {
		t.Fatalf("limits %d %d", ird, ord)
	}
	s.qp.Start(ea, ddp.Start{})
	if err := s.qp.PostAtomic(AtomicWR{Op: FetchAdd, Local: SGE{MR: s.reg(t, 8, LocalWrite), Length: 8}}); err == nil {
		t.Error("an atomic with an atomic ORD of 0 posted")
	}
	if err := s.qp.SetAtomicLimits(1, 1); err == nil {
		t.Error("SetAtomicLimits on a running queue pair")
	}
}

// An Atomic Operation's round trip allocates no more than an RDMA Read's
// of 8 octets: the work request itself; the responder's Atomic Response
// and the requester's completion allocate nothing.
func TestAtomicAllocs(t *testing.T) {
	a, b := newPair(t, pairOpts{cfg: QPConfig{SendDepth: 4}})
	target := b.reg(t, 64, RemoteAtomic|RemoteRead)
	local := a.reg(t, 8, LocalWrite)
	measure := func(post func() error) float64 {
		return testing.AllocsPerRun(200, func() {
			if err := post(); err != nil {
				t.Fatal(err)
			}
			if c := wait(t, a.scq); c.Status != StatusSuccess {
				t.Fatalf("%+v", c)
			}
		})
	}
	read := measure(func() error {
		return a.qp.PostRead(ReadWR{Local: SGE{MR: local, Length: 8}, RemoteSTag: target.STag()})
	})
	atomic := measure(func() error {
		return a.qp.PostAtomic(AtomicWR{Op: FetchAdd, Add: 1, Local: SGE{MR: local, Length: 8}, RemoteSTag: target.STag()})
	})
	t.Logf("allocations: RDMA Read %.1f, FetchAdd %.1f", read, atomic)
	if atomic > read {
		t.Fatalf("a FetchAdd allocates %.1f times, an 8-octet Read %.1f", atomic, read)
	}
}
