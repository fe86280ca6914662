//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// Placeholders in FuzzSessionOutstanding's seeds for the Data Sink STags
// of the two Reads outstanding and the Request Identifiers of the two
// Atomics.
const (
	fuzzSink0, fuzzSink1   = 0x4000, 0x5000
	fuzzReqID0, fuzzReqID1 = 0xa1, 0xa2
)

// FuzzSessionOutstanding plays a peer against a running DDP Stream
// Session whose queue pair has two RDMA Reads, two Atomic Operations and
// two receives outstanding: what a peer targets with responses that
// answer nothing or answer twice. The input is a list of DDP Segment
// Chunks, each after two octets giving its length; each carries its own
// DDP-SSN, so the input reorders, duplicates and replays at will, within
// and beyond the session's window. Nothing may panic or hang; memory the
// peer may not write, and each Data Sink region outside the buffer its
// Read named, stay untouched; after the session closes every work request
// has completed exactly once.
func FuzzSessionOutstanding(f *testing.F) {
	chunk := func(ssn wire.SSN, h ddp.Header, payload []byte) []byte {
		return wire.SegmentChunk{SSN: ssn, Segment: append(h.Append(nil), payload...)}.Append(nil)
	}
	resp := func(ssn wire.SSN, stag uint32, fill byte) []byte {
		h := ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpReadResponse))}, STag: stag, TO: 16}
		return chunk(ssn, h, bytes.Repeat([]byte{fill}, 32))
	}
	aresp := func(ssn wire.SSN, msn, id uint32) []byte {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpAtomicResponse))}, QN: rdmap.QNAtomicResp, MSN: msn}
		return chunk(ssn, h, (&rdmap.AtomicResponse{OrigReqID: id, OrigValue: 5}).Append(nil))
	}
	send := func(ssn wire.SSN, msn uint32) []byte {
		h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpSend))}, QN: rdmap.QNSend, MSN: msn}
		return chunk(ssn, h, []byte("a send"))
	}
	for _, msgs := range [][][]byte{
		{resp(1, fuzzSink0, 1), resp(2, fuzzSink1, 2), aresp(3, 1, fuzzReqID0), aresp(4, 2, fuzzReqID1), send(5, 1)},
		// One Read answered twice, the later DDP-SSN first.
		{resp(2, fuzzSink0, 2), resp(1, fuzzSink0, 1)},
		// One Atomic answered twice, the later MSN first.
		{aresp(2, 2, fuzzReqID0), aresp(1, 1, fuzzReqID0)},
		// A Response replayed after its Read completed.
		{resp(1, fuzzSink0, 1), resp(1, fuzzSink0, 1), resp(2, fuzzSink0, 1)},
		// The second Read's Response first, then a Send, then the first's.
		{resp(2, fuzzSink1, 2), send(3, 1), resp(1, fuzzSink0, 1)},
	} {
		var in []byte
		for _, m := range msgs {
			in = binary.BigEndian.AppendUint16(in, uint16(len(m)))
			in = append(in, m...)
		}
		f.Add(in)
	}
	initiate := (&wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: ddp.Offer(4, 4, nil)}).Append(nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		var msgs [][]byte
		for len(in) >= 2 && len(msgs) < 64 {
			l := min(int(binary.BigEndian.Uint16(in)), len(in)-2)
			msgs = append(msgs, bytes.Clone(in[2:2+l]))
			in = in[2+l:]
		}
		ch := &fakeChannel{}
		st, err := NewChannelStream(ch, 1, ChannelConfig{MULPDU: 1000})
		if err != nil {
			t.Fatal(err)
		}
		st.Opened()
		p := rdmaptest.NewPeer(t, rdmap.QPConfig{AtomicORD: 2})
		targets := rdmaptest.NewTargets(t, p)
		st.Receive(initiate, false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := ReadInitiate(ctx, st, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s, err := req.Accept(p.QP, SessionConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ch.ack()
		sinks := []*rdmap.MemoryRegion{p.Reg(t, 64, rdmap.LocalWrite), p.Reg(t, 64, rdmap.LocalWrite)}
		res := p.Reg(t, 16, rdmap.LocalWrite)
		for i, m := range sinks {
			if err := p.QP.PostRead(rdmap.ReadWR{ID: uint64(10 + i), Local: rdmap.SGE{MR: m, Offset: 16, Length: 32}, RemoteSTag: 0x1234}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			if err := p.QP.PostAtomic(rdmap.AtomicWR{ID: uint64(20 + i), Op: rdmap.FetchAdd, Add: 1, Local: rdmap.SGE{MR: res, Offset: uint64(8 * i), Length: 8}, RemoteSTag: 0x1234}); err != nil {
				t.Fatal(err)
			}
		}
		rbuf := p.Reg(t, 64, rdmap.LocalWrite)
		if err := p.QP.PostRecv(rdmap.RecvWR{ID: 30, SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}}); err != nil {
			t.Fatal(err)
		}
		reqIDs := sentAtomicReqIDs(t, ch, 4)
		stags := targets.STags()
		stags[fuzzSink0], stags[fuzzSink1] = sinks[0].STag(), sinks[1].STag()
		for i, m := range msgs {
			c, _, err := wire.ParseSegmentChunk(m)
			if err != nil {
				continue
			}
			seg := msgs[i][wire.SSNLen:]
			h, hl, err := ddp.ParseHeader(c.Segment)
			switch {
			case err != nil:
			case h.Tagged:
				if s, ok := stags[h.STag]; ok {
					binary.BigEndian.PutUint32(seg[2:], s)
				}
			case h.QN == rdmap.QNAtomicResp && len(seg) >= hl+4:
				if id, ok := reqIDs[binary.BigEndian.Uint32(seg[hl:])]; ok {
					binary.BigEndian.PutUint32(seg[hl:], id)
				}
			}
		}
		outside := [][]byte{sinks[0].Bytes()[:16], sinks[0].Bytes()[48:], sinks[1].Bytes()[:16], sinks[1].Bytes()[48:]}
		for _, m := range msgs {
			st.Receive(m, false)
		}
		time.Sleep(time.Millisecond)
		ch.ack()
		s.Close()
		closeNow, stop := context.WithCancel(context.Background())
		stop()
		p.QP.Close(closeNow)
		targets.Untouched(t)
		for i, b := range outside {
			if !bytes.Equal(b, make([]byte, len(b))) {
				t.Fatalf("Data Sink region %d written outside its Read's buffer: % x", i/2, b)
			}
		}
		seen := map[uint64]int{}
		var out [16]rdmap.Completion
		for _, cq := range []*rdmap.CompletionQueue{p.SCQ, p.RCQ} {
			for k := cq.Poll(out[:]); k > 0; k = cq.Poll(out[:]) {
				for _, c := range out[:k] {
					seen[c.WRID]++
				}
			}
		}
		for _, id := range []uint64{10, 11, 20, 21, 30} {
			if seen[id] != 1 {
				t.Fatalf("work request %d completed %d times (%v)", id, seen[id], seen)
			}
		}
	})
}

// sentAtomicReqIDs waits until the channel carries n messages after the
// Accept and maps the fuzz seeds' placeholders to the Request Identifiers
// of the Atomic Requests among them.
func sentAtomicReqIDs(t *testing.T, ch *fakeChannel, n int) map[uint32]uint32 {
	t.Helper()
	var ids map[uint32]uint32
	k := 0
	waitfor.Until(5*time.Second, func() bool {
		ch.mu.Lock()
		sent := append([][]byte(nil), ch.sent...)
		ch.mu.Unlock()
		ids = map[uint32]uint32{}
		k = 0
		for _, m := range sent {
			c, _, err := wire.ParseSegmentChunk(m)
			if err != nil {
				continue
			}
			k++
			h, hl, err := ddp.ParseHeader(c.Segment)
			if err != nil || rdmap.Control(h.RsvdULP[0]).Opcode() != rdmap.OpAtomicRequest {
				continue
			}
			if req, _, err := rdmap.ParseAtomicRequest(c.Segment[hl:]); err == nil {
				ids[uint32(fuzzReqID0+len(ids))] = req.ReqID
			}
		}
		return k >= n
	})
	if k < n {
		t.Fatalf("%d of %d requests sent", k, n)
	}
	return ids
}
