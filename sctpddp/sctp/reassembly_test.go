package sctp

import (
	"errors"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

const (
	recvB = chunk.FlagBeginning
	recvE = chunk.FlagEnding
	recvU = chunk.FlagUnordered
)

// TestReasmFragments reassembles a message from fragments in and out of
// order: "An endpoint MUST recognize fragmented DATA chunks by examining
// the B/E bits in each of the received DATA chunks and queue the
// fragmented DATA chunks for reassembly" (§6.9).
func TestReasmFragments(t *testing.T) {
	for _, order := range [][]int{
		{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}, {3, 0, 1, 2},
	} {
		h := newRecvHarness(t, recvCfg)
		frags := []chunk.Data{
			recvD(7, 1, 0, recvB, "he"),
			recvD(8, 1, 0, recvMiddle, "ll"),
			recvD(9, 1, 0, recvMiddle, "o "),
			recvD(10, 1, 0, recvE, "world"),
		}
		for i, k := range order {
			h.wantRes(h.packet(frags[k]), RecvNew)
			if i < len(order)-1 {
				if len(h.got) != 0 {
					t.Fatalf("order %v: delivered %v before the last fragment", order, h.got)
				}
				// "if the receiver is holding fragmented DATA chunks in a
				// reassembly queue, it SHOULD NOT increment a_rwnd" (§6.2 C).
				if h.r.ARwnd() != recvCfg.BufferSize-uint32(h.r.Held()) || h.r.Held() == 0 {
					t.Fatalf("order %v: a_rwnd %d with %d held", order, h.r.ARwnd(), h.r.Held())
				}
			}
		}
		h.wantGot(recvGot{1, 0, 16, false, "hello world"})
		if h.r.Held() != 0 || h.r.ARwnd() != recvCfg.BufferSize {
			t.Fatalf("order %v: Held %d, a_rwnd %d after delivery", order, h.r.Held(), h.r.ARwnd())
		}
		if h.r.reasm.entries() != 0 {
			t.Fatalf("order %v: %d entries left", order, h.r.reasm.entries())
		}
	}
}

// TestReasmInterleaved interleaves fragmented messages across streams,
// reordered by the network: each message's fragments take consecutive TSNs
// ("assign, in sequence, a separate TSN to each of the DATA chunks in the
// series"), and messages of different streams are delivered independently
// while each stream keeps its order ("Within a stream, an endpoint MUST
// deliver DATA chunks received with the U flag set to 0 to the upper layer
// according to the order of their Stream Sequence Number", §6.6).
func TestReasmInterleaved(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	// Stream 1 SSN 0: TSN 7-8. Stream 2 SSN 0: TSN 9-11. Stream 1 SSN 1:
	// TSN 12-13. Stream 2 SSN 1: TSN 14 (unfragmented).
	h.packet(recvD(12, 1, 1, recvB, "C1"), recvD(14, 2, 1, 0, "D"))
	h.packet(recvD(10, 2, 0, recvMiddle, "B2"), recvD(13, 1, 1, recvE, "C2"))
	h.wantGot() // stream 1 waits for SSN 0, stream 2 for SSN 0
	h.packet(recvD(9, 2, 0, recvB, "B1"), recvD(11, 2, 0, recvE, "B3"))
	h.wantGot(recvGot{2, 0, 16, false, "B1B2B3"}, recvGot{2, 1, 16, false, "D"})
	h.packet(recvD(8, 1, 0, recvE, "A2"))
	h.wantGot()
	h.packet(recvD(7, 1, 0, recvB, "A1"))
	h.wantGot(recvGot{1, 0, 16, false, "A1A2"}, recvGot{1, 1, 16, false, "C1C2"})
	h.wantSACK(h.sack(1500), "cum=14")
	if h.r.Held() != 0 || h.r.reasm.entries() != 0 {
		t.Fatalf("Held %d, %d entries after delivery", h.r.Held(), h.r.reasm.entries())
	}
}

// TestReasmUnordered: "When an endpoint receives a DATA chunk with the U
// flag set to 1, it bypasses the ordering mechanism and immediately
// deliver the data to the upper layer (after reassembly if the user data
// is fragmented by the data sender)", and "The 'Stream Sequence Number'
// field in a DATA chunk with U flag set to 1 has no significance ... the
// receiver MUST ignore the field" (§6.6).
func TestReasmUnordered(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	// Ordered SSN 0 on stream 0 is lost (TSN 7); an unordered fragmented
	// message (TSN 8-10) with an arbitrary SSN and an unordered
	// unfragmented one (TSN 11) are delivered at once.
	h.packet(recvD(9, 0, 999, recvU|recvMiddle, "u2"))
	h.packet(recvD(11, 0, 12345, recvU, "v"))
	h.wantGot(recvGot{0, 12345, 16, true, "v"})
	h.packet(recvD(10, 0, 7, recvU|recvE, "u3"), recvD(8, 0, 42, recvU|recvB, "u1"))
	h.wantGot(recvGot{0, 42, 16, true, "u1u2u3"})
	// The ordered stream is untouched: SSN 0 is still next.
	h.packet(recvD(12, 0, 1, 0, "o1"))
	h.wantGot()
	h.packet(recvD(7, 0, 0, 0, "o0"))
	h.wantGot(recvGot{0, 0, 16, false, "o0"}, recvGot{0, 1, 16, false, "o1"})
}

// TestReasmUnorderedFragmentsSameStream keeps apart two unordered
// messages on one stream whose fragments arrive mixed: a run ends at an E
// bit and the next begins at a B bit.
func TestReasmUnorderedFragmentsSameStream(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.packet(recvD(9, 0, 0, recvU|recvB, "y1"), recvD(8, 0, 0, recvU|recvE, "x2"))
	h.packet(recvD(10, 0, 0, recvU|recvE, "y2"))
	h.wantGot(recvGot{0, 0, 16, true, "y1y2"})
	h.packet(recvD(7, 0, 0, recvU|recvB, "x1"))
	h.wantGot(recvGot{0, 0, 16, true, "x1x2"})
}

// TestReasmSSNWrap runs a stream's SSN across 2^16: "when the Stream
// Sequence Number reaches the value 65535, the next Stream Sequence
// Number MUST be set to 0" (§6.5).
func TestReasmSSNWrap(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.r.reasm.nextSSN[3] = 65534
	h.packet(recvD(9, 3, 0, 0, "c"), recvD(8, 3, 65535, 0, "b"))
	h.wantGot()
	h.packet(recvD(7, 3, 65534, 0, "a"))
	h.wantGot(recvGot{3, 65534, 16, false, "a"}, recvGot{3, 65535, 16, false, "b"}, recvGot{3, 0, 16, false, "c"})
}

// TestReasmLargeMessage reassembles a message larger than the first
// buffer class, fragments in order and reversed.
func TestReasmLargeMessage(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		h := newRecvHarness(t, recvCfg)
		const n = 50
		frag := func(i int) chunk.Data {
			var f chunk.DataFlags = recvMiddle
			switch i {
			case 0:
				f = recvB
			case n - 1:
				f = recvE
			}
			return recvD(7+uint32(i), 0, 0, f, strings.Repeat(string(rune('a'+i%26)), 1000))
		}
		var want strings.Builder
		for i := range n {
			want.WriteString(strings.Repeat(string(rune('a'+i%26)), 1000))
		}
		for i := range n {
			if reverse {
				h.packet(frag(n - 1 - i))
			} else {
				h.packet(frag(i))
			}
		}
		h.wantGot(recvGot{0, 0, 16, false, want.String()})
	}
}

// TestRecvInvalidStream: "If an endpoint receives a DATA chunk with an
// invalid stream identifier, it SHOULD acknowledge the reception of the
// DATA chunk following the normal procedure, immediately send an ERROR
// chunk with cause set to "Invalid Stream Identifier" (see Section
// 3.3.10), and discard the DATA chunk" (§6.5).
func TestRecvInvalidStream(t *testing.T) {
	h := newRecvHarness(t, recvCfg)
	h.wantRes(h.packet(recvD(7, 4, 0, 0, "x")), RecvInvalidStream)
	h.wantGot()
	h.wantSACK(h.sack(1500), "cum=7")
	h.wantRes(h.packet(recvD(7, 4, 0, 0, "x")), RecvDuplicate)
	b := chunk.InvalidStreamIdentifier{StreamID: 4}.Append(nil)
	if _, _, err := chunk.ParseInvalidStreamIdentifier(b); err != nil {
		t.Fatal(err)
	}
}

// TestRecvErrors returns the ABORT causes.
func TestRecvErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup []chunk.Data
		d     chunk.Data
		cause chunk.CauseCode
	}{
		// "If an endpoint receives a DATA chunk with no user data (i.e.,
		// the Length field is set to 16), it SHOULD send an ABORT chunk
		// with a "No User Data" error cause" (§6.2).
		{"no user data", nil, recvD(7, 0, 0, 0, ""), chunk.CauseNoUserData},
		// "The Stream Sequence Number of an outgoing stream MUST be
		// incremented by 1 for each ordered user message" (§6.5): an SSN
		// already delivered on a new TSN.
		{"old SSN", []chunk.Data{recvD(7, 0, 0, 0, "a")}, recvD(8, 0, 0, 0, "b"), chunk.CauseProtocolViolation},
		{"old SSN fragment", []chunk.Data{recvD(7, 0, 0, 0, "a")}, recvD(8, 0, 0, recvB, "b"), chunk.CauseProtocolViolation},
		{"one SSN twice", []chunk.Data{recvD(8, 0, 1, 0, "a")}, recvD(9, 0, 1, 0, "b"), chunk.CauseProtocolViolation},
		{"one SSN delivered while reassembled", []chunk.Data{recvD(8, 0, 0, recvB, "a"), recvD(7, 0, 0, 0, "b")}, recvD(9, 0, 0, recvE, "c"), chunk.CauseProtocolViolation},
		{"one SSN twice, fragmented", []chunk.Data{recvD(8, 0, 1, 0, "a"), recvD(9, 0, 1, recvB, "b")}, recvD(10, 0, 1, recvE, "c"), chunk.CauseProtocolViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRecvHarness(t, recvCfg)
			for _, d := range tc.setup {
				h.packet(d)
			}
			b := tc.d.Append(nil)
			d, _, _ := chunk.ParseData(b)
			_, err := h.r.Data(d)
			var re *RecvError
			if !errors.As(err, &re) || re.Cause != tc.cause || re.TSN != tc.d.TSN {
				t.Fatalf("Data = %v, want a RecvError with %v for TSN %d", err, tc.cause, tc.d.TSN)
			}
			if !errors.Is(err, &RecvError{Cause: tc.cause}) {
				t.Fatal("errors.Is does not match the cause")
			}
			if !strings.Contains(err.Error(), tc.cause.String()) {
				t.Fatalf("Error() = %q, without %q", err.Error(), tc.cause)
			}
			c, _, err := chunk.ParseCause(re.AppendCause(nil))
			if err != nil || c.Code() != tc.cause {
				t.Fatalf("AppendCause: %v, code %v", err, c.Code())
			}
		})
	}
}

// TestRecvMessageTooLarge: a message that outgrows MaxMessageSize can
// never be delivered without a partial delivery API (§6.9): Out of
// Resource.
func TestRecvMessageTooLarge(t *testing.T) {
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 1, MaxMessageSize: 10})
	h.packet(recvD(1, 0, 0, recvB, "12345"))
	h.packet(recvD(3, 0, 0, recvMiddle, "123"))
	_, err := h.r.Data(recvD(2, 0, 0, recvMiddle, "123"))
	if !errors.Is(err, &RecvError{Cause: chunk.CauseOutOfResource}) {
		t.Fatalf("Data = %v, want Out of Resource", err)
	}
}

// TestReasmHostileRuns keeps apart fragments that cannot belong to one
// message: a fragment is followed in its message only by one without the
// B bit, and preceded only by one without the E bit, on the same stream,
// with the same U bit and, when ordered, the same SSN (§6.9: "The
// transmitter MUST also set the B/E bits of the first DATA chunk in the
// series to 10, the B/E bits of the last DATA chunk in the series to 01,
// and the B/E bits of all other DATA chunks in the series to 00").
func TestReasmHostileRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    chunk.Data // TSN 8, never completed
	}{
		{"B after B", recvD(8, 0, 0, recvB, "a")},
		{"middle before B", recvD(8, 0, 0, recvMiddle, "a")},
		{"other stream", recvD(8, 1, 0, recvB, "a")},
		{"other SSN", recvD(8, 0, 1, recvB, "a")},
		{"unordered before ordered", recvD(8, 0, 0, recvU|recvB, "a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRecvHarness(t, recvCfg)
			// TSN 9-10: a message begun at TSN 9.
			h.packet(recvD(9, 0, 0, recvB, "b"))
			h.packet(tc.a)
			h.packet(recvD(10, 0, 0, recvE, "c"))
			h.wantGot(recvGot{0, 0, 16, false, "bc"})
			if h.r.reasm.entries() != 1 || h.r.Held() != 1 {
				t.Fatalf("%d entries, %d bytes held; want TSN 8 alone", h.r.reasm.entries(), h.r.Held())
			}
		})
	}
	// And after: a fragment with the E bit ends its message.
	h := newRecvHarness(t, recvCfg)
	h.packet(recvD(8, 0, 0, recvB|recvU, "a"))
	h.packet(recvD(9, 0, 0, recvU|recvMiddle, "b"))
	h.packet(recvD(10, 0, 0, recvU|recvB, "x"))
	h.packet(recvD(11, 0, 0, recvU|recvE, "y"))
	h.wantGot(recvGot{0, 0, 16, true, "xy"})
	h.packet(recvD(7, 0, 0, recvU|recvE, "z"))
	h.wantGot()
}

func TestRecvResultString(t *testing.T) {
	for r, want := range map[RecvResult]string{
		RecvNew: "new", RecvDuplicate: "duplicate", RecvDropped: "dropped",
		RecvInvalidStream: "invalid stream", 9: "RecvResult(9)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(r), got, want)
		}
	}
}
