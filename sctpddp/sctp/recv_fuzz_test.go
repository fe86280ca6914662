package sctp

import (
	"bytes"
	"errors"
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
	sid       uint16
	ssn       SSN
	unordered bool
}

// recvFuzzKey names an ordered message.
type recvFuzzKey struct {
	sid uint16
	ssn SSN
}

// recvFuzzState is the sender, the network and the reference model.
type recvFuzzState struct {
	t   *testing.T
	in  []byte
	r   *Receiver
	cfg ReceiverConfig

	// The sender.
	chunks  []chunk.Data // by index: TSN = PeerInitialTSN + index
	sent    int          // chunks sent at least once
	nextSSN []SSN
	ackCum  int    // chunks acknowledged cumulatively by the last SACK
	aRwnd   uint32 // a_rwnd of the last SACK
	// hostile is set once a chunk not from the sender was injected: the
	// Receiver may then return an error, and the end is not checked for
	// liveness.
	hostile bool
	stopped bool

	// The model: the TSNs received (by offset from PeerInitialTSN), the
	// accepted chunks of valid streams not yet part of a delivered
	// message, the complete ordered messages waiting for their SSN, and
	// the next SSN of each stream.
	received map[uint32]bool
	cum      uint32 // TSNs received in sequence from PeerInitialTSN
	maxOff   uint32 // one beyond the highest offset received
	acc      map[TSN]chunk.Data
	pending  map[recvFuzzKey]recvGot
	modelSSN []SSN
	dups     []uint32
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
	s := &recvFuzzState{
		t: t, in: in, now: recvT0,
		received: map[uint32]bool{},
		acc:      map[TSN]chunk.Data{},
		pending:  map[recvFuzzKey]recvGot{},
	}
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
		if b&2 != 0 {
			s.cfg.MaxHeldPerStream = 1 + int(b>>2)%4
		}
	}
	r, err := NewReceiver(s.cfg, s.deliver)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	s.aRwnd = s.cfg.BufferSize
	s.nextSSN = make([]SSN, s.cfg.InboundStreams+1)
	s.modelSSN = make([]SSN, s.cfg.InboundStreams+1)

	for ops := 0; len(s.in) > 0 && ops < 1000 && !s.stopped; ops++ {
		switch op := s.byte(); op % 11 {
		case 0, 1:
			if s.sent == len(s.chunks) {
				s.newMessage()
			}
			s.transmit()
		case 2:
			s.newMessage()
		case 3:
			if s.sent > 0 {
				s.send(s.chunks[int(s.byte())%s.sent])
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
		case 8, 9:
			// The network loses the next new chunk (or delays it until a
			// retransmission).
			if s.sent == len(s.chunks) {
				s.newMessage()
			}
			if s.sent < len(s.chunks) {
				s.sent++
			}
		case 10:
			s.inject()
		}
	}
	if s.stopped {
		return
	}
	s.endPacket()
	if s.hostile {
		return
	}
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
		for i := int(s.cum); i < s.sent; i++ {
			if !s.received[uint32(i)] {
				s.send(s.chunks[i])
				s.endPacket()
				s.sack(1500)
			}
		}
		if int(s.cum) == len(s.chunks) {
			break
		}
	}
	if len(s.acc) != 0 || len(s.pending) != 0 {
		t.Fatalf("%d chunks and %d messages never delivered", len(s.acc), len(s.pending))
	}
	if s.r.Held() != 0 || s.r.reasm.entries() != 0 {
		t.Fatalf("%d bytes and %d entries held after everything was delivered", s.r.Held(), s.r.reasm.entries())
	}
}

// recvFuzzMaxChunks bounds the chunks of one run, to keep executions
// fast.
const recvFuzzMaxChunks = 400

// newMessage queues a message of the sender.
func (s *recvFuzzState) newMessage() {
	if len(s.chunks) >= recvFuzzMaxChunks {
		return
	}
	b := s.byte()
	sid := uint16(b) % s.cfg.InboundStreams
	if b>>2 == 63 {
		sid = s.cfg.InboundStreams // an invalid stream, now and then
	}
	unordered := b&2 != 0
	size := 1 + int(s.byte())%min(200, s.r.cfg.MaxMessageSize)
	frag := 1 + int(s.byte())%size
	var ssn SSN
	if !unordered {
		ssn = s.nextSSN[sid]
		s.nextSSN[sid]++
	}
	if sid == s.cfg.InboundStreams {
		// The sender believes the stream exists: one whole message.
		frag = size
	}
	ppid := uint32(len(s.chunks))
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
		s.chunks = append(s.chunks, chunk.Data{Flags: f, TSN: tsn, StreamID: sid, SSN: uint16(ssn), PPID: ppid, UserData: data})
	}
}

// inject sends a chunk of the input's making: any TSN near the window,
// stream, flags, SSN and length, empty included.
func (s *recvFuzzState) inject() {
	s.hostile = true
	off := uint32(s.byte())
	if off&0x80 == 0 {
		off = off%40 - 8 // close to the Cumulative TSN Ack, mostly
	} else {
		off = off<<3 - 0x100
	}
	b := s.byte()
	sid := uint16(b>>4) % (s.cfg.InboundStreams + 1)
	d := chunk.Data{
		TSN:      s.cfg.PeerInitialTSN + s.cum + off,
		Flags:    chunk.DataFlags(b) & (chunk.FlagBeginning | chunk.FlagEnding | chunk.FlagUnordered | chunk.FlagImmediate),
		StreamID: sid,
		SSN:      uint16(s.modelSSN[sid]) + uint16(s.byte()%4) - 1,
		PPID:     1 << 31,
		UserData: make([]byte, s.byte()%48),
	}
	for i := range d.UserData {
		d.UserData[i] = byte(i)
	}
	s.send(d)
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
	s.send(s.chunks[s.sent-1])
	return true
}

// compatible reports whether fragment b can follow fragment a in one
// message (§6.9).
func recvFuzzCompatible(a, b chunk.Data) bool {
	return a.Flags&chunk.FlagEnding == 0 && b.Flags&chunk.FlagBeginning == 0 &&
		a.StreamID == b.StreamID && a.Flags&chunk.FlagUnordered == b.Flags&chunk.FlagUnordered &&
		(a.Flags&chunk.FlagUnordered != 0 || a.SSN == b.SSN)
}

// run returns the first and last TSNs of the run of fragments in acc
// around d (which need not be in acc), and their bytes.
func (s *recvFuzzState) run(d chunk.Data) (first, last TSN, size int) {
	first, last, size = TSN(d.TSN), TSN(d.TSN), len(d.UserData)
	cur := d
	for {
		p, ok := s.acc[first-1]
		if !ok || !recvFuzzCompatible(p, cur) {
			break
		}
		first, cur, size = first-1, p, size+len(p.UserData)
	}
	cur = d
	for {
		n, ok := s.acc[last+1]
		if !ok || !recvFuzzCompatible(cur, n) {
			break
		}
		last, cur, size = last+1, n, size+len(n.UserData)
	}
	return first, last, size
}

// send gives chunk d to the Receiver and checks the outcome against the
// model.
func (s *recvFuzzState) send(d chunk.Data) {
	t := s.t
	if s.stopped {
		return
	}
	pkt := d.Append(nil)
	p, _, err := chunk.ParseData(pkt)
	if err != nil && len(d.UserData) != 0 {
		t.Fatal(err)
	}
	off := d.TSN - s.cfg.PeerInitialTSN
	old := off >= 1<<31 || off < s.cum // at or before the Cumulative TSN Ack, modulo 2^32
	wasHighest := s.maxOff
	ordered := d.Flags&chunk.FlagUnordered == 0
	valid := int(d.StreamID) < int(s.cfg.InboundStreams)
	whole := d.Flags&(chunk.FlagBeginning|chunk.FlagEnding) == chunk.FlagBeginning|chunk.FlagEnding
	res, err := s.r.Data(p)
	clear(pkt)
	if err != nil {
		var re *RecvError
		if !s.hostile || !errors.As(err, &re) {
			t.Fatalf("Data(TSN %d): %v", d.TSN, err)
		}
		_, pend := s.pending[recvFuzzKey{d.StreamID, SSN(d.SSN)}]
		_, _, size := s.run(d)
		switch {
		case re.Cause == chunk.CauseNoUserData && len(d.UserData) == 0:
		case re.Cause == chunk.CauseProtocolViolation && valid && ordered &&
			(SSN(d.SSN).Before(s.modelSSN[d.StreamID]) || pend):
		case re.Cause == chunk.CauseOutOfResource && valid && !whole && size > s.r.cfg.MaxMessageSize:
		default:
			t.Fatalf("Data(%+v): %v, not justified", d, err)
		}
		s.stopped = true
		return
	}
	if len(d.UserData) == 0 {
		t.Fatalf("Data(TSN %d) with no user data: %v, no error", d.TSN, res)
	}
	switch {
	case old || s.received[off]:
		if res != RecvDuplicate {
			t.Fatalf("TSN %d again: %v, want duplicate", d.TSN, res)
		}
		if len(s.dups) < s.r.cfg.MaxDuplicateTSNs {
			s.dups = append(s.dups, d.TSN)
		}
	case res == RecvDuplicate:
		t.Fatalf("TSN %d new: duplicate", d.TSN)
	case res == RecvDropped:
		if off == s.cum && off+1 < wasHighest && whole && valid && (!ordered || SSN(d.SSN) == s.modelSSN[d.StreamID]) {
			t.Fatalf("TSN %d fills the first gap and is delivered at once: dropped", d.TSN)
		}
	case res == RecvInvalidStream:
		if valid {
			t.Fatalf("TSN %d on stream %d: invalid stream", d.TSN, d.StreamID)
		}
		s.mark(off)
	case res == RecvNew:
		if !valid {
			t.Fatalf("TSN %d on stream %d: accepted", d.TSN, d.StreamID)
		}
		if ordered && SSN(d.SSN).Before(s.modelSSN[d.StreamID]) {
			t.Fatalf("TSN %d with SSN %d, before %d: accepted", d.TSN, d.SSN, s.modelSSN[d.StreamID])
		}
		s.mark(off)
		s.accept(d)
	}
	if got, want := s.r.CumulativeTSN(), s.cfg.PeerInitialTSN+s.cum-1; got != want {
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

// mark records the TSN at offset off as received.
func (s *recvFuzzState) mark(off uint32) {
	s.received[off] = true
	for s.received[s.cum] {
		s.cum++
	}
	s.maxOff = max(s.maxOff, off+1)
}

// accept adds chunk d to the model and expects the messages it makes
// deliverable: a run from a B bit to an E bit, unordered at once, ordered
// in SSN order on its stream ("Within a stream, an endpoint MUST deliver
// DATA chunks received with the U flag set to 0 to the upper layer
// according to the order of their Stream Sequence Number", §6.6).
func (s *recvFuzzState) accept(d chunk.Data) {
	d.UserData = bytes.Clone(d.UserData)
	s.acc[TSN(d.TSN)] = d
	first, last, _ := s.run(d)
	if s.acc[first].Flags&chunk.FlagBeginning == 0 || s.acc[last].Flags&chunk.FlagEnding == 0 {
		return
	}
	head := s.acc[first]
	var data []byte
	for t := first; ; t++ {
		data = append(data, s.acc[t].UserData...)
		delete(s.acc, t)
		if t == last {
			break
		}
	}
	m := recvGot{head.StreamID, SSN(head.SSN), head.PPID, head.Flags&chunk.FlagUnordered != 0, string(data)}
	if m.unordered {
		m.ssn = 0
		s.want = append(s.want, m)
		return
	}
	if m.ssn != s.modelSSN[m.sid] {
		s.pending[recvFuzzKey{m.sid, m.ssn}] = m
		return
	}
	for {
		s.want = append(s.want, m)
		s.modelSSN[m.sid]++
		k := recvFuzzKey{m.sid, s.modelSSN[m.sid]}
		var ok bool
		if m, ok = s.pending[k]; !ok {
			return
		}
		delete(s.pending, k)
	}
}

func (s *recvFuzzState) deliver(m RecvMessage) {
	ssn := m.SSN
	if m.Unordered {
		ssn = 0
	}
	s.got = append(s.got, recvGot{m.StreamID, ssn, m.PPID, m.Unordered, string(m.Data)})
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
	for i := s.cum; i < s.maxOff && want.Len() < n; {
		if !s.received[i] {
			i++
			continue
		}
		j := i
		for s.received[j+1] {
			j++
		}
		want = want.AppendBlock(uint16(i-s.cum+1), uint16(j-s.cum+1))
		i = j + 1
	}
	if !bytes.Equal(sk.GapAckBlocks, want) {
		t.Fatalf("Gap Ack Blocks %v, want %v (cum %d)", blocksString(sk.GapAckBlocks), blocksString(want), s.cum)
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
	entries := 0
	for _, c := range s.r.reasm.perStream {
		entries += int(c)
	}
	if entries != s.r.reasm.entries() {
		t.Fatalf("per stream counts %v, %d entries", s.r.reasm.perStream, s.r.reasm.entries())
	}
	if s.r.Held() > int(s.r.hardCap) {
		t.Fatalf("%d bytes held, beyond %d", s.r.Held(), s.r.hardCap)
	}
	if sk.CumulativeTSNAck-s.cfg.PeerInitialTSN+1 != s.cum {
		t.Fatalf("SACK Cumulative TSN Ack %d, model %d", sk.CumulativeTSNAck, s.cum)
	}
	s.ackCum, s.aRwnd = min(int(s.cum), len(s.chunks)), sk.ARwnd
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
