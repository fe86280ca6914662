package sctp

import (
	"math/bits"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// Reassembly and delivery (RFC 9260 §6.5, §6.6, §6.9).
//
// A user message carried in one unfragmented DATA chunk (B and E bits both
// set), unordered or ordered with the stream's next SSN, is delivered from
// the packet without a copy: the common case for DDP, whose segments fit
// the path. Everything else is copied into a buffer from reasmPool and
// held:
//
//   - runs are the fragments of messages not yet complete. "The
//     transmitter MUST then assign, in sequence, a separate TSN to each of
//     the DATA chunks in the series" (§6.9): a message's fragments have
//     consecutive TSNs and nothing else lies between them, so a run is a
//     range of TSNs whose bytes are kept in one buffer, in TSN order.
//     Fragments that arrive in order are appended to it, each byte copied
//     once: a run that begins a message has room for twice its first
//     fragment, and moves to a buffer twice as large when it outgrows it
//     (so that a message of three fragments or more may be copied more
//     than once, under twice on average); a fragment that closes the gap
//     to the run after it has that run's bytes appended too. A run is
//     complete when its first fragment has the B bit and its last the E
//     bit; it is delivered from its buffer.
//   - held are complete ordered messages waiting for the SSNs before
//     theirs: "If DATA chunks arrive out of order of their Stream Sequence
//     Number, the endpoint MUST hold the received DATA chunks from delivery
//     to the ULP until they are reordered" (§6.6).
//
// Their bytes count against the receive window (Receiver.heldBytes) and
// their number against MaxHeldChunks and MaxHeldPerStream. Per stream only
// the next expected SSN and that count are kept: four bytes for each of
// the InboundStreams.

// reasmMsg is a run of fragments or a complete message held.
type reasmMsg struct {
	first, last TSN // the TSNs of the first and last fragments held
	sid         uint16
	ssn         SSN
	ppid        uint32
	unordered   bool
	begin, end  bool // the first fragment has the B bit, the last the E bit
	buf         []byte
}

// reasmState is the Receiver's reassembly and reordering state.
type reasmState struct {
	nextSSN []SSN      // the next SSN expected on each inbound stream
	runs    []reasmMsg // partial messages, in TSN order
	held    []reasmMsg // complete ordered messages, by stream then SSN
	// perStream counts the runs and held messages of each inbound stream,
	// bounded by MaxHeldPerStream.
	perStream []uint16
	pool      reasmPool
}

func (s *reasmState) init(cfg *ReceiverConfig) {
	// "The Stream Sequence Number in all the outgoing streams MUST start
	// from 0 when the association is established" (§6.5).
	s.nextSSN = make([]SSN, cfg.InboundStreams)
	s.perStream = make([]uint16, cfg.InboundStreams)
	s.pool.limit = uint64(cfg.BufferSize)
}

// entries returns the number of runs and messages held.
func (s *reasmState) entries() int { return len(s.runs) + len(s.held) }

func reasmWhole(f chunk.DataFlags) bool {
	return f&(chunk.FlagBeginning|chunk.FlagEnding) == chunk.FlagBeginning|chunk.FlagEnding
}

// reasmRunAt returns the index of the first run whose first TSN comes
// after t.
func (s *reasmState) reasmRunAt(t TSN) int {
	lo, hi := 0, len(s.runs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.runs[m].first.AtOrBefore(t) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// reasmJoins returns the runs that fragment d extends: prev ends at the
// TSN before d's and continues the same message, next starts at the TSN
// after d's and continues it; -1 when there is none. i is where a new run
// for d goes.
func (s *reasmState) reasmJoins(d chunk.Data) (prev, next, i int) {
	t := TSN(d.TSN)
	i = s.reasmRunAt(t)
	prev, next = -1, -1
	u := d.Flags&chunk.FlagUnordered != 0
	same := func(m *reasmMsg) bool {
		return m.sid == d.StreamID && m.unordered == u && (u || m.ssn == SSN(d.SSN))
	}
	if i > 0 {
		if m := &s.runs[i-1]; m.last.Next() == t && !m.end && d.Flags&chunk.FlagBeginning == 0 && same(m) {
			prev = i - 1
		}
	}
	if i < len(s.runs) {
		if m := &s.runs[i]; m.first == t.Next() && !m.begin && d.Flags&chunk.FlagEnding == 0 && same(m) {
			next = i
		}
	}
	return prev, next, i
}

// reasmHeldAt returns where an ordered message (sid, ssn) goes in held,
// and whether one is there already.
func (r *Receiver) reasmHeldAt(sid uint16, ssn SSN) (int, bool) {
	s := &r.reasm
	dist := uint16(ssn - s.nextSSN[sid])
	lo, hi := 0, len(s.held)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		h := &s.held[m]
		if h.sid < sid || h.sid == sid && uint16(h.ssn-s.nextSSN[sid]) < dist {
			lo = m + 1
		} else {
			hi = m
		}
	}
	found := lo < len(s.held) && s.held[lo].sid == sid && s.held[lo].ssn == ssn
	return lo, found
}

// reasmPlan returns the bytes of d that would be held if it were
// accepted and whether it would add a run or a held message; or the error
// for a chunk that breaks the rules of ordered delivery. d is new, on a
// valid stream.
func (r *Receiver) reasmPlan(d chunk.Data) (hold int, newEntry bool, err error) {
	s := &r.reasm
	u := d.Flags&chunk.FlagUnordered != 0
	if !u {
		// "The Stream Sequence Number of an outgoing stream MUST be
		// incremented by 1 for each ordered user message sent on that
		// outgoing stream" (§6.5): an SSN already delivered on a new TSN
		// is the peer's error.
		if SSN(d.SSN).Before(s.nextSSN[d.StreamID]) {
			return 0, false, r.reasmViolation(d, "SSN already delivered")
		}
	}
	if reasmWhole(d.Flags) {
		if u || SSN(d.SSN) == s.nextSSN[d.StreamID] {
			return 0, false, nil
		}
		if _, found := r.reasmHeldAt(d.StreamID, SSN(d.SSN)); found {
			return 0, false, r.reasmViolation(d, "two messages with one SSN")
		}
		return len(d.UserData), true, nil
	}
	prev, next, _ := s.reasmJoins(d)
	size := len(d.UserData)
	if prev >= 0 {
		size += len(s.runs[prev].buf)
	}
	if next >= 0 {
		size += len(s.runs[next].buf)
	}
	if size > r.cfg.MaxMessageSize {
		// "If the data receiver runs out of buffer space while still
		// waiting for more fragments to complete the reassembly of the
		// message, it SHOULD dispatch part of its inbound message through
		// a partial delivery API" (§6.9). Without one, a message larger
		// than the buffer can never be delivered.
		return 0, false, &RecvError{Cause: chunk.CauseOutOfResource, TSN: d.TSN, StreamID: d.StreamID}
	}
	return len(d.UserData), prev < 0 && next < 0, nil
}

func (r *Receiver) reasmViolation(d chunk.Data, reason string) error {
	return &RecvError{Cause: chunk.CauseProtocolViolation, TSN: d.TSN, StreamID: d.StreamID, Reason: reason}
}

// reasmAdd takes in the accepted chunk d, which reasmPlan has checked:
// it delivers what is complete and holds the rest.
func (r *Receiver) reasmAdd(d chunk.Data) error {
	s := &r.reasm
	u := d.Flags&chunk.FlagUnordered != 0
	if reasmWhole(d.Flags) {
		if u || SSN(d.SSN) == s.nextSSN[d.StreamID] {
			r.stats.ZeroCopy++
			r.reasmDeliver(RecvMessage{StreamID: d.StreamID, SSN: SSN(d.SSN), PPID: d.PPID, Unordered: u, Data: d.UserData})
			return nil
		}
		m := reasmMsg{
			first: TSN(d.TSN), last: TSN(d.TSN), sid: d.StreamID, ssn: SSN(d.SSN), ppid: d.PPID,
			begin: true, end: true,
		}
		m.buf = append(s.pool.get(len(d.UserData)), d.UserData...)
		r.heldBytes += uint64(len(d.UserData))
		return r.reasmComplete(m, d.TSN)
	}
	prev, next, i := s.reasmJoins(d)
	r.heldBytes += uint64(len(d.UserData))
	var m *reasmMsg
	if prev >= 0 {
		m = &s.runs[prev]
		m.buf = s.pool.appendTo(m.buf, d.UserData)
		m.last = TSN(d.TSN)
		m.end = d.Flags&chunk.FlagEnding != 0
	} else {
		s.runs = append(s.runs, reasmMsg{})
		copy(s.runs[i+1:], s.runs[i:])
		s.perStream[d.StreamID]++
		s.runs[i] = reasmMsg{
			first: TSN(d.TSN), last: TSN(d.TSN), sid: d.StreamID, ssn: SSN(d.SSN), ppid: d.PPID,
			unordered: u,
			begin:     d.Flags&chunk.FlagBeginning != 0,
			end:       d.Flags&chunk.FlagEnding != 0,
			buf:       append(s.pool.get(reasmRoom(d)), d.UserData...),
		}
		if next >= 0 {
			next++ // shifted by the insertion
		}
		prev = i
		m = &s.runs[i]
	}
	if next >= 0 {
		n := &s.runs[next]
		m.buf = s.pool.appendTo(m.buf, n.buf)
		m.last, m.end = n.last, n.end
		s.pool.put(n.buf)
		s.runs = append(s.runs[:next], s.runs[next+1:]...)
		s.perStream[d.StreamID]--
	}
	if !m.begin || !m.end {
		return nil
	}
	done := *m
	s.runs = append(s.runs[:prev], s.runs[prev+1:]...)
	s.perStream[d.StreamID]--
	return r.reasmComplete(done, d.TSN)
}

// reasmRoom returns the room a new run for fragment d gets: twice its
// bytes when it begins a message, which then takes in its next fragments
// of that size or less without moving (a sender fragments to one size),
// and its own bytes otherwise.
func reasmRoom(d chunk.Data) int {
	if d.Flags&chunk.FlagBeginning != 0 {
		return 2 * len(d.UserData)
	}
	return len(d.UserData)
}

// reasmComplete delivers complete message m, or holds it until the
// messages before it on its stream are delivered. Its bytes are held; tsn
// is the chunk that completed it.
func (r *Receiver) reasmComplete(m reasmMsg, tsn uint32) error {
	s := &r.reasm
	if m.unordered {
		// "When an endpoint receives a DATA chunk with the U flag set to
		// 1, it bypasses the ordering mechanism and immediately deliver
		// the data to the upper layer (after reassembly if the user data
		// is fragmented by the data sender)" (§6.6).
		r.reasmDeliverHeld(m)
		return nil
	}
	if m.ssn != s.nextSSN[m.sid] {
		i, found := r.reasmHeldAt(m.sid, m.ssn)
		if found || m.ssn.Before(s.nextSSN[m.sid]) {
			// Another message with this SSN is held, or was delivered
			// while this one was reassembled.
			r.heldBytes -= uint64(len(m.buf))
			s.pool.put(m.buf)
			return &RecvError{Cause: chunk.CauseProtocolViolation, TSN: tsn, StreamID: m.sid, Reason: "two messages with one SSN"}
		}
		s.held = append(s.held, reasmMsg{})
		copy(s.held[i+1:], s.held[i:])
		s.held[i] = m
		s.perStream[m.sid]++
		return nil
	}
	r.reasmDeliverHeld(m)
	return nil
}

// reasmDeliverHeld delivers a held message and frees its buffer.
func (r *Receiver) reasmDeliverHeld(m reasmMsg) {
	r.reasmDeliver(RecvMessage{StreamID: m.sid, SSN: m.ssn, PPID: m.ppid, Unordered: m.unordered, Data: m.buf})
	r.heldBytes -= uint64(len(m.buf))
	r.reasm.pool.put(m.buf)
}

// reasmDeliver hands a message to the ULP; for an ordered one it then
// advances its stream and delivers the held messages that follow it.
func (r *Receiver) reasmDeliver(msg RecvMessage) {
	r.stats.Messages++
	r.deliver(msg)
	if msg.Unordered {
		return
	}
	s := &r.reasm
	sid := msg.StreamID
	s.nextSSN[sid] = msg.SSN + 1
	for {
		i, found := r.reasmHeldAt(sid, s.nextSSN[sid])
		if !found {
			return
		}
		m := s.held[i]
		s.held = append(s.held[:i], s.held[i+1:]...)
		s.perStream[sid]--
		r.stats.Messages++
		r.deliver(RecvMessage{StreamID: sid, SSN: m.ssn, PPID: m.ppid, Data: m.buf})
		r.heldBytes -= uint64(len(m.buf))
		s.pool.put(m.buf)
		s.nextSSN[sid] = m.ssn + 1
	}
}

// Buffer classes of reasmPool: powers of two from 64 bytes to 1 MiB.
// Larger buffers are allocated to size and not pooled. A held buffer is
// at most four times its bytes (twice for the room a message's first
// fragment gets, twice for the rounding up to a class) or 64, so that
// MaxHeldChunks tiny chunks cost about as much memory as a full window: in
// all, the buffers held stay below 4 * (BufferSize + BufferSize/4) + 64 *
// MaxHeldChunks, and those pooled below BufferSize.
const (
	reasmMinShift = 6
	reasmMaxShift = 20
)

// reasmPool keeps the buffers of delivered messages for reuse, by size
// class, up to limit bytes (the receive buffer size): beyond it they are
// left to the garbage collector.
type reasmPool struct {
	free   [reasmMaxShift - reasmMinShift + 1][][]byte
	pooled uint64
	limit  uint64
}

// reasmClass returns the class of a buffer for n bytes, or -1 above the
// largest.
func reasmClass(n int) int {
	if n <= 1<<reasmMinShift {
		return 0
	}
	k := bits.Len(uint(n-1)) - reasmMinShift
	if k > reasmMaxShift-reasmMinShift {
		return -1
	}
	return k
}

// get returns an empty buffer with room for n bytes.
func (p *reasmPool) get(n int) []byte {
	k := reasmClass(n)
	if k < 0 {
		return make([]byte, 0, n)
	}
	if l := p.free[k]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[k] = l[:len(l)-1]
		p.pooled -= uint64(cap(b))
		return b
	}
	return make([]byte, 0, 1<<(k+reasmMinShift))
}

// put returns a buffer from get to the pool.
func (p *reasmPool) put(b []byte) {
	c := cap(b)
	k := reasmClass(c)
	if k < 0 || c != 1<<(k+reasmMinShift) || p.pooled+uint64(c) > p.limit {
		return
	}
	p.free[k] = append(p.free[k], b[:0])
	p.pooled += uint64(c)
}

// appendTo appends data to buf, moving buf to a larger buffer of the pool
// when it is full.
func (p *reasmPool) appendTo(buf, data []byte) []byte {
	if len(buf)+len(data) <= cap(buf) {
		return append(buf, data...)
	}
	nb := append(p.get(len(buf)+len(data)), buf...)
	p.put(buf)
	return append(nb, data...)
}
