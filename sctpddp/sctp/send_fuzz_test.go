package sctp

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// FuzzSendSACK runs a Sender through operations read from the input:
// queueing chunks, sending, SACKs that a receiver could send, garbage
// SACKs, the clock moving and timers firing. After each operation it
// checks the queue against its own count: flightsize is the sum of the
// chunks sent and neither acked nor marked lost, the counters and the
// xmit_ts list agree with the chunks' states, cwnd is at least one PMDCS,
// and chunks are released once each, in TSN order.
func FuzzSendSACK(f *testing.F) {
	f.Add([]byte{0, 7, 1, 255, 2, 1, 0, 0, 4, 40, 2, 2, 3, 1})
	f.Add([]byte{0, 7, 0, 7, 1, 255, 4, 200, 4, 200, 1, 255, 2, 9, 1, 2, 3})
	f.Add([]byte{0, 3, 1, 255, 3, 0xff, 0xff, 0xff, 0xff, 3, 0, 1, 0, 5, 4, 255, 5, 1, 255})
	f.Add([]byte{0, 7, 0, 7, 0, 7, 1, 255, 2, 20, 3, 5, 6, 9, 12, 2, 20, 3, 5, 6, 4, 10, 5, 2, 20, 0, 1, 255})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const pmdcs = 1200
		now := time.Unix(1_700_000_000, 0)
		initial := TSN(binary.LittleEndian.Uint32(append(ops[:min(len(ops), 4):min(len(ops), 4)], 0, 0, 0, 0)))
		s := NewSender(SenderConfig{PMDCS: pmdcs, InitialTSN: initial, PeerRwnd: 64 * pmdcs, MaxChunks: 256}, now)
		payload := make([]byte, pmdcs-chunk.DataHeaderLen)
		nextRelease := initial
		var gaps chunk.GapAckBlocks
		var dups chunk.TSNList
		b := ops
		next := func() byte {
			if len(b) == 0 {
				return 0
			}
			c := b[0]
			b = b[1:]
			return c
		}
		handle := func(sack chunk.SACK) {
			before := 0
			for tsn := s.cumAck + 1; tsn != s.nextSend; tsn++ {
				if s.ent(tsn).st&sndAcked == 0 {
					before += int(s.ent(tsn).size)
				}
			}
			r := s.HandleSACK(now, sack)
			if r.BytesAcked > before {
				t.Fatalf("BytesAcked %d, but only %d were unacknowledged", r.BytesAcked, before)
			}
			for _, c := range r.Released {
				if TSN(c.Data.TSN) != nextRelease {
					t.Fatalf("released TSN %d, want %d", c.Data.TSN, nextRelease)
				}
				nextRelease++
			}
			if r.Dropped && len(r.Released) > 0 {
				t.Fatal("a dropped SACK released chunks")
			}
		}
		for len(b) > 0 {
			switch next() % 7 {
			case 0:
				for range int(next()%8) + 1 {
					n := int(next())*4 + 1
					s.Queue(chunk.Data{UserData: payload[:min(n, len(payload))]}, nil)
				}
			case 1:
				room := int(next())*8 + 16
				for range 64 {
					d, ok := s.Next(now, room)
					if !ok {
						break
					}
					if d.Len() > room {
						t.Fatalf("Next returned %d bytes for room %d", d.Len(), room)
					}
				}
			case 2:
				// A SACK a receiver could send: a Cumulative TSN Ack near
				// the sender's, blocks in order.
				cum := s.cumAck + TSN(next()%16) - 2
				gaps = gaps[:0]
				at := uint16(1)
				for range int(next() % 5) {
					start := at + uint16(next()%4) + 1
					end := start + uint16(next()%6)
					gaps = gaps.AppendBlock(start, end)
					at = end + 1
				}
				dups = dups[:0]
				if next()%4 == 0 {
					dups = dups.AppendTSN(uint32(cum - TSN(next()%4)))
				}
				handle(chunk.SACK{CumulativeTSNAck: uint32(cum), ARwnd: uint32(next()) * pmdcs, GapAckBlocks: gaps, DuplicateTSNs: dups})
			case 3:
				// Garbage: any Cumulative TSN Ack, any blocks.
				cum := uint32(next())<<24 | uint32(next())<<16 | uint32(next())<<8 | uint32(next())
				if next()%2 == 0 {
					cum = uint32(s.cumAck) + cum%64
				}
				gaps = gaps[:0]
				for range int(next() % 6) {
					gaps = gaps.AppendBlock(uint16(next())<<8|uint16(next()), uint16(next())<<8|uint16(next()))
				}
				handle(chunk.SACK{CumulativeTSNAck: cum, ARwnd: uint32(next()) << 16, GapAckBlocks: gaps})
			case 4:
				now = now.Add(time.Duration(next()) * 2 * time.Millisecond)
				if d := s.NextDeadline(); !d.IsZero() && !now.Before(d) {
					s.OnTimeout(now)
				}
			case 5:
				if d := s.NextDeadline(); !d.IsZero() {
					now = d
					s.OnTimeout(now)
				}
			case 6:
				switch next() % 3 {
				case 0:
					s.HeartbeatUnanswered()
				case 1:
					s.HeartbeatAcked(time.Duration(next()) * time.Millisecond)
				case 2:
					s.ObserveRTT(time.Duration(next()) * time.Millisecond)
				}
			}
			checkSender(t, s)
		}
	})
}

// checkSender verifies the Sender's invariants against its queue.
func checkSender(t *testing.T, s *Sender) {
	t.Helper()
	flight, gapAcked, lost, inFlight := 0, 0, 0, 0
	for tsn := s.cumAck + 1; tsn != s.nextTSN; tsn++ {
		e := s.ent(tsn)
		if TSN(e.data.TSN) != tsn {
			t.Fatalf("entry for TSN %d holds TSN %d", tsn, e.data.TSN)
		}
		sent := !tsn.Before(s.cumAck+1) && tsn.Before(s.nextSend)
		if sent != (e.st&sndSent != 0) {
			t.Fatalf("TSN %d: sent flag %v, nextSend %d", tsn, e.st&sndSent != 0, s.nextSend)
		}
		acked, isLost := e.st&sndAcked != 0, e.st&sndLost != 0
		if acked && isLost {
			t.Fatalf("TSN %d both gap-acked and lost", tsn)
		}
		want := sent && !acked && !isLost
		if want != (e.st&sndInFlight != 0) {
			t.Fatalf("TSN %d: in flight %v, want %v (state %b)", tsn, e.st&sndInFlight != 0, want, e.st)
		}
		if want != (e.st&sndInList != 0) {
			t.Fatalf("TSN %d: in the xmit_ts list %v, want %v", tsn, e.st&sndInList != 0, want)
		}
		if want {
			flight += int(e.size)
			inFlight++
		}
		if acked {
			gapAcked++
			if s.highestGapAcked.Before(tsn) {
				t.Fatalf("TSN %d gap-acked above highestGapAcked %d", tsn, s.highestGapAcked)
			}
		}
		if isLost {
			lost++
			if tsn.Before(s.lostLow) {
				t.Fatalf("TSN %d lost below lostLow %d", tsn, s.lostLow)
			}
		}
	}
	if flight != s.flight {
		t.Fatalf("flightsize %d, chunks in flight sum to %d", s.flight, flight)
	}
	if gapAcked != s.numGapAcked || lost != s.numLost || inFlight != s.listLen {
		t.Fatalf("counters: gap-acked %d/%d lost %d/%d list %d/%d", s.numGapAcked, gapAcked, s.numLost, lost, s.listLen, inFlight)
	}
	tsn := s.listHead
	var last sndTime
	for n := s.listLen; n > 0; n-- {
		e := s.ent(tsn)
		if e.xmit < last {
			t.Fatalf("xmit_ts list out of order at TSN %d", tsn)
		}
		last = e.xmit
		tsn = e.next
	}
	if s.cwnd < s.pmdcs {
		t.Fatalf("cwnd %d below PMDCS", s.cwnd)
	}
	if s.Outstanding() == (s.t3 == 0) && s.listLen+s.numLost+s.numGapAcked > 0 && s.numLost == 0 {
		t.Fatalf("T3-rtx %d with outstanding %v", s.t3, s.Outstanding())
	}
}
