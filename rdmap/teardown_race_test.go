package rdmap

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// Local teardown against a receive side that is placing and delivering
// at that moment. Each test runs the two at once, in a different
// interleaving each time (go test -race -count=1000 -run TestTeardownRaces
// ./rdmap runs them a thousand times): nothing panics, and once the local
// call has returned, the memory it gave back is never written again nor
// sent to the peer.

// Close while Read Responses (duplicated, out of order) and Sends are
// being placed and delivered: no Read is completed twice, no flushed
// queue is indexed, and after Close returns neither the Reads' Data Sink
// buffers nor the receive buffers it flushed are written.
func TestTeardownRacesClose(t *testing.T) {
	s, peer := rawSide(t, QPConfig{Window: 16})
	const reads = 4
	sinks := make([]*MemoryRegion, reads)
	for i := range sinks {
		sinks[i] = s.reg(t, 64, LocalWrite)
		mustPost(t, s.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: sinks[i], Length: 64}, RemoteSTag: 0x1234}))
	}
	rbufs := make([]*MemoryRegion, 2*reads+2)
	for i := range rbufs {
		rbufs[i] = s.reg(t, 64, LocalWrite)
		mustPost(t, s.qp.PostRecv(RecvWR{ID: uint64(100 + i), SGL: []SGE{{MR: rbufs[i], Length: 64}}}))
	}
	peer.segsFrom(t, reads)
	resp := byte(MakeControl(OpReadResponse))
	send := byte(MakeControl(OpSend))
	// Every Read answered twice, with a Send after each Response, placed
	// ahead of sequence 0; then sequence 0 arrives, and its delivery
	// delivers all of them, while Close runs.
	seq := uint32(1)
	for round := 0; round < 2*reads; round++ {
		i := round % reads
		s.qp.Stream().Receive(seq, taggedSeg(resp, sinks[i].STag(), 0, bytes.Repeat([]byte{byte(round)}, 64)))
		s.qp.Stream().Receive(seq+1, untaggedSeg(send, 0, QNSend, uint32(round+2), bytes.Repeat([]byte{byte(round)}, 64)))
		seq += 2
	}
	closed := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.qp.Stream().Receive(0, untaggedSeg(send, 0, QNSend, 1, []byte{1}))
		<-closed
		for i := range reads {
			s.qp.Stream().Receive(seq, taggedSeg(resp, sinks[i].STag(), 0, bytes.Repeat([]byte{0xee}, 64)))
			s.qp.Stream().Receive(seq+1, untaggedSeg(send, 0, QNSend, uint32(2*reads+2+i), bytes.Repeat([]byte{0xee}, 64)))
			seq += 2
		}
	}()
	for range time.Now().UnixNano() % 50 { // a different interleaving each time
		runtime.Gosched()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.qp.Close(ctx)
	close(closed)
	<-done
	for i, m := range append(sinks, rbufs...) {
		if bytes.IndexByte(m.Bytes(), 0xee) >= 0 {
			t.Fatalf("buffer %d written after Close returned", i)
		}
	}
}

// Deregister and a local Invalidate while RDMA Writes to the region are
// being placed: once either returns, the region's memory does not change.
func TestTeardownRacesRevokeWrites(t *testing.T) {
	for _, how := range []string{"Deregister", "Invalidate"} {
		t.Run(how, func(t *testing.T) {
			s, _ := rawSide(t, QPConfig{Window: 16})
			mr := s.reg(t, 256, RemoteWrite)
			revoked := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for seq := uint32(0); seq < 64; seq++ {
					v := byte(seq)
					select {
					case <-revoked:
						v = 0xee
					default:
					}
					if s.qp.Stream().Receive(seq, taggedSeg(byte(MakeControl(OpWrite)), mr.STag(), uint64(seq%4)*64, bytes.Repeat([]byte{v}, 64))) != nil {
						return
					}
				}
			}()
			var err error
			if how == "Deregister" {
				err = mr.Deregister()
			} else {
				err = s.pd.Invalidate(mr.STag())
			}
			if err != nil {
				t.Fatal(err)
			}
			close(revoked)
			<-done
			if bytes.IndexByte(mr.Bytes(), 0xee) >= 0 {
				t.Fatalf("written after %s returned", how)
			}
		})
	}
}

// Deregister while the peer's RDMA Read Requests are being answered: once
// it returns the program writes the memory again, and no Read Response
// carries what it wrote. A Response is sent whole from the memory as it
// was, or not at all (the stream is terminated instead).
func TestTeardownRacesRevokeReads(t *testing.T) {
	s, peer := rawSide(t, QPConfig{IRD: 8})
	src, err := s.pd.RegisterMemory(bytes.Repeat([]byte{0x11}, 256), 0, RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	for msn := uint32(1); msn <= 8; msn++ {
		peer.send(t, rrSeg(msn, ReadRequest{SinkSTag: 0x5555, SinkTO: uint64(msn) * 256, RDMARDSZ: 256, SrcSTag: src.STag(), SrcTO: 0}))
	}
	if err := src.Deregister(); err != nil {
		t.Fatal(err)
	}
	copy(src.Bytes(), bytes.Repeat([]byte{0xee}, 256))
	// Whatever the queue pair sends from now on was sent already or is a
	// Terminate; give it the time to send the rest.
	waitfor.Until(50*time.Millisecond, func() bool { return s.qp.State() != StateRunning || len(peer.segsNow()) >= 8 })
	for _, seg := range peer.segsNow() {
		h, hl, err := ddp.ParseHeader(seg)
		if err != nil {
			t.Fatal(err)
		}
		if Control(h.RsvdULP[0]).Opcode() != OpReadResponse {
			continue
		}
		if p := seg[hl:]; !bytes.Equal(p, bytes.Repeat([]byte{0x11}, 256)) {
			t.Fatalf("a Read Response carries memory written after Deregister returned: % x", p[:16])
		}
	}
}

// segsNow returns what the raw peer has received so far.
func (p *rawPeer) segsNow() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.segs...)
}
