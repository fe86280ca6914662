package sctp

import (
	"fmt"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// recvSteady is a Receiver fed in-order DATA chunks as a packet buffer
// the association reuses, with a ULP that consumes each message at once.
type recvSteady struct {
	r     *Receiver
	pkt   []byte
	sack  []byte
	tsn   uint32
	ssn   uint16
	bytes int
}

func newRecvSteady(tb testing.TB, size int) *recvSteady {
	s := &recvSteady{pkt: make([]byte, 0, 16+size+4), sack: make([]byte, 0, 1500)}
	r, err := NewReceiver(ReceiverConfig{PeerInitialTSN: 1, InboundStreams: 4}, func(m RecvMessage) { s.bytes += len(m.Data) })
	if err != nil {
		tb.Fatal(err)
	}
	s.r, s.tsn = r, 1
	s.pkt = chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, TSN: 1, PPID: 16, UserData: make([]byte, size)}.Append(s.pkt)
	return s
}

// packet receives one packet holding one unfragmented DATA chunk, the next
// TSN and SSN on stream 1, and sends the SACK when it is due.
func (s *recvSteady) packet(now time.Time) {
	pkt := s.pkt
	// The TSN and SSN fields, as the network would have written them.
	pkt[4], pkt[5], pkt[6], pkt[7] = byte(s.tsn>>24), byte(s.tsn>>16), byte(s.tsn>>8), byte(s.tsn)
	pkt[8], pkt[9] = 0, 1
	pkt[10], pkt[11] = byte(s.ssn>>8), byte(s.ssn)
	d, _, err := chunk.ParseData(pkt)
	if err != nil {
		panic(err)
	}
	if res, err := s.r.Data(d); res != RecvNew || err != nil {
		panic(fmt.Sprint(res, err))
	}
	s.r.EndPacket(now)
	if now, _ := s.r.SACKWhen(now); now {
		s.sack = s.r.AppendSACK(s.sack[:0], 1500)
	}
	s.tsn++
	s.ssn++
}

// TestRecvAllocs: receiving an unfragmented DATA chunk and building a SACK
// in steady state allocate nothing, as the data path must.
func TestRecvAllocs(t *testing.T) {
	s := newRecvSteady(t, 1200)
	now := recvT0
	s.packet(now)
	if a := testing.AllocsPerRun(1000, func() { s.packet(now) }); a != 0 {
		t.Errorf("in-order DATA and SACK: %v allocations, want 0", a)
	}
	if z := s.r.Stats().ZeroCopy; z != s.r.Stats().Messages {
		t.Errorf("%d of %d messages delivered without a copy", z, s.r.Stats().Messages)
	}

	// With gaps: a SACK reporting Gap Ack Blocks and Duplicate TSNs, once
	// the lists have grown.
	h := newRecvHarness(t, ReceiverConfig{PeerInitialTSN: 1, BufferSize: 1 << 16, InboundStreams: 1})
	for i := range uint32(20) {
		h.packet(recvD(2+2*i, 0, 0, chunk.FlagUnordered, "x"))
	}
	d := recvD(2, 0, 0, chunk.FlagUnordered, "x")
	buf := make([]byte, 0, 1500)
	if a := testing.AllocsPerRun(1000, func() {
		h.r.Data(d)
		h.r.EndPacket(recvT0)
		buf = h.r.AppendSACK(buf[:0], 1500)
	}); a != 0 {
		t.Errorf("SACK with gaps and a duplicate: %v allocations, want 0", a)
	}

	// Fragmented messages reuse the pool's buffers.
	fr := newRecvSteady(t, 0)
	var frags [3][]byte
	for i, f := range []chunk.DataFlags{chunk.FlagBeginning, 0, chunk.FlagEnding} {
		frags[i] = chunk.Data{Flags: f, StreamID: 1, UserData: make([]byte, 700)}.Append(nil)
	}
	tsn := uint32(1)
	var ssn uint16
	message := func() {
		for _, p := range frags {
			p[4], p[5], p[6], p[7] = byte(tsn>>24), byte(tsn>>16), byte(tsn>>8), byte(tsn)
			p[10], p[11] = byte(ssn>>8), byte(ssn)
			d, _, _ := chunk.ParseData(p)
			if res, err := fr.r.Data(d); res != RecvNew || err != nil {
				panic(fmt.Sprint(res, err))
			}
			fr.r.EndPacket(recvT0)
			tsn++
		}
		ssn++
		buf = fr.r.AppendSACK(buf[:0], 1500)
	}
	message()
	if a := testing.AllocsPerRun(1000, message); a != 0 {
		t.Errorf("fragmented message: %v allocations, want 0", a)
	}
	if fr.bytes != 2100*1002 { // AllocsPerRun calls once more to warm up
		t.Errorf("delivered %d bytes, want %d", fr.bytes, 2100*1002)
	}
}

// BenchmarkRecvData receives in-order unfragmented DATA chunks, one per
// packet, with a SACK every second packet.
func BenchmarkRecvData(b *testing.B) {
	for _, size := range []int{64, 1200, 8000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s := newRecvSteady(b, size)
			now := recvT0
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				s.packet(now)
			}
		})
	}
}

// BenchmarkRecvFragmented receives messages of 3 fragments in order.
func BenchmarkRecvFragmented(b *testing.B) {
	for _, size := range []int{700, 2600} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			r, err := NewReceiver(ReceiverConfig{PeerInitialTSN: 1, InboundStreams: 2}, func(RecvMessage) {})
			if err != nil {
				b.Fatal(err)
			}
			var frags [3][]byte
			for i, f := range []chunk.DataFlags{chunk.FlagBeginning, 0, chunk.FlagEnding} {
				frags[i] = chunk.Data{Flags: f, StreamID: 1, UserData: make([]byte, size)}.Append(nil)
			}
			buf := make([]byte, 0, 1500)
			tsn := uint32(1)
			var ssn uint16
			b.ReportAllocs()
			b.SetBytes(int64(3 * size))
			for b.Loop() {
				for _, p := range frags {
					p[4], p[5], p[6], p[7] = byte(tsn>>24), byte(tsn>>16), byte(tsn>>8), byte(tsn)
					p[10], p[11] = byte(ssn>>8), byte(ssn)
					d, _, _ := chunk.ParseData(p)
					r.Data(d)
					r.EndPacket(recvT0)
					tsn++
				}
				ssn++
				buf = r.AppendSACK(buf[:0], 1500)
			}
		})
	}
}

// BenchmarkRecvSACK builds a SACK with n Gap Ack Blocks.
func BenchmarkRecvSACK(b *testing.B) {
	for _, n := range []int{0, 4, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, err := NewReceiver(ReceiverConfig{PeerInitialTSN: 1, InboundStreams: 1}, func(RecvMessage) {})
			if err != nil {
				b.Fatal(err)
			}
			for i := range uint32(n) {
				r.Data(chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding | chunk.FlagUnordered, TSN: 2 + 2*i, UserData: []byte{1}})
			}
			buf := make([]byte, 0, 1500)
			buf = r.AppendSACK(buf[:0], 1500)
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = r.AppendSACK(buf[:0], 1500)
			}
		})
	}
}
