package sctp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// FuzzRecv drives a Receiver with the DATA chunks of a model sender that
// fragments messages on several streams, ordered and unordered, and
// respects the advertised window, over a network that reorders, loses and
// duplicates them as the input says, with a ULP that holds and releases
// delivered data. A reference model (the set of TSNs received and the
// messages they complete) checks after every chunk the result, the
// Cumulative TSN Ack and the messages delivered, and after every SACK its
// Gap Ack Blocks, Duplicate TSNs and a_rwnd. At the end the sender
// retransmits whatever is not acknowledged until every message is
// delivered: the Receiver never deadlocks an honest sender.
func FuzzRecv(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 2, 10, 0, 1, 0, 4, 5, 20})
	f.Add([]byte{0x81, 5, 2, 1, 3, 0, 0, 0,
		2, 0, 1, 200, 7, 2, 1, 0, 80, 3, 0, 3, 1, 3, 2, 0, 0, 4, 5, 3, 0, 0, 0, 4, 6, 100, 5, 9})
	f.Add(bytes.Repeat([]byte{2, 3, 1, 150, 40, 0, 0, 3, 7, 4, 5, 2}, 20))
	f.Add(bytes.Repeat([]byte{7, 1, 2, 1, 0, 99, 13, 0, 1, 0, 3, 3, 4, 6, 60, 5, 30}, 30))
	f.Fuzz(func(t *testing.T, in []byte) {
		recvFuzz(t, in)
	})
}

// recvFuzzMsg is a message of the model sender.
type recvFuzzMsg struct {
	first, last int // chunk indexes
	sid         uint16
	ssn         SSN
	unordered   bool
	data        []byte
	delivered   bool
}

// recvFuzzState is the sender, the network and the reference model.
type recvFuzzState struct {
	t   *testing.T
	in  []byte
	r   *Receiver
	cfg ReceiverConfig

	// The sender.
	chunks  []chunk.Data // by index: TSN = PeerInitialTSN + index
	msgOf   []int        // the message of each chunk
	msgs    []recvFuzzMsg
	sent    int // chunks sent at least once
	nextSSN []SSN
	ackCum  int    // chunks acknowledged cumulatively by the last SACK
	aRwnd   uint32 // a_rwnd of the last SACK

	// The model.
	received []bool
	cum      int // chunks received in sequence from the first
	dups     []uint32
	modelSSN []SSN
	want     []recvGot // messages the model expects delivered, in order
	got      []recvGot
	holdULP  bool
	ulpHeld  int
	now      time.Time
}

func (s *recvFuzzState) byte() byte {
	if len(s.in) == 0 {
		return 0
	}
	b := s.in[0]
	s.in = s.in[1:]
	return b
}

func recvFuzz(t *testing.T, in []byte) {
	s := &recvFuzzState{t: t, in: in, now: recvT0}
	b0 := s.byte()
	init := uint32(s.byte())<<8 | uint32(s.byte())
	if b0&1 != 0 {
		init = -init // near 2^32, to wrap
	}
	s.cfg = ReceiverConfig{
		PeerInitialTSN: init,
		BufferSize:     1024 + 256*uint32(s.byte()%16),
		InboundStreams: 1 + uint16(b0>>1)%3,
	}
	if b := s.byte(); b&1 != 0 {
		s.cfg.MaxGapRanges = 1 + int(b>>1)%6
	}
	if b := s.byte(); b&1 != 0 {
		s.cfg.MaxHeldChunks = 1 + int(b>>1)%8
	}
	if b := s.byte(); b&1 != 0 {
		s.cfg.MaxDuplicateTSNs = 1 + int(b>>1)%4
	}
	r, err := NewReceiver(s.cfg, s.deliver)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	s.aRwnd = s.cfg.BufferSize
	s.nextSSN = make([]SSN, s.cfg.InboundStreams+1)
	s.modelSSN = make([]SSN, s.cfg.InboundStreams+1)

	for ops := 0; len(s.in) > 0 && ops < 2000; ops++ {
		switch op := s.byte(); op % 8 {
		case 0, 1:
			if s.sent == len(s.chunks) {
				s.newMessage()
			}
			s.transmit()
		case 2:
			s.newMessage()
		case 3:
			if s.sent > 0 {
				s.send(int(s.byte()) % s.sent)
			}
		case 4:
			s.endPacket()
		case 5:
			s.sack(16 + 4*int(s.byte()%12))
		case 6:
			s.release(16 * int(s.byte()))
		case 7:
			s.holdULP = !s.holdULP
			s.now = s.now.Add(time.Duration(s.byte()) * time.Millisecond)
			s.checkWhen()
		}
	}
	s.endPacket()
	// The end: the ULP lets go, and the sender sends and retransmits in
	// TSN order, reading every SACK.
	s.holdULP = false
	s.release(s.ulpHeld)
	for round := 0; ; round++ {
		if round > 4*len(s.chunks)+8 {
			t.Fatalf("not all delivered after %d rounds: cum %d of %d chunks, %d held, a_rwnd %d",
				round, s.cum, len(s.chunks), s.r.Held(), s.r.ARwnd())
		}
		s.sack(1500)
		for s.sent < len(s.chunks) && s.transmit() {
			s.endPacket()
		}
		for i := s.cum; i < s.sent; i++ {
			if !s.received[i] {
				s.send(i)
				s.endPacket()
				s.sack(1500)
			}
		}
		if s.cum == len(s.chunks) {
			break
		}
	}
	for _, m := range s.msgs {
		if !m.delivered && int(m.sid) < int(s.cfg.InboundStreams) {
			t.Fatalf("message on stream %d SSN %d not delivered", m.sid, m.ssn)
		}
	}
	if s.r.Held() != 0 || s.r.reasm.entries() != 0 {
		t.Fatalf("%d bytes and %d entries held after everything was delivered", s.r.Held(), s.r.reasm.entries())
	}
}

// newMessage queues a message of the sender.
func (s *recvFuzzState) newMessage() {
	b := s.byte()
	sid := uint16(b) % s.cfg.InboundStreams
	if b>>2 == 63 {
		sid = s.cfg.InboundStreams // an invalid stream, now and then
	}
	unordered := b&2 != 0
	size := 1 + int(s.byte())%min(200, s.r.cfg.MaxMessageSize)
	frag := 1 + int(s.byte())%size
	m := recvFuzzMsg{first: len(s.chunks), sid: sid, unordered: unordered}
	if !unordered {
		m.ssn = s.nextSSN[sid]
		s.nextSSN[sid]++
	}
	if sid == s.cfg.InboundStreams {
		// The sender believes the stream exists: one whole message.
		frag = size
	}
	for off := 0; off < size; off += frag {
		n := min(frag, size-off)
		var f chunk.DataFlags
		if off == 0 {
			f |= chunk.FlagBeginning
		}
		if off+n == size {
			f |= chunk.FlagEnding
		}
		if unordered {
			f |= chunk.FlagUnordered
		}
		tsn := s.cfg.PeerInitialTSN + uint32(len(s.chunks))
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(tsn) + byte(i)*7
		}
		m.data = append(m.data, data...)
		s.chunks = append(s.chunks, chunk.Data{Flags: f, TSN: tsn, StreamID: sid, SSN: uint16(m.ssn), PPID: uint32(len(s.msgs)), UserData: data})
		s.msgOf = append(s.msgOf, len(s.msgs))
		s.received = append(s.received, false)
	}
	m.last = len(s.chunks) - 1
	s.msgs = append(s.msgs, m)
}

// transmit sends the next new chunk if the peer's window allows: "the
// data sender MUST NOT transmit new data ... if its peer's rwnd indicates
// that the peer has no buffer space ... except for zero window probes"
// (§6.1 A).
func (s *recvFuzzState) transmit() bool {
	if s.sent == len(s.chunks) {
		return false
	}
	outstanding := 0
	for i := s.ackCum; i < s.sent; i++ {
		outstanding += len(s.chunks[i].UserData)
	}
	n := len(s.chunks[s.sent].UserData)
	if outstanding > 0 && uint64(outstanding+n) > uint64(s.aRwnd) {
		return false
	}
	s.sent++
	s.send(s.sent - 1)
	return true
}

// send gives chunk i to the Receiver and checks the outcome against the
// model.
func (s *recvFuzzState) send(i int) {
	t := s.t
	d := s.chunks[i]
	pkt := d.Append(nil)
	p, _, err := chunk.ParseData(pkt)
	if err != nil {
		t.Fatal(err)
	}
	wasHighest := s.highest()
	res, err := s.r.Data(p)
	clear(pkt)
	if err != nil {
		t.Fatalf("Data(TSN %d): %v", d.TSN, err)
	}
	switch {
	case s.received[i]:
		if res != RecvDuplicate {
			t.Fatalf("TSN %d again: %v, want duplicate", d.TSN, res)
		}
		if len(s.dups) < s.r.cfg.MaxDuplicateTSNs {
			s.dups = append(s.dups, d.TSN)
		}
	case res == RecvDuplicate:
		t.Fatalf("TSN %d new: duplicate", d.TSN)
	case res == RecvDropped:
		m := s.msgs[s.msgOf[i]]
		whole := m.first == m.last
		if i == s.cum && i < wasHighest && whole && int(m.sid) < int(s.cfg.InboundStreams) &&
			(m.unordered || m.ssn == s.modelSSN[m.sid]) {
			t.Fatalf("TSN %d fills the first gap and is delivered at once: dropped", d.TSN)
		}
	case res == RecvInvalidStream:
		if int(d.StreamID) < int(s.cfg.InboundStreams) {
			t.Fatalf("TSN %d on stream %d: invalid stream", d.TSN, d.StreamID)
		}
		s.accept(i)
	case res == RecvNew:
		if int(d.StreamID) >= int(s.cfg.InboundStreams) {
			t.Fatalf("TSN %d on stream %d: accepted", d.TSN, d.StreamID)
		}
		s.accept(i)
	}
	if got, want := s.r.CumulativeTSN(), s.cfg.PeerInitialTSN+uint32(s.cum)-1; got != want {
		t.Fatalf("after TSN %d: Cumulative TSN Ack %d, want %d", d.TSN, got, want)
	}
	if !equalGot(s.got, s.want) {
		t.Fatalf("after TSN %d: delivered\n%v\nwant\n%v", d.TSN, s.got, s.want)
	}
	s.got, s.want = s.got[:0], s.want[:0]
}

func equalGot(a, b []recvGot) bool {
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

// highest returns the index after the highest chunk received.
func (s *recvFuzzState) highest() int {
	for i := len(s.received) - 1; i >= 0; i-- {
		if s.received[i] {
			return i + 1
		}
	}
	return 0
}

// accept records chunk i in the model and the messages it makes
// deliverable.
func (s *recvFuzzState) accept(i int) {
	s.received[i] = true
	for s.cum < len(s.received) && s.received[s.cum] {
		s.cum++
	}
	m := &s.msgs[s.msgOf[i]]
	if int(m.sid) >= int(s.cfg.InboundStreams) {
		return
	}
	for j := m.first; j <= m.last; j++ {
		if !s.received[j] {
			return
		}
	}
	if m.unordered {
		s.expect(m)
		return
	}
	// Deliver in SSN order on the stream.
	for {
		var next *recvFuzzMsg
		for k := range s.msgs {
			c := &s.msgs[k]
			if c.sid == m.sid && !c.unordered && !c.delivered && c.ssn == s.modelSSN[m.sid] {
				next = c
				break
			}
		}
		if next == nil {
			return
		}
		for j := next.first; j <= next.last; j++ {
			if !s.received[j] {
				return
			}
		}
		s.expect(next)
		s.modelSSN[m.sid]++
	}
}

func (s *recvFuzzState) expect(m *recvFuzzMsg) {
	m.delivered = true
	s.want = append(s.want, recvGot{m.sid, m.ssn, uint32(m.first), m.unordered, string(m.data)})
}

func (s *recvFuzzState) deliver(m RecvMessage) {
	ssn := m.SSN
	if m.Unordered {
		ssn = 0
	}
	first := -1
	if int(m.PPID) < len(s.msgs) {
		first = s.msgs[m.PPID].first
	}
	s.got = append(s.got, recvGot{m.StreamID, ssn, uint32(first), m.Unordered, string(m.Data)})
	if s.holdULP {
		s.r.Hold(len(m.Data))
		s.ulpHeld += len(m.Data)
	}
}

func (s *recvFuzzState) release(n int) {
	n = min(n, s.ulpHeld)
	s.r.Release(n)
	s.ulpHeld -= n
	if s.r.free() != uint64(s.cfg.BufferSize)-min(uint64(s.cfg.BufferSize), uint64(s.r.Held()+s.ulpHeld)) {
		s.t.Fatalf("free %d with %d held and %d held by the ULP", s.r.free(), s.r.Held(), s.ulpHeld)
	}
}

func (s *recvFuzzState) endPacket() {
	s.r.EndPacket(s.now)
	s.checkWhen()
}

func (s *recvFuzzState) checkWhen() {
	now, dl := s.r.SACKWhen(s.now)
	if !now && s.r.unacked && !dl.After(s.now) {
		s.t.Fatalf("SACK owed, deadline %v not after now %v", dl, s.now)
	}
	if !now && dl.After(s.now.Add(s.r.cfg.SACKDelay)) {
		s.t.Fatalf("deadline %v beyond SACK.Delay", dl)
	}
}

// sack builds a SACK in room bytes, checks it against the model and hands
// it to the sender.
func (s *recvFuzzState) sack(room int) {
	t := s.t
	b := s.r.AppendSACK(nil, room)
	if len(b) > room {
		t.Fatalf("SACK of %d bytes in %d", len(b), room)
	}
	sk, _, err := chunk.ParseSACK(b)
	if err != nil {
		t.Fatal(err)
	}
	var want chunk.GapAckBlocks
	n := (room - 16) / 4
	for i := s.cum; i < len(s.received) && want.Len() < n; {
		if !s.received[i] {
			i++
			continue
		}
		j := i
		for j+1 < len(s.received) && s.received[j+1] {
			j++
		}
		want = want.AppendBlock(uint16(i-s.cum+1), uint16(j-s.cum+1))
		i = j + 1
	}
	if !bytes.Equal(sk.GapAckBlocks, want) {
		t.Fatalf("Gap Ack Blocks %v, want %v (cum %d, received %v)", blocksString(sk.GapAckBlocks), blocksString(want), s.cum, s.received)
	}
	var wantDups chunk.TSNList
	for _, d := range s.dups[:min(len(s.dups), n-want.Len())] {
		wantDups = wantDups.AppendTSN(d)
	}
	if !bytes.Equal(sk.DuplicateTSNs, wantDups) {
		t.Fatalf("Duplicate TSNs % x, want % x", []byte(sk.DuplicateTSNs), []byte(wantDups))
	}
	s.dups = s.dups[:0]
	free := int64(s.cfg.BufferSize) - int64(s.r.Held()+s.ulpHeld)
	if wantRwnd := max(free, 0); int64(sk.ARwnd) != wantRwnd && !(sk.ARwnd == 0 && wantRwnd < int64(s.r.swsMin)) {
		t.Fatalf("a_rwnd %d, want %d", sk.ARwnd, wantRwnd)
	}
	if s.r.Held() > int(s.r.hardCap) {
		t.Fatalf("%d bytes held, beyond %d", s.r.Held(), s.r.hardCap)
	}
	if uint32(sk.CumulativeTSNAck-s.cfg.PeerInitialTSN+1) != uint32(s.cum) {
		t.Fatalf("SACK Cumulative TSN Ack %d, model %d", sk.CumulativeTSNAck, s.cum)
	}
	s.ackCum, s.aRwnd = s.cum, sk.ARwnd
	if now, dl := s.r.SACKWhen(s.now); now || !dl.IsZero() {
		// A window update may follow; nothing else is owed.
		if !now || s.r.unacked {
			t.Fatalf("after a SACK: SACKWhen = %v, %v", now, dl)
		}
	}
}

func blocksString(g chunk.GapAckBlocks) string {
	var b bytes.Buffer
	for i := range g.Len() {
		x := g.At(i)
		fmt.Fprintf(&b, "%d-%d ", x.Start, x.End)
	}
	return b.String()
}
