package rdmap

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
	"github.com/iwarpgo/iwarp/term"
)

// rawPeer is a hand-driven peer: it sends whatever segments a test
// builds and records every segment the queue pair sends back.
type rawPeer struct {
	end  *ddptest.End
	mu   sync.Mutex
	segs [][]byte
	got  chan struct{}
}

func (p *rawPeer) Receive(seq uint32, seg []byte) error {
	p.mu.Lock()
	p.segs = append(p.segs, append([]byte(nil), seg...))
	p.mu.Unlock()
	select {
	case p.got <- struct{}{}:
	default:
	}
	return nil
}

func (p *rawPeer) Close(error) {}

func (p *rawPeer) send(t testing.TB, seg []byte) {
	t.Helper()
	h, hl, err := ddp.ParseHeader(seg)
	if err != nil {
		// Deliberately malformed: send as is.
		p.end.WriteSegment(seg, nil)
		return
	}
	_ = h
	if err := p.end.WriteSegment(seg[:hl], [][]byte{seg[hl:]}); err != nil {
		t.Fatal(err)
	}
}

// terminate waits for the Terminate the queue pair sends and decodes it.
func (p *rawPeer) terminate(t testing.TB) (ddp.Header, TerminateHeader) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		p.mu.Lock()
		for _, s := range p.segs {
			h, hl, err := ddp.ParseHeader(s)
			if err == nil && Control(h.RsvdULP[0]).Opcode() == OpTerminate {
				p.mu.Unlock()
				th, n, err := ParseTerminate(s[hl:])
				if err != nil || n != len(s)-hl {
					t.Fatalf("Terminate does not parse: %v (% x)", err, s)
				}
				return h, th
			}
		}
		p.mu.Unlock()
		select {
		case <-p.got:
		case <-deadline:
			t.Fatal("no Terminate")
		}
	}
}

// checkTerminate waits for the Terminate the queue pair sends for seg and
// checks it: its own DDP header (untagged, queue 2, MSN 1, last), the
// triple want, and, as Figure 10 requires of the errors here, the
// Terminated DDP Header and the DDP Segment Length of seg. It returns the
// Terminate for the caller's check of the RDMA Header.
func (p *rawPeer) checkTerminate(t testing.TB, seg []byte, want *term.Error) TerminateHeader {
	t.Helper()
	h, th := p.terminate(t)
	if h.Tagged || h.QN != QNTerminate || h.MSN != 1 || !h.Last {
		t.Fatalf("Terminate's DDP header %v", h)
	}
	if got := th.Err(); !errors.Is(got, want) {
		t.Fatalf("Terminate %v, want %v", got, want)
	}
	hl := ddp.Control(seg[0]).HeaderLen()
	if !th.M || !th.D || !bytes.Equal(th.DDPHeader, seg[:hl]) || int(th.SegLen) != len(seg) {
		t.Fatalf("Terminated DDP header M=%v D=%v % x seglen %d; want % x, %d", th.M, th.D, th.DDPHeader, th.SegLen, seg[:hl], len(seg))
	}
	return th
}

// craftedSetup: a queue pair (the side under test) facing a raw peer.
// The side has: src, 4096 octets at TO 0x1000 with remote read; noread,
// without; top, 256 octets at the very top of the TO space; a region of
// another protection domain; one receive buffer of 64 octets.
type crafted struct {
	*side
	peer          *rawPeer
	src, noread   *MemoryRegion
	top, foreign  *MemoryRegion
	rbuf, writeMR *MemoryRegion
}

func newCrafted(t *testing.T) *crafted {
	ea, eb := ddptest.New(ddptest.Options{MULPDU: 2000})
	peer := &rawPeer{end: ea, got: make(chan struct{}, 1)}
	s := newSide(t, eb, QPConfig{IRD: 2})
	ea.Attach(peer)
	eb.Attach(s.qp.Stream())
	s.qp.Start(eb, ddp.Start{})
	c := &crafted{side: s, peer: peer}
	var err error
	c.src, err = s.pd.RegisterMemory(fill(make([]byte, 4096), 5), 0x1000, RemoteRead|RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	c.noread = s.reg(t, 100, RemoteWrite)
	c.top, _ = s.pd.RegisterMemory(make([]byte, 256), ^uint64(0)-255, RemoteRead)
	c.foreign, _ = s.dev.NewProtectionDomain().RegisterMemory(make([]byte, 100), 0, RemoteRead|RemoteWrite)
	c.rbuf = s.reg(t, 64, LocalWrite)
	s.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{{MR: c.rbuf, Length: 64}}})
	t.Cleanup(func() {
		ea.Close()
		s.qp.Close(context.Background())
	})
	return c
}

// otherQP makes a second queue pair in the side's protection domain,
// which then shares the domain's STags with the one under test.
func (c *crafted) otherQP(t *testing.T) *QueuePair {
	cq := c.dev.NewCompletionQueue(8)
	qp, err := c.pd.NewQueuePair(QPConfig{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close(context.Background()) })
	return qp
}

func rrSeg(msn uint32, rr ReadRequest) []byte {
	h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(MakeControl(OpReadRequest))}, QN: QNReadReq, MSN: msn}
	return rr.Append(h.Append(nil))
}

func untaggedSeg(ctl byte, inv uint32, qn, msn uint32, payload []byte) []byte {
	h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{ctl, byte(inv >> 24), byte(inv >> 16), byte(inv >> 8), byte(inv)}, QN: qn, MSN: msn}
	return append(h.Append(nil), payload...)
}

func taggedSeg(ctl byte, stag uint32, to uint64, payload []byte) []byte {
	h := ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{ctl}, STag: stag, TO: to}
	return append(h.Append(nil), payload...)
}

// Every row of RFC 5040 Figure 9 that a peer's message can provoke,
// provoked by a crafted peer: the queue pair answers with exactly that
// Terminate, carrying the headers Figure 10 prescribes, and its memory is
// unchanged.
func TestFigure9Rows(t *testing.T) {
	type tc struct {
		name  string
		seg   func(c *crafted) []byte
		want  *term.Error
		rHdr  bool // the Terminated RDMA Header is included
		noHdr bool // no DDP header either
	}
	rr := func(stag uint32, to uint64, n uint32) func(c *crafted) []byte {
		return func(c *crafted) []byte {
			return rrSeg(1, ReadRequest{SinkSTag: 0x5555, SinkTO: 0, RDMARDSZ: n, SrcSTag: stag, SrcTO: to})
		}
	}
	cases := []tc{
		{"invalid STag", func(c *crafted) []byte { return rr(c.src.STag()^0xff00, 0x1000, 10)(c) }, term.RDMAPInvalidSTag, true, false},
		{"stale key", func(c *crafted) []byte { return rr(c.src.STag()^0x01, 0x1000, 10)(c) }, term.RDMAPInvalidSTag, true, false},
		{"base or bounds: below base", func(c *crafted) []byte { return rr(c.src.STag(), 0xfff, 10)(c) }, term.RDMAPBaseBounds, true, false},
		{"base or bounds: past end", func(c *crafted) []byte { return rr(c.src.STag(), 0x1000+4000, 100)(c) }, term.RDMAPBaseBounds, true, false},
		{"access rights", func(c *crafted) []byte { return rr(c.noread.STag(), 0, 10)(c) }, term.RDMAPAccessRights, true, false},
		{"STag not associated with RDMAP stream", func(c *crafted) []byte { return rr(c.foreign.STag(), 0, 10)(c) }, term.RDMAPSTagNotAssociated, true, false},
		{"TO wrap", func(c *crafted) []byte { return rr(c.top.STag(), ^uint64(0)-9, 20)(c) }, term.RDMAPTOWrap, true, false},
		{"STag cannot be invalidated", func(c *crafted) []byte {
			return untaggedSeg(byte(MakeControl(OpSendInvalidate)), c.foreign.STag(), 0, 1, []byte("x"))
		}, term.RDMAPProtCannotInvalidate, false, false},
		{"invalid RDMAP version", func(c *crafted) []byte { return untaggedSeg(0x83, 0, 0, 1, []byte("x")) }, term.RDMAPInvalidVersion, false, false},
		{"unexpected opcode: reserved", func(c *crafted) []byte { return untaggedSeg(0x4c, 0, 0, 1, []byte("x")) }, term.RDMAPUnexpectedOpcode, false, false},
		{"unexpected opcode: tagged Send", func(c *crafted) []byte { return taggedSeg(0x43, c.src.STag(), 0x1000, []byte("x")) }, term.RDMAPUnexpectedOpcode, false, false},
		{"unexpected opcode: Send on queue 1", func(c *crafted) []byte { return untaggedSeg(0x43, 0, 1, 1, []byte("x")) }, term.RDMAPUnexpectedOpcode, false, false},
		{"unexpected opcode: Read Response never requested", func(c *crafted) []byte { return taggedSeg(0x42, c.src.STag(), 0x1000, []byte("x")) }, term.RDMAPUnexpectedOpcode, false, false},
		{"unspecified: short Read Request", func(c *crafted) []byte { return untaggedSeg(0x41, 0, 1, 1, make([]byte, 10)) }, term.RDMAPOpUnspecified, false, false},
		{"DDP invalid STag on a Write", func(c *crafted) []byte { return taggedSeg(0x40, 0x12345600, 0, []byte("x")) }, term.DDPInvalidSTag, false, false},
		{"DDP Write without remote write rights", func(c *crafted) []byte { return taggedSeg(0x40, c.top.STag(), ^uint64(0)-255, []byte("x")) }, term.DDPInvalidSTag, false, false},
		{"DDP Write to another domain's STag", func(c *crafted) []byte { return taggedSeg(0x40, c.foreign.STag(), 0, []byte("x")) }, term.DDPSTagNotAssociated, false, false},
		{"DDP Write out of bounds", func(c *crafted) []byte { return taggedSeg(0x40, c.src.STag(), 0x1000+4090, make([]byte, 10)) }, term.DDPBaseBounds, false, false},
		{"DDP Send too long", func(c *crafted) []byte { return untaggedSeg(0x43, 0, 0, 1, make([]byte, 65)) }, term.DDPMessageTooLong, false, false},
		{"DDP Send without a buffer", func(c *crafted) []byte { return untaggedSeg(0x43, 0, 0, 2, nil) }, term.DDPNoBuffer, false, false},
		{"DDP bad queue", func(c *crafted) []byte { return untaggedSeg(0x43, 0, 4, 1, nil) }, term.DDPInvalidQN, false, false},
		{"DDP bad version", func(c *crafted) []byte {
			s := untaggedSeg(0x43, 0, 0, 1, nil)
			s[0] = s[0]&^3 | 2
			return s
		}, term.DDPUntaggedInvalidVersion, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCrafted(t)
				before := append([]byte(nil), c.src.Bytes()...)
				seg := tc.seg(c)
				c.peer.send(t, seg)
				th := c.peer.checkTerminate(t, seg, tc.want)
				hl := ddp.Control(seg[0]).HeaderLen()
				if th.R != tc.rHdr || (tc.rHdr && !bytes.Equal(th.RDMAHeader, seg[hl:])) {
					t.Fatalf("Terminated RDMA header R=%v % x", th.R, th.RDMAHeader)
				}
				if !bytes.Equal(before, c.src.Bytes()) || !bytes.Equal(c.rbuf.Bytes(), make([]byte, 64)) {
					t.Fatal("memory changed")
				}
				if c.qp.State() != StateTerminating || !errors.Is(c.qp.Err(), tc.want) {
					t.Fatalf("state %v err %v", c.qp.State(), c.qp.Err())
				}
				// The receive buffer is flushed (or, for the Send with
				// Invalidate, reported in error).
				if cq := wait(t, c.rcq); cq.Status == StatusSuccess {
					t.Fatalf("receive completion %+v", cq)
				}
				// Nothing more is placed: a valid Write after the error.
				c.peer.send(t, taggedSeg(0x40, c.src.STag(), 0x1000, []byte("zzz")))
				synctest.Wait()
				if !bytes.Equal(before, c.src.Bytes()) {
					t.Fatal("placed after the Terminate")
				}
				if ev := c.Events(); len(ev) != 1 || ev[0].Type != EventStreamError {
					t.Fatalf("events %+v", ev)
				}
			})
		})
	}
}

// A Terminate from the peer stops the stream with the peer's triple,
// flushes, and sends nothing back.
func TestReceivedTerminate(t *testing.T) { synctest.Test(t, testReceivedTerminate) }

func testReceivedTerminate(t *testing.T) {
	c := newCrafted(t)
	sink := c.reg(t, 100, LocalWrite)
	if err := c.qp.PostRead(ReadWR{ID: 7, Local: SGE{MR: sink, Length: 10}, RemoteSTag: 0x4242, RemoteTO: 0}); err != nil {
		t.Fatal(err)
	}
	// Wait for the Read Request, then refuse it as the RFC says.
	var reqSeg []byte
	for reqSeg == nil {
		<-c.peer.got
		c.peer.mu.Lock()
		reqSeg = c.peer.segs[0]
		c.peer.mu.Unlock()
	}
	th := TerminateHeader{Layer: term.LayerRDMAP, EType: term.ETypeRemoteProtection, Code: 0, M: true, D: true, R: true,
		SegLen: uint16(len(reqSeg)), DDPHeader: reqSeg[:18], RDMAHeader: reqSeg[18:]}
	c.peer.send(t, untaggedSeg(0x47, 0, QNTerminate, 1, th.Append(nil)))
	comp := wait(t, c.scq)
	if comp.WRID != 7 || comp.Status != StatusRemAccessErr || !errors.Is(comp.Err, term.RDMAPInvalidSTag) {
		t.Fatalf("read completion %+v", comp)
	}
	if e := c.qp.Err(); !errors.Is(e, term.RDMAPInvalidSTag) || e.(*term.Error).Local() {
		t.Fatalf("error %v", e)
	}
	synctest.Wait()
	c.peer.mu.Lock()
	n := len(c.peer.segs)
	c.peer.mu.Unlock()
	if n != 1 {
		t.Fatalf("the queue pair sent %d segments; a Terminate answered a Terminate?", n)
	}
}
