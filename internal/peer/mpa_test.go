package peer

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/mpa"
)

// Over MPA with Markers both ways and a segment size capped at MPA's
// floor, the Tap reports both startup frames and every FPDU the
// initiator sends: its ULPDU no longer than the cap, its length a
// multiple of four, a Marker wherever the stream position is a multiple
// of 512; and the Write lands whole.
func TestTapSeesFPDUsAndMarkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	stag, err := b.Register("mem", 1024, 0, "rw")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *mpa.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		req, err := mpa.Server(ctx, nc, &mpa.Config{Markers: true})
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		c, err := req.Accept(CapMULPDU(b.QP, MinMPAMULPDU), nil)
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	var mu sync.Mutex
	var evs []Event
	tap := NewTap(true, func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := mpa.Client(ctx, nc, CapMULPDU(a.QP, MinMPAMULPDU), &mpa.Config{Markers: true, Trace: func(_, _ net.Addr) mpa.Tracer { return mpa.TraceFunc(tap.Observe) }})
	if err != nil {
		t.Fatal(err)
	}
	cb := <-accepted
	if cb == nil {
		t.FailNow()
	}
	defer ca.Close()
	defer cb.Close()
	go a.Run(ctx)
	go b.Run(ctx)

	msg := bytes.Repeat([]byte("0123456789abcdef"), 50) // 800 octets: 8 segments of 114 at most
	if _, err := a.Write(msg, stag, 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, b, func(e Event) bool { return e.Kind == "message-delivered" && e.Tagged && e.Len == uint32(len(msg)) })
	if got := regionNamed(b.Regions(), "mem").Data[100 : 100+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("placed %q", got)
	}
	// The Tap reads the peer's FPDUs too, once they arrive.
	waitfor.Until(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(evs) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	var frames, out, marked, payload int
	var pos uint64
	for _, e := range evs {
		switch e.Kind {
		case "mpa-frame":
			frames++
			if e.Error != "" || !strings.Contains(e.Text, "M") {
				t.Errorf("frame %+v", e)
			}
		case "fpdu":
			if e.Error != "" {
				t.Errorf("FPDU %+v", e)
			}
			if !e.Out {
				continue
			}
			if e.Seq != uint32(out) || e.Pos != pos {
				t.Errorf("FPDU %d at %d: want seq %d at %d", e.Seq, e.Pos, out, pos)
			}
			out++
			pos += uint64(e.Wire)
			if e.ULPDU > MinMPAMULPDU || e.Wire%4 != 0 || (e.ULPDU+2+e.Pad)%4 != 0 {
				t.Errorf("FPDU %+v: ULPDU over %d or misaligned", e, MinMPAMULPDU)
			}
			for _, m := range e.Markers {
				if (e.Pos+uint64(m))%512 != 0 {
					t.Errorf("Marker at %d+%d", e.Pos, m)
				}
			}
			marked += len(e.Markers)
			if e.Op == "RDMA Write" {
				payload += int(e.Len)
			}
		}
	}
	if frames != 2 {
		t.Errorf("%d startup frames seen, want the Request and the Reply", frames)
	}
	if out < 8 || payload != len(msg) || marked < 2 {
		t.Errorf("%d FPDUs out, %d octets of Write payload, %d Markers: want 8+, %d, 2+", out, payload, marked, len(msg))
	}
}
