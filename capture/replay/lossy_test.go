package replay

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/capture/pcapfile"
)

// TestLossyTCP checks the bundled capture of MPA over a TCP path that
// loses packets and whose MTU drops after the startup
// (scripts/record-lossy-tcp.sh): the capture holds the loss as a capture
// point sees it, segments that arrive after later octets and segments
// sent again, and FPDUs cut across segments, and yet every octet of both
// connections is there once reassembled, every FPDU's CRC is good, and
// the replay places all 12 Writes and 6 Read Responses and delivers
// every message: TCP, not MPA or DDP, recovers from the loss.
func TestLossyTCP(t *testing.T) {
	const name = "lossy-tcp.pcap"
	b, err := os.ReadFile(filepath.Join(captures, name))
	if err != nil {
		t.Fatal(err)
	}

	// Every data segment, by direction: which arrive beyond a hole, and
	// which carry octets the capture already holds.
	pr, err := pcapfile.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	next := map[pcapfile.Flow]uint32{}
	biggest := map[string]int{} // the longest data segment from each address
	var outOfOrder, again int
	for {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s, err := pcapfile.DecodeTCP(p.LinkType, p.Data)
		if err != nil {
			t.Fatal(err)
		}
		f := pcapfile.Flow{Src: s.Src, Dst: s.Dst}
		if s.Flags&pcapfile.FlagSYN != 0 {
			next[f] = s.Seq + 1
			continue
		}
		if len(s.Payload) == 0 {
			continue
		}
		biggest[s.Src.String()] = max(biggest[s.Src.String()], len(s.Payload))
		end := s.Seq + uint32(len(s.Payload))
		switch n := next[f]; {
		case int32(s.Seq-n) > 0:
			outOfOrder++
		case int32(s.Seq-n) < 0:
			again++
		}
		if int32(end-next[f]) > 0 {
			next[f] = end
		}
	}
	if outOfOrder == 0 || again == 0 {
		t.Errorf("%d segments beyond a hole, %d with octets already captured: the capture shows no loss", outOfOrder, again)
	}

	streams, err := pcapfile.ReadStreams(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("reassembly: %v", err)
	}
	if len(streams) != 4 {
		t.Fatalf("%d streams, want both directions of two connections", len(streams))
	}

	m := decodeFile(t, name)
	if len(m.Conns) != 2 || m.Errors != 0 {
		t.Fatalf("%d connections, %d records not decoded", len(m.Conns), m.Errors)
	}
	c0 := m.Conns[0]
	if c := c0; !c.Request.Markers || !c.MarkersToInitiator || c.MarkersToResponder || !c.CRC {
		t.Errorf("the Writes' connection: %+v, want Markers towards the initiator, which asked for them, and CRCs", c)
	}
	// The records of each direction come in stream order, each at the
	// moment TCP can deliver it: behind a hole, FPDUs captured early are
	// released together with the retransmission that fills it, and one
	// retransmission waits for the timer.
	type dir struct {
		conn int
		src  string
	}
	nextTO := map[dir]uint64{}
	last := map[dir]time.Time{}
	together, pause := 0, time.Duration(0)
	for i := range m.Events {
		r := m.Events[i].Rec
		if r.Transport != "tcp" || r.DDP == nil {
			continue
		}
		d := dir{r.Conn, r.Src}
		if l, ok := last[d]; ok {
			if r.Time.Before(l) {
				t.Errorf("record %d at %v, before its direction's previous one at %v", r.N, r.Time, l)
			}
			if r.Time.Equal(l) {
				together++
			}
			pause = max(pause, r.Time.Sub(l))
		}
		last[d] = r.Time
		if r.DDP.Tagged && r.Op == "RDMA Write" && *r.PayloadLen > 0 {
			if r.DDP.TO != 0 && r.DDP.TO != nextTO[d] {
				t.Errorf("record %d: a Write's segment at TO %#x, want %#x: not in stream order", r.N, r.DDP.TO, nextTO[d])
			}
			nextTO[d] = r.DDP.TO + uint64(*r.PayloadLen)
		}
	}
	if together == 0 || pause < 100*time.Millisecond {
		t.Errorf("%d FPDUs released with the one before them, longest pause %v: want FPDUs held behind a hole and a pause for the retransmission timer", together, pause)
	}

	// The path's MTU dropped after the startup: the client's FPDUs, sized
	// for the first MSS, are longer than any segment that carried them.
	fpdu := 0
	for i := range m.Events {
		if r := m.Events[i].Rec; r.Kind == capture.KindFPDU && r.Src == c0.Initiator {
			fpdu = max(fpdu, r.Len)
		}
	}
	if seg := biggest[c0.Initiator]; fpdu <= seg {
		t.Errorf("the client's longest FPDU is %d octets, its longest segment %d: no FPDU split across segments", fpdu, seg)
	}

	writes, responses, segments := 0, 0, 0
	for i := range m.Events {
		e := &m.Events[i]
		if e.Kind != EventSegment {
			continue
		}
		segments++
		if e.Rec.CRC != capture.CRCGood {
			t.Errorf("record %d: CRC %s", e.Rec.N, e.Rec.CRC)
		}
		if e.Rec.DDP == nil || !e.Rec.DDP.Last || len(e.Delivered) == 0 {
			continue
		}
		switch e.Rec.Op {
		case "RDMA Write":
			if len(e.Payload()) > 0 {
				writes++
			}
		case "RDMA Read Response":
			responses++
		}
	}
	if writes != 12 || responses != 6 {
		t.Errorf("%d Writes and %d Read Responses delivered, want 12 and 6", writes, responses)
	}
	if m.Delivered == 0 || m.Segments != segments {
		t.Errorf("model: %d segments, %d delivered", m.Segments, m.Delivered)
	}
	t.Logf("FPDUs of up to %d octets in segments of up to %d; %d segments beyond a hole, %d sent again; %d FPDUs released with the one before them, the longest pause %v; %d FPDUs, %d messages delivered", fpdu, biggest[c0.Initiator], outOfOrder, again, together, pause, segments, m.Delivered)
}
