package pcapfile

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

var (
	cli = netip.MustParseAddrPort("192.0.2.1:40000")
	srv = netip.MustParseAddrPort("192.0.2.2:9999")
)

func seg(seq uint32, flags uint8, payload string) Segment {
	return Segment{Src: cli, Dst: srv, Seq: seq, Flags: flags, Payload: []byte(payload), Time: time.Unix(int64(seq), 0)}
}

func assemble(t *testing.T, segs ...Segment) (*Stream, error) {
	t.Helper()
	a := NewAssembler()
	for _, s := range segs {
		a.Add(s)
	}
	st, err := a.Streams()
	if len(st) != 1 {
		t.Fatalf("%d streams", len(st))
	}
	return st[0], err
}

func TestAssembler(t *testing.T) {
	// In order, with a SYN.
	s, err := assemble(t, seg(99, FlagSYN, ""), seg(100, FlagACK, "hello "), seg(106, FlagACK, "world"), seg(111, FlagFIN, ""))
	if err != nil || string(s.Data) != "hello world" || !s.SYN || s.ISN != 99 || !s.FIN {
		t.Fatalf("%q %v", s.Data, err)
	}
	// Out of order, a duplicate and an overlapping retransmission.
	s, err = assemble(t, seg(106, 0, "world"), seg(99, FlagSYN, ""), seg(100, 0, "hello "), seg(100, 0, "hello "), seg(103, 0, "lo wor"))
	if err != nil || string(s.Data) != "hello world" {
		t.Fatalf("%q %v", s.Data, err)
	}
	if s.TimeAt(0) != time.Unix(100, 0) || s.TimeAt(6) != time.Unix(103, 0) || s.TimeAt(10) != time.Unix(106, 0) {
		t.Fatalf("chunks %v", s.Chunks)
	}
	// No SYN: starts at the lowest sequence number seen.
	s, err = assemble(t, seg(1006, 0, "world"), seg(1000, 0, "hello "))
	if err != nil || string(s.Data) != "hello world" || s.SYN {
		t.Fatalf("%q %v", s.Data, err)
	}
	// Sequence numbers that wrap.
	s, err = assemble(t, seg(0xfffffffd, FlagSYN, ""), seg(0xfffffffe, 0, "abc"), seg(1, 0, "def"))
	if err != nil || string(s.Data) != "abcdef" {
		t.Fatalf("wrap: %q %v", s.Data, err)
	}
	// A gap.
	s, err = assemble(t, seg(99, FlagSYN, ""), seg(100, 0, "hello "), seg(110, 0, "d"))
	var gap *GapError
	if !errors.As(err, &gap) || gap.Offset != 6 || gap.Missing != 4 || string(s.Data) != "hello " || s.Err == nil {
		t.Fatalf("gap: %q %v", s.Data, err)
	}
	// A retransmission that disagrees.
	s, err = assemble(t, seg(100, 0, "hello"), seg(102, 0, "LLo!"))
	var ov *OverlapError
	if !errors.As(err, &ov) || ov.Offset != 2 || string(s.Data) != "hello!" {
		t.Fatalf("overlap: %q %v", s.Data, err)
	}
	// Data before the SYN's sequence number is not part of the stream;
	// a RST's payload is not stream data.
	s, err = assemble(t, seg(50, 0, "xx"), seg(99, FlagSYN, ""), seg(100, 0, "ok"), seg(102, FlagRST, "reset text"))
	if err != nil || string(s.Data) != "ok" || !s.RST {
		t.Fatalf("%q %v", s.Data, err)
	}
}

// FuzzAssembler cuts a known stream into segments, shuffles, duplicates
// and overlaps them, and checks that reassembly gives the stream back.
func FuzzAssembler(f *testing.F) {
	f.Add(uint64(1), uint32(0), uint16(500))
	f.Add(uint64(2), uint32(0xffffff00), uint16(3000))
	f.Fuzz(func(t *testing.T, seed uint64, isn uint32, n uint16) {
		rng := rand.New(rand.NewPCG(seed, 1))
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var segs []Segment
		segs = append(segs, seg(isn, FlagSYN, ""))
		for off := 0; off < len(data); {
			l := 1 + rng.IntN(200)
			l = min(l, len(data)-off)
			segs = append(segs, Segment{Src: cli, Dst: srv, Seq: isn + 1 + uint32(off), Payload: data[off : off+l]})
			if rng.IntN(4) == 0 { // an overlapping retransmission
				back := rng.IntN(off + 1)
				end := min(len(data), off+l+rng.IntN(50))
				segs = append(segs, Segment{Src: cli, Dst: srv, Seq: isn + 1 + uint32(back), Payload: data[back:end]})
			}
			off += l
		}
		rng.Shuffle(len(segs), func(i, j int) { segs[i], segs[j] = segs[j], segs[i] })
		a := NewAssembler()
		for _, s := range segs {
			a.Add(s)
		}
		st, err := a.Streams()
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && (len(st) != 1 || !bytes.Equal(st[0].Data, data)) {
			t.Fatal("stream differs")
		}
	})
}

// TestInOrderAt checks when octets become readable in order: octets
// captured beyond a hole wait for the segment that fills it.
func TestInOrderAt(t *testing.T) {
	at := func(seq uint32, payload string, sec int64) Segment {
		s := seg(seq, FlagACK, payload)
		s.Time = time.Unix(sec, 0)
		return s
	}
	// "hello " is lost and sent again at 9 s, after "world" (5 s) and
	// "!" (12 s, after the retransmission).
	s, err := assemble(t, seg(99, FlagSYN, ""), at(106, "world", 5), at(100, "hello ", 9), at(111, "!", 12))
	if err != nil || string(s.Data) != "hello world!" {
		t.Fatalf("%q %v", s.Data, err)
	}
	for _, c := range []struct {
		off           int
		time, inOrder int64
	}{{0, 9, 9}, {5, 9, 9}, {6, 5, 9}, {10, 5, 9}, {11, 12, 12}} {
		if got := s.TimeAt(c.off); got != time.Unix(c.time, 0) {
			t.Errorf("TimeAt(%d) = %v, want %d s", c.off, got.Unix(), c.time)
		}
		if got := s.InOrderAt(c.off); got != time.Unix(c.inOrder, 0) {
			t.Errorf("InOrderAt(%d) = %v, want %d s", c.off, got.Unix(), c.inOrder)
		}
	}
}
