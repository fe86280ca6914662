package sctp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// recvT0 is the arrival time of the first packet in the scripts.
var recvT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// recvGot is a delivered message with its bytes copied.
type recvGot struct {
	sid       uint16
	ssn       SSN
	ppid      uint32
	unordered bool
	data      string
}

// recvHarness drives a Receiver with scripted packets and records what it
// delivers.
type recvHarness struct {
	t   *testing.T
	r   *Receiver
	got []recvGot
	now time.Time
	// holdULP makes the ULP keep every message it is given (Hold).
	holdULP bool
}

func newRecvHarness(t *testing.T, cfg ReceiverConfig) *recvHarness {
	t.Helper()
	h := &recvHarness{t: t, now: recvT0}
	r, err := NewReceiver(cfg, func(m RecvMessage) {
		h.got = append(h.got, recvGot{m.StreamID, m.SSN, m.PPID, m.Unordered, string(m.Data)})
		if h.holdULP {
			h.r.Hold(len(m.Data))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

// recvD builds a DATA chunk. flags of 0 means an unfragmented message.
func recvD(tsn uint32, sid, ssn uint16, flags chunk.DataFlags, data string) chunk.Data {
	if flags&(chunk.FlagBeginning|chunk.FlagEnding|recvMiddle) == 0 {
		flags |= chunk.FlagBeginning | chunk.FlagEnding
	}
	return chunk.Data{Flags: flags &^ recvMiddle, TSN: tsn, StreamID: sid, SSN: ssn, PPID: 16, UserData: []byte(data)}
}

// recvMiddle marks a middle fragment (B and E both 0) for recvD.
const recvMiddle chunk.DataFlags = 1 << 7

// packet gives the chunks to the Receiver as one packet arriving now and
// returns their results.
func (h *recvHarness) packet(ds ...chunk.Data) []RecvResult {
	h.t.Helper()
	var res []RecvResult
	for _, d := range ds {
		// Through the codec, as the association receives it.
		b := d.Append(nil)
		p, _, err := chunk.ParseData(b)
		if err != nil && !errors.Is(err, chunk.ErrNoUserData) {
			h.t.Fatal(err)
		}
		x, err := h.r.Data(p)
		if err != nil {
			h.t.Fatalf("Data(TSN %d): %v", d.TSN, err)
		}
		clear(b) // the packet is gone once Data returns
		res = append(res, x)
	}
	h.r.EndPacket(h.now)
	return res
}

// wantSACKNow checks that a SACK is due at once and returns it.
func (h *recvHarness) wantSACKNow(why string) chunk.SACK {
	h.t.Helper()
	now, dl := h.r.SACKWhen(h.now)
	if !now {
		h.t.Fatalf("%s: SACKWhen = false, %v; want a SACK at once", why, dl)
	}
	return h.sack(1500)
}

// wantSACKDelayed checks that the SACK waits for the delayed ack timer
// due at deadline.
func (h *recvHarness) wantSACKDelayed(why string, deadline time.Time) {
	h.t.Helper()
	now, dl := h.r.SACKWhen(h.now)
	if now || !dl.Equal(deadline) {
		h.t.Fatalf("%s: SACKWhen = %v, %v; want false, %v", why, now, dl, deadline)
	}
}

// wantNoSACK checks that no SACK is owed.
func (h *recvHarness) wantNoSACK(why string) {
	h.t.Helper()
	now, dl := h.r.SACKWhen(h.now)
	if now || !dl.IsZero() {
		h.t.Fatalf("%s: SACKWhen = %v, %v; want no SACK owed", why, now, dl)
	}
}

// sack builds the SACK in room bytes and parses it back.
func (h *recvHarness) sack(room int) chunk.SACK {
	h.t.Helper()
	b := h.r.AppendSACK(nil, room)
	if len(b) > max(room, 16) {
		h.t.Fatalf("SACK of %d bytes in a room of %d", len(b), room)
	}
	s, n, err := chunk.ParseSACK(b)
	if err != nil || n != len(b) {
		h.t.Fatalf("ParseSACK: %v (%d of %d bytes)", err, n, len(b))
	}
	return s
}

// recvBlocks renders a SACK's Gap Ack Blocks and Duplicate TSNs.
func recvBlocks(s chunk.SACK) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "cum=%d", s.CumulativeTSNAck)
	for i := range s.GapAckBlocks.Len() {
		g := s.GapAckBlocks.At(i)
		fmt.Fprintf(&b, " %d-%d", g.Start, g.End)
	}
	if s.DuplicateTSNs.Len() > 0 {
		b.WriteString(" dup")
		for i := range s.DuplicateTSNs.Len() {
			fmt.Fprintf(&b, " %d", s.DuplicateTSNs.At(i))
		}
	}
	return b.String()
}

func (h *recvHarness) wantSACK(s chunk.SACK, want string) {
	h.t.Helper()
	if got := recvBlocks(s); got != want {
		h.t.Fatalf("SACK %q, want %q", got, want)
	}
}

func (h *recvHarness) wantGot(want ...recvGot) {
	h.t.Helper()
	if !slices.Equal(h.got, want) {
		h.t.Fatalf("delivered %+v\nwant      %+v", h.got, want)
	}
	h.got = h.got[:0]
}

func recvRes(rs ...RecvResult) []RecvResult { return rs }

func (h *recvHarness) wantRes(got []RecvResult, want ...RecvResult) {
	h.t.Helper()
	if !slices.Equal(got, want) {
		h.t.Fatalf("results %v, want %v", got, want)
	}
}

var recvCfg = ReceiverConfig{PeerInitialTSN: 7, BufferSize: 1 << 16, InboundStreams: 4}

// TestRecvDelayedAck follows RFC 9260 §6.2's Figure 7.
func TestRecvDelayedAck(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.wantNoSACK("before any DATA")
	// "In the case where no DATA chunk has been received, this value is
	// set to the peer's Initial TSN minus one" (§3.3.4).
	if got := h.r.CumulativeTSN(); got != 6 {
		t.Fatalf("CumulativeTSN = %d, want 6", got)
	}
	// DATA [TSN=7,Strm=0,Seq=3] ------------> (ack delayed)
	h.r.reasm.nextSSN[0] = 3
	h.wantRes(h.packet(recvD(7, 0, 3, 0, "a")), RecvNew)
	h.wantGot(recvGot{0, 3, 16, false, "a"})
	// "SHOULD be generated within 200 ms of the arrival of any
	// unacknowledged DATA chunk": the timer is armed for SACKDelay.
	h.wantSACKDelayed("after one packet", recvT0.Add(RecvDefaultSACKDelay))
	h.now = recvT0.Add(time.Millisecond)
	// DATA [TSN=8,Strm=0,Seq=4] ------------> (send ack)
	h.packet(recvD(8, 0, 4, 0, "b"))
	// "an acknowledgement SHOULD be generated for at least every second
	// packet (not every second DATA chunk) received".
	h.wantSACK(h.wantSACKNow("after the second packet"), "cum=8")
	h.wantNoSACK("after the SACK")
	// DATA [TSN=9,Strm=0,Seq=5] ------------> (ack delayed)
	h.now = recvT0.Add(10 * time.Millisecond)
	h.packet(recvD(9, 0, 5, 0, "c"))
	h.wantSACKDelayed("TSN 9", h.now.Add(RecvDefaultSACKDelay))
	if !h.r.SACKPending() {
		t.Fatal("SACKPending = false with TSN 9 unacknowledged; the SACK is to be bundled with outbound DATA")
	}
	// The timer fires.
	h.now = h.now.Add(RecvDefaultSACKDelay)
	h.wantSACK(h.wantSACKNow("at the deadline"), "cum=9")
	h.wantGot(recvGot{0, 4, 16, false, "b"}, recvGot{0, 5, 16, false, "c"})
}

// TestRecvEverySecondPacket counts packets, not chunks: "(not every second
// DATA chunk)".
func TestRecvEverySecondPacket(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.packet(recvD(7, 0, 0, 0, "a"), recvD(8, 0, 1, 0, "b"), recvD(9, 0, 2, 0, "c"))
	h.wantSACKDelayed("one packet of three chunks", recvT0.Add(RecvDefaultSACKDelay))
	h.packet(recvD(10, 1, 0, 0, "d"))
	h.wantSACK(h.wantSACKNow("second packet"), "cum=10")
	// A packet without DATA changes nothing.
	h.r.EndPacket(h.now)
	h.wantNoSACK("empty packet")
}

// TestRecvImmediate: "Upon receipt of an SCTP packet containing a DATA
// chunk with the I bit set, the receiver SHOULD NOT delay the sending of
// the corresponding SACK chunk" (§6.2).
func TestRecvImmediate(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.packet(recvD(7, 0, 0, chunk.FlagImmediate, "a"))
	h.wantSACK(h.wantSACKNow("I bit"), "cum=7")
}

// TestRecvGapFigure9 follows RFC 9260 §6.7's Figure 9.
func TestRecvGapFigure9(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 6, BufferSize: 1 << 16, InboundStreams: 1})
	h.r.reasm.nextSSN[0] = 2
	// DATA [TSN=6,Strm=0,Seq=2] ---------------> (ack delayed)
	h.packet(recvD(6, 0, 2, 0, "6"))
	h.wantSACKDelayed("TSN 6", recvT0.Add(RecvDefaultSACKDelay))
	// DATA [TSN=7,Strm=0,Seq=3] --------> X (lost)
	// DATA [TSN=8,Strm=0,Seq=4] ---------------> (gap detected, immediately send ack)
	h.packet(recvD(8, 0, 4, 0, "8"))
	// SACK [TSN Ack=6,Block=1,Start=2,End=2]
	h.wantSACK(h.wantSACKNow("gap"), "cum=6 2-2")
	h.wantGot(recvGot{0, 2, 16, false, "6"})
	// "The data receiver continues sending a SACK chunk after receipt of
	// each SCTP packet that does not fill the gap."
	h.packet(recvD(9, 0, 5, 0, "9"))
	h.wantSACK(h.wantSACKNow("gap still open"), "cum=6 2-3")
	// The retransmission of TSN 7 fills the gap and releases SSNs 3 to 5.
	h.packet(recvD(7, 0, 3, 0, "7"))
	h.wantSACK(h.wantSACKNow("gap filled"), "cum=9")
	h.wantGot(recvGot{0, 3, 16, false, "7"}, recvGot{0, 4, 16, false, "8"}, recvGot{0, 5, 16, false, "9"})
	if h.r.Held() != 0 {
		t.Fatalf("Held = %d after delivery", h.r.Held())
	}
	// Back to delayed acknowledgements.
	h.packet(recvD(10, 0, 6, 0, "10"))
	h.wantSACKDelayed("no gap", h.now.Add(RecvDefaultSACKDelay))
}

// TestRecvGapBlocksExample builds the SACK of RFC 9260 §3.3.4's example
// byte for byte: TSNs 10, 11, 12, 14, 15 and 17 received, a_rwnd 4660.
func TestRecvGapBlocksExample(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 10, BufferSize: 4660, InboundStreams: 1})
	for _, tsn := range []uint32{10, 11, 12, 14, 15, 17} {
		// Unordered, so that nothing is held and a_rwnd stays 4660.
		h.packet(recvD(tsn, 0, 0, chunk.FlagUnordered, "x"))
	}
	got := h.r.AppendSACK(nil, 1500)
	want := []byte{
		0x03, 0x00, 0x00, 0x18, // Type = 3, Chunk Length = 24
		0x00, 0x00, 0x00, 0x0c, // Cumulative TSN Ack = 12
		0x00, 0x00, 0x12, 0x34, // a_rwnd = 4660
		0x00, 0x02, 0x00, 0x00, // num of block = 2, num of dup = 0
		0x00, 0x02, 0x00, 0x03, // block #1 start = 2, block #1 end = 3
		0x00, 0x05, 0x00, 0x05, // block #2 start = 5, block #2 end = 5
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("SACK\n% x\nwant\n% x", got, want)
	}
}

// TestRecvDuplicates follows §3.3.4's example: "if a receiver were to get
// the TSN 19 three times, it would list 19 twice in the outbound SACK
// chunk. After sending the SACK chunk, if it received yet one more TSN 19,
// it would list 19 as a duplicate once in the next outgoing SACK chunk."
func TestRecvDuplicates(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 19, BufferSize: 1 << 16, InboundStreams: 1})
	h.wantRes(h.packet(recvD(19, 0, 0, 0, "a")), RecvNew)
	h.wantSACKDelayed("TSN 19", recvT0.Add(RecvDefaultSACKDelay))
	h.now = recvT0.Add(RecvDefaultSACKDelay)
	h.wantSACK(h.wantSACKNow("timer"), "cum=19")
	h.wantRes(h.packet(recvD(19, 0, 0, 0, "a")), RecvDuplicate)
	// "When a packet arrives with duplicate DATA chunk(s) and with no new
	// DATA chunk(s), the endpoint MUST immediately send a SACK chunk with
	// no delay." The SACK is built once the third copy is in.
	if now, _ := h.r.SACKWhen(h.now); !now {
		t.Fatal("no SACK at once after a duplicate")
	}
	h.wantRes(h.packet(recvD(19, 0, 0, 0, "a")), RecvDuplicate)
	h.wantSACK(h.wantSACKNow("duplicates"), "cum=19 dup 19 19") // TSN 19 three times
	h.wantGot(recvGot{0, 0, 16, false, "a"})
	h.packet(recvD(19, 0, 0, 0, "a"))
	h.wantSACK(h.wantSACKNow("one more"), "cum=19 dup 19")
	// A duplicate bundled with new DATA: "the endpoint MAY immediately
	// send a SACK chunk"; this one does.
	h.packet(recvD(19, 0, 0, 0, "a"), recvD(20, 0, 1, 0, "b"))
	h.wantSACK(h.wantSACKNow("duplicate and new"), "cum=20 dup 19")
	// Duplicates of TSNs in a Gap Ack Block, too.
	h.packet(recvD(22, 0, 3, 0, "d"))
	h.packet(recvD(22, 0, 3, 0, "d"))
	h.wantSACK(h.wantSACKNow("duplicate beyond the gap"), "cum=20 2-2 dup 22")
}

// TestRecvDuplicateLimit lists at most MaxDuplicateTSNs: "The duplicate
// TSN number(s) SHOULD be reported in the SACK chunk as duplicate" (§6.2).
func TestRecvDuplicateLimit(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 1, MaxDuplicateTSNs: 3})
	h.packet(recvD(1, 0, 0, 0, "a"))
	for range 10 {
		h.packet(recvD(1, 0, 0, 0, "a"))
	}
	h.wantSACK(h.wantSACKNow("duplicates"), "cum=1 dup 1 1 1")
	if got := h.r.Stats().Duplicates; got != 10 {
		t.Fatalf("Stats().Duplicates = %d, want 10", got)
	}
}

// TestRecvWrap runs TSNs across 2^32: "the next TSN a DATA chunk MUST use
// after transmitting TSN = 2^32 - 1 is TSN = 0" (§1.6), and Gap Ack Block
// offsets are taken modulo 2^32.
func TestRecvWrap(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1<<32 - 2, BufferSize: 1 << 16, InboundStreams: 2})
	h.wantRes(h.packet(recvD(1<<32-2, 0, 0, 0, "a")), RecvNew)
	h.wantRes(h.packet(recvD(0, 0, 2, 0, "c")), RecvNew) // 2^32-1 missing
	h.wantRes(h.packet(recvD(2, 1, 0, 0, "e")), RecvNew) // 1 missing
	h.wantSACK(h.wantSACKNow("gaps across the wrap"), "cum=4294967294 2-2 4-4")
	h.wantGot(recvGot{0, 0, 16, false, "a"}, recvGot{1, 0, 16, false, "e"})
	h.wantRes(h.packet(recvD(1<<32-1, 0, 1, 0, "b")), RecvNew)
	h.wantSACK(h.wantSACKNow("first gap filled"), "cum=0 2-2")
	h.wantRes(h.packet(recvD(1<<32-1, 0, 1, 0, "b")), RecvDuplicate)
	h.wantRes(h.packet(recvD(1, 1, 1, 0, "d")), RecvNew)
	h.wantSACK(h.wantSACKNow("all filled"), "cum=2 dup 4294967295")
	h.wantGot(recvGot{0, 1, 16, false, "b"}, recvGot{0, 2, 16, false, "c"}, recvGot{1, 1, 16, false, "d"})
	// A TSN 2^31 or more behind is old, never new.
	h.wantRes(h.packet(recvD(2+1<<31, 0, 3, 0, "x")), RecvDuplicate)
}

// TestRecvLostAndRetransmitted loses two packets of a burst and has them
// retransmitted out of order.
func TestRecvLostAndRetransmitted(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 100, BufferSize: 1 << 16, InboundStreams: 1})
	for _, tsn := range []uint32{100, 101, 103, 104, 106, 107} {
		h.packet(recvD(tsn, 0, uint16(tsn-100), 0, fmt.Sprint(tsn)))
	}
	h.wantSACK(h.sack(1500), "cum=101 2-3 5-6")
	h.packet(recvD(105, 0, 5, 0, "105"))
	h.wantSACK(h.wantSACKNow("second gap filled"), "cum=101 2-6")
	h.packet(recvD(102, 0, 2, 0, "102"))
	h.wantSACK(h.wantSACKNow("first gap filled"), "cum=107")
	var want []recvGot
	for tsn := range uint32(8) {
		want = append(want, recvGot{0, SSN(tsn), 16, false, fmt.Sprint(100 + tsn)})
	}
	h.wantGot(want...)
}

// TestRecvSACKRoom: "The SCTP endpoint MUST report as many Gap Ack Blocks
// as can fit in a single SACK chunk such that the size of the SCTP packet
// does not exceed the current PMTU", and "This single SACK chunk MUST
// report the Gap Ack Blocks from the lowest to highest TSNs, within the
// size limit set by the PMTU, and leave the remaining highest TSN numbers
// unacknowledged" (§6.2, §6.7).
func TestRecvSACKRoom(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 1})
	h.packet(recvD(1, 0, 0, chunk.FlagUnordered, "x"))
	for i := range uint32(10) {
		h.packet(recvD(3+2*i, 0, 0, chunk.FlagUnordered, "x"))
	}
	h.packet(recvD(1, 0, 0, 0, "x"), recvD(3, 0, 0, 0, "x"))
	// 16 bytes of fixed fields and 3 blocks.
	h.wantSACK(h.sack(16+3*4+3), "cum=1 2-2 4-4 6-6")
	// Duplicates go in what is left; none are left now (listed once).
	h.packet(recvD(1, 0, 0, 0, "x"))
	h.wantSACK(h.sack(16+11*4), "cum=1 2-2 4-4 6-6 8-8 10-10 12-12 14-14 16-16 18-18 20-20 dup 1")
	h.wantSACK(h.sack(16), "cum=1")
	h.wantSACK(h.sack(0), "cum=1")
}

// TestRecvShutdownSent: "If a SHUTDOWN chunk by itself cannot acknowledge
// all of the received DATA chunks (i.e., there are TSNs that can be
// acknowledged that are larger than the cumulative TSN and thus gaps exist
// in the TSN sequence) or if duplicate TSNs have been received, then a
// SACK chunk MUST also be sent" (§9.2).
func TestRecvShutdownSent(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.packet(recvD(7, 0, 0, 0, "a"))
	if h.r.GapsOrDuplicates() {
		t.Fatal("GapsOrDuplicates with neither")
	}
	h.packet(recvD(9, 0, 2, 0, "c"))
	if !h.r.GapsOrDuplicates() {
		t.Fatal("GapsOrDuplicates = false with a gap")
	}
	h.packet(recvD(8, 0, 1, 0, "b"))
	h.sack(1500)
	h.packet(recvD(8, 0, 1, 0, "b"))
	if !h.r.GapsOrDuplicates() {
		t.Fatal("GapsOrDuplicates = false with a duplicate")
	}
}
