//go:build !js

package sctpddp

import (
	"bytes"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/iwarpgo/iwarp/capture/replay"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// TestRecordLoss records, at the receiver, two DDP Stream Sessions on
// one SCTP association over plain UDP (RFC 6951), on SCTP streams 1 and
// 3, through a path that loses a packet: alice Sends 1,494 octets on
// each, three DDP Segments each at an MTU of wire.MinMTU, the session on
// stream 1 first, and a relay drops the packet that carries the first
// segment of stream 1's Send, and its retransmissions until stream 3's
// three segments have gone through. Its other two segments are
// placed as they come; the Send on stream 3, sent after it, is placed
// and delivered while stream 1 waits for the retransmission: each DDP
// Stream Session has its own SCTP stream and its own delivery order
// (RFC 5043 §8, §10; RFC 5041 §5.4), so a loss on one holds up no other.
// The test checks both receives, that the capture has the retransmitted
// segment after stream 3's Send, and that the replay delivers stream
// 3's Send first. With -update it writes the bundled capture the demo
// page replays.
func TestRecordLoss(t *testing.T) {
	rec, path := recordTo(t, "loss-streams-sctp.pcap")
	var relay *dropRelay
	server, client := connectThrough(t, rec, func(l net.Addr) net.Addr {
		relay = newDropRelay(t, l)
		return relay.conn.LocalAddr()
	})

	// bob dials and starts both sessions; alice, on the listener's side,
	// accepts them and sends.
	const sendLen = 3 * (wire.MinMULPDU - 18) // DDP's untagged header
	sa := server.Sessions(0)
	var bobs, alices [2]*peer
	var rbufs, srcs [2]*rdmap.MemoryRegion
	for i, id := range []uint16{1, 3} {
		bobs[i], alices[i] = newPeer(t, nil), newPeer(t, nil)
		sessionPair(t, server, client, sa, id, bobs[i], alices[i])
		rbufs[i] = bobs[i].Reg(t, sendLen, rdmap.LocalWrite)
		if err := bobs[i].QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbufs[i], Length: sendLen}}}); err != nil {
			t.Fatal(err)
		}
		srcs[i] = alices[i].Reg(t, sendLen, 0)
		what := "Send on stream 1"
		if id == 3 {
			what = "Send on stream 3"
		}
		segments(srcs[i].Bytes(), what, wire.MinMULPDU-18)
	}
	relay.arm(1, 3)
	for i := range alices {
		if err := alices[i].QP.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: srcs[i], Length: sendLen}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range bobs {
		if c := waitC(t, bobs[i].RCQ); c.Status != rdmap.StatusSuccess || c.ByteLen != sendLen {
			t.Fatalf("bob's receive on stream %d: %+v", 1+2*i, c)
		}
		if !bytes.Equal(rbufs[i].Bytes(), srcs[i].Bytes()) {
			t.Fatalf("bob's buffer on stream %d differs from what alice sent", 1+2*i)
		}
	}
	if relay.dropped() == 0 {
		t.Fatal("the relay dropped nothing")
	}
	client.Close()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkLossCapture(t, b)
}

// checkLossCapture checks the capture of TestRecordLoss: stream 1's
// first segment (by DDP-SSN) arrives after every segment of stream 3's
// Send, stream 1's later segments before it; the replay places each
// segment as it arrives and delivers stream 3's Send before stream 1's,
// which it delivers with the retransmitted segment.
func checkLossCapture(t *testing.T, b []byte) {
	t.Helper()
	m, warn, err := replay.Decode(b)
	if err != nil || warn != "" {
		t.Fatalf("replay: %v %q", err, warn)
	}
	type seg struct{ ssn, i int }
	byStream := map[uint16][]seg{}
	delivered := map[uint16]int{}
	for i := range m.Events {
		e := &m.Events[i]
		r := e.Rec
		if e.Kind != replay.EventSegment || r.Op != "Send" || r.SCTPStream == nil || r.DDPSSN == nil {
			continue
		}
		if e.Buffer == 0 {
			t.Errorf("record %d placed nowhere: %s", r.N, e.Why)
		}
		id := *r.SCTPStream
		byStream[id] = append(byStream[id], seg{int(*r.DDPSSN), i})
		if len(e.Delivered) > 0 {
			delivered[id] = i
		}
	}
	s1, s3 := byStream[1], byStream[3]
	if len(s1) != 3 || len(s3) != 3 {
		t.Fatalf("segments of the Sends (DDP-SSN, event): stream 1 %v, stream 3 %v: want three each", s1, s3)
	}
	first := s1[0]
	for _, s := range s1[1:] {
		if s.ssn < first.ssn {
			first = s
		}
	}
	if first != s1[2] {
		t.Errorf("stream 1's segments arrive as %v: want its first (by DDP-SSN) last", s1)
	}
	for _, s := range s3 {
		if s.i > first.i {
			t.Errorf("stream 3's segment (DDP-SSN %d) at event %d, after stream 1's retransmitted first segment at %d", s.ssn, s.i, first.i)
		}
	}
	d1, ok1 := delivered[1]
	d3, ok3 := delivered[3]
	if !ok1 || !ok3 || d3 > d1 || d1 != first.i {
		t.Errorf("deliveries: stream 3's Send at event %d (%v), stream 1's at %d (%v): want stream 3's first, stream 1's with its retransmitted segment at %d", d3, ok3, d1, ok1, first.i)
	}
}

// dropRelay forwards UDP datagrams between one client and a server
// (SCTP packets over UDP, RFC 6951). Once armed with an SCTP stream and
// a count, it drops the next packet from the server whose first DATA
// chunk carries a DDP Segment Chunk on that stream, and every
// retransmission of that TSN until it has passed that many DDP Segment
// Chunks of other streams: the same loss every run, however the two
// streams' sends interleave.
type dropRelay struct {
	conn   *net.UDPConn
	server *net.UDPAddr
	wg     sync.WaitGroup

	mu     sync.Mutex
	client *net.UDPAddr
	armed  bool
	stream uint16
	tsn    uint32 // the TSN being dropped, once one is
	left   int    // how many more chunks of other streams to pass before it
	ndrops int
}

func newDropRelay(t *testing.T, server net.Addr) *dropRelay {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &dropRelay{conn: c, server: server.(*net.UDPAddr)}
	r.wg.Add(1)
	go r.loop()
	t.Cleanup(func() { c.Close(); r.wg.Wait() })
	return r
}

// arm drops the next DDP Segment Chunk from the server on SCTP stream
// id until others chunks of other streams have gone through.
func (r *dropRelay) arm(id uint16, others int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.stream, r.left = true, id, others
}

// dropped returns how many packets the relay dropped.
func (r *dropRelay) dropped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ndrops
}

func (r *dropRelay) loop() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		pkt := buf[:n]
		if from.Port != r.server.Port || !from.IP.Equal(r.server.IP) {
			r.mu.Lock()
			r.client = from
			r.mu.Unlock()
			r.conn.WriteToUDP(pkt, r.server)
			continue
		}
		r.mu.Lock()
		to, drop := r.client, false
		if tsn, id, _, ok := segmentChunk(pkt); ok && r.left > 0 {
			if r.armed && id == r.stream {
				r.armed, r.tsn = false, tsn
			}
			switch {
			case r.armed:
			case tsn == r.tsn:
				drop = true
				r.ndrops++
			case id != r.stream:
				r.left--
			}
		}
		r.mu.Unlock()
		if !drop && to != nil {
			r.conn.WriteToUDP(pkt, to)
		}
	}
}
