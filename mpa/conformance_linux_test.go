package mpa

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
)

// TestNoResegmentationAfterMULPDUShrinks: "In the event of a MULPDU
// change, DDP MUST NOT be required by the LLP to re-segment DDP Segments
// that have been previously posted to the LLP." (RFC 5041 §3), while "If
// the TCP implementation needs to adjust EMSS to support MTU changes or
// changing TCP options, the MULPDU value is changed accordingly." (RFC
// 5044 §4.5).
//
// The Conn starts with a MULPDU of 8192 octets, as if its EMSS had been
// larger when it started, over a TCP connection whose MSS is clamped to
// 1000 octets. DDP cuts one 2 MiB message into segments of that MULPDU.
// After the first MiB the Conn reads the EMSS again and its MULPDU
// shrinks to the EMSS's; the segments of the message posted after that
// still go out whole, each as one FPDU, and the peer's Reader decodes
// them back into the message. The next message is cut to the new MULPDU.
func TestNoResegmentationAfterMULPDUShrinks(t *testing.T) {
	const clamp, first = 1000, 8192
	a, b := clampedTCPPair(t, clamp)
	emss, err := EMSS(a)
	if err != nil {
		t.Skipf("EMSS: %v", err)
	}
	shrunk := MULPDU(emss, false)
	if shrunk >= first {
		t.Skipf("the MSS clamp did not take: EMSS %d", emss)
	}
	c := newConn(a, nil, &Config{}, Negotiated{Revision: 1, CRC: true}, Options{CRC: true, MaxULPDU: first}, Options{CRC: true}, false)
	if c.MULPDU() != first {
		t.Fatalf("MULPDU %d at the start, want %d", c.MULPDU(), first)
	}

	type fpdu struct {
		pos   uint64 // stream position of the FPDU
		ulpdu []byte
	}
	type result struct {
		fs  []fpdu
		err error
	}
	got := make(chan result, 1)
	go func() {
		r := NewReader(b, Options{CRC: true})
		var fs []fpdu
		for {
			pos := r.Offset()
			u, err := r.Next()
			if err != nil {
				got <- result{fs, err}
				return
			}
			fs = append(fs, fpdu{pos, bytes.Clone(u)})
		}
	}()

	s := ddp.NewSender(c, 1, 0, nil)
	msg := fillp(make([]byte, 2<<20), 1)
	if err := s.SendTagged(0x40, 0x1234, 0, [][]byte{msg}); err != nil {
		t.Fatalf("the message cut to the earlier MULPDU: %v", err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if c.MULPDU() != shrunk {
		t.Fatalf("MULPDU %d after the first MiB, want %d for the EMSS of %d", c.MULPDU(), shrunk, emss)
	}
	next := fillp(make([]byte, 3*shrunk), 2)
	if err := s.SendTagged(0x40, 0x5678, 0, [][]byte{next}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	a.CloseWrite()
	res := <-got
	if res.err != io.EOF {
		t.Fatalf("Reader: %v", res.err)
	}
	fs := res.fs

	// Each FPDU carries one DDP segment whole: the headers follow each
	// other and the payloads put the messages back together.
	var after int // segments of the first message posted after the MULPDU shrank, longer than it
	for _, m := range []struct {
		stag uint32
		msg  []byte
	}{{0x1234, msg}, {0x5678, next}} {
		var off int
		for off < len(m.msg) {
			if len(fs) == 0 {
				t.Fatalf("STag %#x: FPDUs end at %d octets of %d", m.stag, off, len(m.msg))
			}
			f := fs[0]
			fs = fs[1:]
			h, hl, err := ddp.ParseHeader(f.ulpdu)
			if err != nil || !h.Tagged || h.STag != m.stag || h.TO != uint64(off) {
				t.Fatalf("STag %#x at %d: FPDU at %d carries %v, %v", m.stag, off, f.pos, h, err)
			}
			p := f.ulpdu[hl:]
			if !bytes.Equal(p, m.msg[off:off+len(p)]) {
				t.Fatalf("STag %#x at %d: the payload differs", m.stag, off)
			}
			off += len(p)
			if h.Last != (off == len(m.msg)) {
				t.Fatalf("STag %#x at %d: L %v", m.stag, off, h.Last)
			}
			if m.stag == 0x5678 && len(f.ulpdu) > shrunk {
				t.Errorf("a segment of %d octets in the message posted after the MULPDU shrank to %d", len(f.ulpdu), shrunk)
			}
			// The Conn reads the EMSS again once 1 MiB has been written:
			// an FPDU that starts after that was posted after the change.
			if m.stag == 0x1234 && f.pos >= emssEvery && len(f.ulpdu) > shrunk {
				after++
			}
		}
	}
	if len(fs) != 0 {
		t.Fatalf("%d FPDUs more", len(fs))
	}
	if after == 0 {
		t.Fatal("no segment longer than the new MULPDU was posted after it shrank: the test tests nothing")
	}
	t.Logf("EMSS %d: MULPDU %d -> %d; %d segments of up to %d octets went out after the change", emss, first, shrunk, after, first)
}

// clampedTCPPair is a loopback TCP connection whose dialing end has its
// MSS clamped to mss octets (TCP_MAXSEG before connecting), so that its
// EMSS is that less the TCP options.
func clampedTCPPair(t *testing.T, mss int) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	return dialPair(t, &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, mss)
		}); err != nil {
			return err
		}
		return serr
	}})
}
