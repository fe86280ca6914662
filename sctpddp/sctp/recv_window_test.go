package sctp

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

func recvBytes(n int) string { return strings.Repeat("x", n) }

// TestRecvWindow closes the window with messages held for reordering and
// opens it again.
func TestRecvWindow(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 4096, InboundStreams: 1})
	// "The endpoint sets a_rwnd to this value" (§6.2 A).
	if h.r.ARwnd() != 4096 {
		t.Fatalf("a_rwnd %d, want 4096", h.r.ARwnd())
	}
	// TSN 1 (SSN 0) is lost: SSNs 1 to 3 are held. "As DATA chunks are
	// received and buffered, decrement a_rwnd by the number of bytes
	// received and buffered" (§6.2 B).
	for i := range uint32(3) {
		h.wantRes(h.packet(recvD(2+i, 0, uint16(1+i), 0, recvBytes(1000))), RecvNew)
	}
	s := h.wantSACKNow("gap")
	if s.ARwnd != 1096 {
		t.Fatalf("a_rwnd %d, want 1096", s.ARwnd)
	}
	// 96 bytes left: below the silly window threshold, advertised as 0.
	h.wantRes(h.packet(recvD(5, 0, 4, 0, recvBytes(1000))), RecvNew)
	if s := h.wantSACKNow("gap"); s.ARwnd != 0 {
		t.Fatalf("a_rwnd %d with 96 bytes free, want 0", s.ARwnd)
	}
	// "When the receiver's advertised window is 0, the receiver MUST drop
	// any new incoming DATA chunk with a TSN larger than the largest TSN
	// received so far. ... if such a DATA chunk is dropped, the receiver
	// MUST immediately send back a SACK chunk with the current receive
	// window showing only DATA chunks received and accepted so far. The
	// dropped DATA chunk(s) MUST NOT be included in the SACK chunk" (§6.2).
	h.wantRes(h.packet(recvD(6, 0, 5, 0, "probe")), RecvDropped)
	s = h.wantSACKNow("dropped")
	h.wantSACK(s, "cum=0 2-5")
	if s.ARwnd != 0 {
		t.Fatalf("a_rwnd %d, want 0", s.ARwnd)
	}
	// "if the new incoming DATA chunk holds a TSN value less than the
	// largest TSN received so far, then the receiver SHOULD ... accept the
	// new incoming DATA chunk": the retransmission of TSN 1 is accepted
	// and releases the held messages. "As DATA chunks are delivered to the
	// ULP and released from the receive buffers, increment a_rwnd" (§6.2 C).
	h.wantRes(h.packet(recvD(1, 0, 0, 0, recvBytes(1000))), RecvNew)
	s = h.wantSACKNow("gap filled")
	h.wantSACK(s, "cum=5")
	if s.ARwnd != 4096 || h.r.Held() != 0 {
		t.Fatalf("a_rwnd %d, held %d after delivery", s.ARwnd, h.r.Held())
	}
	if len(h.got) != 5 {
		t.Fatalf("delivered %d messages, want 5", len(h.got))
	}
}

// TestRecvWindowGapFill accepts DATA below the highest TSN when the
// window is 0, held or not, and drops it beyond.
func TestRecvWindowGapFill(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 4096, InboundStreams: 2})
	// TSN 1 (SSN 0) and TSN 3 (SSN 2) are lost; TSNs 2, 4, 5 and 6 hold
	// 4000 bytes and close the window.
	for _, tsn := range []uint32{2, 4, 5, 6} {
		h.packet(recvD(tsn, 0, uint16(tsn-1), 0, recvBytes(1000)))
	}
	if h.r.ARwnd() != 0 {
		t.Fatalf("a_rwnd %d, want 0", h.r.ARwnd())
	}
	// Beyond the highest TSN: dropped, on any stream.
	h.wantRes(h.packet(recvD(7, 1, 0, 0, recvBytes(10))), RecvDropped)
	// TSN 3 fills a gap below the highest and is held (SSN 0 is still
	// missing): accepted, 5000 bytes held, within 4096 + 1024.
	h.wantRes(h.packet(recvD(3, 0, 2, 0, recvBytes(1000))), RecvNew)
	if h.r.Held() != 5000 {
		t.Fatalf("held %d, want 5000", h.r.Held())
	}
	h.wantSACK(h.wantSACKNow("gap filled"), "cum=0 2-6")
	// TSN 1 is delivered at once and releases the rest.
	h.wantRes(h.packet(recvD(1, 0, 0, 0, recvBytes(1000))), RecvNew)
	if len(h.got) != 6 || h.r.Held() != 0 {
		t.Fatalf("delivered %d, held %d", len(h.got), h.r.Held())
	}
	h.wantRes(h.packet(recvD(7, 1, 0, 0, recvBytes(10))), RecvNew)
}

// TestRecvWindowHardCap drops a gap filler that would hold more than the
// hard cap.
func TestRecvWindowHardCap(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 4096, InboundStreams: 1})
	// TSN 1 lost, TSN 3 lost; 2, 4, 5, 6 hold 4000 bytes.
	for _, tsn := range []uint32{2, 4, 5, 6} {
		h.packet(recvD(tsn, 0, uint16(tsn-1), 0, recvBytes(1000)))
	}
	// 4000 + 1200 > 4096 + 1024.
	h.wantRes(h.packet(recvD(3, 0, 2, 0, recvBytes(1200))), RecvDropped)
	h.wantSACK(h.wantSACKNow("dropped"), "cum=0 2-2 4-6")
	h.wantRes(h.packet(recvD(3, 0, 2, 0, recvBytes(1100))), RecvNew)
}

// TestRecvWindowUpdate opens a window the ULP held: "When the window opens
// up, an SCTP receiver SHOULD send additional SACK chunks to update the
// window even if no new data is received. The receiver MUST avoid sending
// a large number of window updates ... One way to achieve this is to send
// a window update only if the window can be increased by at least a
// quarter of the receive buffer size of the association" (§6.2).
func TestRecvWindowUpdate(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 8000, InboundStreams: 1})
	h.holdULP = true
	for i := range uint32(4) {
		h.wantRes(h.packet(recvD(1+i, 0, uint16(i), 0, recvBytes(2000))), RecvNew)
	}
	s := h.wantSACKNow("every second packet")
	if s.ARwnd != 0 {
		t.Fatalf("a_rwnd %d with the ULP holding everything, want 0", s.ARwnd)
	}
	h.wantNoSACK("acknowledged")
	// 500 bytes free: below the silly window threshold (1024), no update.
	h.r.Release(500)
	h.wantNoSACK("500 bytes free")
	// From 0 to 1500: an update.
	h.r.Release(1000)
	if s := h.wantSACKNow("window reopened from 0"); s.ARwnd != 1500 {
		t.Fatalf("a_rwnd %d, want 1500", s.ARwnd)
	}
	// Less than a quarter (2000) more: none.
	h.r.Release(1999)
	h.wantNoSACK("1999 more")
	h.r.Release(1)
	if s := h.wantSACKNow("a quarter more"); s.ARwnd != 3500 {
		t.Fatalf("a_rwnd %d, want 3500", s.ARwnd)
	}
	h.r.Release(1 << 20) // more than held: clamped
	if s := h.wantSACKNow("all released"); s.ARwnd != 8000 {
		t.Fatalf("a_rwnd %d, want 8000", s.ARwnd)
	}
}

// TestSACKWhen is the timing decision as a table.
func TestSACKWhen(t *testing.T) {
	t0 := recvT0
	d := 25 * time.Millisecond
	for _, tc := range []struct {
		name     string
		s        recvAckState
		now      time.Time
		sendNow  bool
		deadline time.Time
	}{
		{"nothing owed", recvAckState{delay: d, lastARwnd: 100, aRwnd: 100, bufferSize: 100}, t0, false, time.Time{}},
		{"immediate", recvAckState{ackNow: true, unacked: true, firstUnacked: t0, delay: d, bufferSize: 100}, t0, true, time.Time{}},
		{"delayed", recvAckState{unacked: true, firstUnacked: t0, delay: d, lastARwnd: 100, aRwnd: 100, bufferSize: 100}, t0.Add(time.Millisecond), false, t0.Add(d)},
		{"deadline reached", recvAckState{unacked: true, firstUnacked: t0, delay: d, lastARwnd: 100, aRwnd: 100, bufferSize: 100}, t0.Add(d), true, time.Time{}},
		{"deadline passed", recvAckState{unacked: true, firstUnacked: t0, delay: d, bufferSize: 100}, t0.Add(time.Second), true, time.Time{}},
		{"window from 0", recvAckState{delay: d, lastARwnd: 0, aRwnd: 1, bufferSize: 100}, t0, true, time.Time{}},
		{"window up a quarter", recvAckState{delay: d, lastARwnd: 10, aRwnd: 35, bufferSize: 100}, t0, true, time.Time{}},
		{"window up less", recvAckState{delay: d, lastARwnd: 10, aRwnd: 34, bufferSize: 100}, t0, false, time.Time{}},
		{"window down", recvAckState{delay: d, lastARwnd: 100, aRwnd: 0, bufferSize: 100}, t0, false, time.Time{}},
	} {
		sendNow, deadline := recvSACKWhen(tc.s, tc.now)
		if sendNow != tc.sendNow || !deadline.Equal(tc.deadline) {
			t.Errorf("%s: recvSACKWhen = %v, %v; want %v, %v", tc.name, sendNow, deadline, tc.sendNow, tc.deadline)
		}
	}
}

// TestRecvBounds hits each bound a peer could push against.
func TestRecvBounds(t *testing.T) {
	t.Run("span", func(t *testing.T) {
		// A Gap Ack Block reaches at most 2^16 - 1 beyond the Cumulative
		// TSN Ack.
		h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 20, InboundStreams: 1})
		h.wantRes(h.packet(recvD(1<<16, 0, 0, recvU, "x")), RecvDropped)
		h.wantRes(h.packet(recvD(1<<16-1, 0, 0, recvU, "x")), RecvNew)
		h.wantSACK(h.wantSACKNow("gap"), "cum=0 65535-65535")
		// And no farther than the window's bytes.
		h = newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 100, InboundStreams: 1})
		h.wantRes(h.packet(recvD(101, 0, 0, recvU, "x")), RecvDropped)
		h.wantRes(h.packet(recvD(100, 0, 0, recvU, "x")), RecvNew)
	})
	t.Run("gap ranges", func(t *testing.T) {
		h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 1, MaxGapRanges: 2})
		h.wantRes(h.packet(recvD(3, 0, 0, recvU, "x"), recvD(5, 0, 0, recvU, "x"), recvD(7, 0, 0, recvU, "x")),
			RecvNew, RecvNew, RecvDropped)
		h.wantRes(h.packet(recvD(4, 0, 0, recvU, "x"), recvD(7, 0, 0, recvU, "x"), recvD(8, 0, 0, recvU, "x"), recvD(10, 0, 0, recvU, "x")),
			RecvNew, RecvNew, RecvNew, RecvDropped)
		// Filling from the Cumulative TSN Ack is always possible.
		h.wantRes(h.packet(recvD(1, 0, 0, recvU, "x")), RecvNew)
		h.wantSACK(h.wantSACKNow("gap"), "cum=1 2-4 6-7")
	})
	t.Run("held chunks", func(t *testing.T) {
		h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 1, MaxHeldChunks: 2})
		h.wantRes(h.packet(recvD(2, 0, 1, 0, "b"), recvD(3, 0, 2, 0, "c"), recvD(4, 0, 3, 0, "d")),
			RecvNew, RecvNew, RecvDropped)
		// A fragment that extends a held run adds no entry... but a new
		// one does.
		h.wantRes(h.packet(recvD(5, 0, 3, recvB, "d")), RecvDropped)
		h.wantRes(h.packet(recvD(1, 0, 0, 0, "a")), RecvNew)
		h.wantGot(recvGot{0, 0, 16, false, "a"}, recvGot{0, 1, 16, false, "b"}, recvGot{0, 2, 16, false, "c"})
		h.wantRes(h.packet(recvD(4, 0, 3, recvB, "d1"), recvD(5, 0, 3, recvMiddle, "d2"), recvD(6, 0, 3, recvE, "d3")),
			RecvNew, RecvNew, RecvNew)
		h.wantGot(recvGot{0, 3, 16, false, "d1d2d3"})
	})
	t.Run("held per stream", func(t *testing.T) {
		h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 2, MaxHeldPerStream: 2})
		// Stream 0 loses SSN 0 and may hold two messages; stream 1 still
		// holds its own.
		h.wantRes(h.packet(recvD(3, 0, 1, 0, "b"), recvD(4, 0, 2, 0, "c"), recvD(5, 0, 3, 0, "d")),
			RecvNew, RecvNew, RecvDropped)
		h.wantRes(h.packet(recvD(6, 1, 1, 0, "y"), recvD(7, 1, 2, recvB, "z")), RecvNew, RecvNew)
		h.wantRes(h.packet(recvD(8, 1, 2, recvE, "z")), RecvNew) // extends a run: no entry more
		h.wantRes(h.packet(recvD(2, 1, 0, 0, "x")), RecvNew)
		h.wantGot(recvGot{1, 0, 16, false, "x"}, recvGot{1, 1, 16, false, "y"}, recvGot{1, 2, 16, false, "zz"})
		h.wantRes(h.packet(recvD(1, 0, 0, 0, "a")), RecvNew)
		h.wantGot(recvGot{0, 0, 16, false, "a"}, recvGot{0, 1, 16, false, "b"}, recvGot{0, 2, 16, false, "c"})
		if h.r.reasm.perStream[0] != 0 || h.r.reasm.perStream[1] != 0 {
			t.Fatalf("per stream counts %v after delivery", h.r.reasm.perStream)
		}
	})
	t.Run("window bytes", func(t *testing.T) {
		// A chunk to be held that is larger than the window is dropped
		// even when the window is not 0.
		h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 4096, InboundStreams: 1})
		h.wantRes(h.packet(recvD(2, 0, 1, 0, recvBytes(4097))), RecvDropped)
		h.wantRes(h.packet(recvD(2, 0, 1, 0, recvBytes(4096))), RecvNew)
		// A chunk delivered at once holds nothing: a window of 0 refuses
		// it beyond the highest TSN all the same (§6.2).
		h.wantRes(h.packet(recvD(3, 0, 0, recvU, "u")), RecvDropped)
		h.wantRes(h.packet(recvD(1, 0, 0, 0, recvBytes(10))), RecvNew)
		h.wantRes(h.packet(recvD(3, 0, 0, recvU, "u")), RecvNew)
	})
}

// TestRecvConfig checks NewReceiver's validation and defaults.
func TestRecvConfig(t *testing.T) {
	deliver := func(RecvMessage) {}
	for _, cfg := range []ReceiverConfig{
		{},
		{InboundStreams: 1, SACKDelay: RecvMaxSACKDelay + 1},
		{InboundStreams: 1, SACKDelay: -1},
	} {
		if _, err := NewReceiver(cfg, deliver); err == nil {
			t.Errorf("NewReceiver(%+v) succeeded", cfg)
		}
	}
	if _, err := NewReceiver(ReceiverConfig{InboundStreams: 1}, nil); err == nil {
		t.Error("NewReceiver with nil deliver succeeded")
	}
	r, err := NewReceiver(ReceiverConfig{InboundStreams: 1, SACKDelay: RecvMaxSACKDelay}, deliver)
	if err != nil {
		t.Fatal(err)
	}
	if r.ARwnd() != RecvDefaultBufferSize || r.cfg.MaxMessageSize != RecvDefaultBufferSize-recvSWSFloor || r.maxSpan != recvMaxSpan {
		t.Fatalf("defaults: a_rwnd %d, MaxMessageSize %d, span %d", r.ARwnd(), r.cfg.MaxMessageSize, r.maxSpan)
	}
	_ = chunk.TypeData
}

// TestRecvAttack has a peer try to make the Receiver hold more than its
// bounds: tiny fragments that never complete, ordered messages far ahead
// of their SSN, TSNs scattered over the window, and duplicates. The
// memory held stays within the bounds, and the Receiver still serves the
// peer once it behaves.
func TestRecvAttack(t *testing.T) {
	const buffer = 1 << 16
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: buffer, InboundStreams: 8})
	seed := uint32(1)
	rnd := func(n uint32) uint32 { seed = seed*1664525 + 1013904223; return (seed >> 8) % n }
	var ssn [8]uint16
	for range 200000 {
		tsn := 2 + rnd(1<<17) // TSN 1 never comes: nothing is delivered in order
		var f chunk.DataFlags
		switch rnd(4) {
		case 0:
			f = recvB
		case 1:
			f = recvMiddle
		case 2:
			f = recvE
		}
		// Each chunk has an SSN of its own on its stream, none of them
		// 0: no two chunks make a message, no two messages share an SSN.
		sid := rnd(8)
		ssn[sid]++
		d := recvD(tsn, uint16(sid), ssn[sid], f, recvBytes(1+int(rnd(3))))
		if _, err := h.r.Data(d); err != nil {
			t.Fatal(err)
		}
		h.r.EndPacket(h.now)
		if rnd(16) == 0 {
			h.r.AppendSACK(nil, 1500)
		}
	}
	h.got = nil
	r := h.r
	if len(r.ranges) > r.maxRanges || r.reasm.entries() > r.cfg.MaxHeldChunks+1 || uint64(r.Held()) > r.hardCap {
		t.Fatalf("%d ranges (of %d), %d entries (of %d), %d bytes held (of %d)",
			len(r.ranges), r.maxRanges, r.reasm.entries(), r.cfg.MaxHeldChunks, r.Held(), r.hardCap)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(before)
	limit := int64(4*(buffer+buffer/4) + 64*r.cfg.MaxHeldChunks + buffer + 48*(r.cfg.MaxHeldChunks+1) + 8*r.maxRanges + 64<<10)
	t.Logf("after the attack: %d ranges, %d entries, %d bytes held, heap grown by %d (limit %d)",
		len(r.ranges), r.reasm.entries(), r.Held(), grown, limit)
	if grown > limit {
		t.Fatalf("heap grew by %d bytes, beyond %d", grown, limit)
	}
	// TSN 1 arrives: the Receiver takes it and delivers it, and whatever
	// it held on stream 0 that follows it.
	h.wantRes(h.packet(recvD(1, 0, 0, 0, "ok")), RecvNew)
	if len(h.got) == 0 || h.got[0] != (recvGot{0, 0, 16, false, "ok"}) {
		t.Fatalf("delivered %v", h.got)
	}
	if s := h.wantSACKNow("gap"); s.CumulativeTSNAck < 1 {
		t.Fatalf("Cumulative TSN Ack %d", s.CumulativeTSNAck)
	}
}
