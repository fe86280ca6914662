//go:build !js

package mpa

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// What a receiver must not check: the PAD, "The pad data MUST be set to
// zero by the sender and ignored by the receiver (except for CRC
// checking)." (RFC 5044 §4.1); a Marker's RESERVED field, "The Reserved
// field MUST be set to zero on transmit and ignored on receive (except
// for CRC calculation)." (§4.2); and FPDUPTR's two low bits, "The least
// significant two bits MUST always be set to zero at the transmitter, and
// the receivers MUST always treat these as zero for calculations." (§4.2)
//
// Each junk case changes octets of a good FPDU there. With a CRC made
// over the changed octets, the FPDU is accepted by ParseFPDU and by the
// Reader and gives back the ULPDU it carried (the PAD is no part of it);
// with the sender's CRC left as it was, the CRC, which covers them, fails.
// With CRCs off the CRC field "MUST NOT be checked" (§4.1): the changed
// FPDU is accepted with the CRC field the sender wrote.
var junkCases = []struct {
	name    string
	ulpdu   int  // ULPDU length: 19 and 619 leave 3 PAD octets
	markers bool // only with Markers
	junk    func(f []byte)
}{
	{"PAD", 19, false, func(f []byte) {
		copy(f[len(f)-CRCLen-3:], []byte{0xff, 0x5a, 0x01})
	}},
	{"PAD of a long FPDU", 619, false, func(f []byte) {
		copy(f[len(f)-CRCLen-3:], []byte{0x80, 0x7f, 0xa5})
	}},
	{"Marker RESERVED before the FPDU", 19, true, func(f []byte) {
		f[0], f[1] = 0xde, 0xad
	}},
	{"Marker RESERVED inside the FPDU", 619, true, func(f []byte) {
		f[MarkerInterval], f[MarkerInterval+1] = 0xbe, 0xef
	}},
	{"FPDUPTR low bits before the FPDU", 19, true, func(f []byte) {
		f[3] |= 3 // FPDUPTR 0x0003, treated as 0x0000
	}},
	{"FPDUPTR low bits inside the FPDU", 619, true, func(f []byte) {
		f[MarkerInterval+3] |= 3 // FPDUPTR 0x01ff, treated as 0x01fc
	}},
	{"all of them", 619, true, junkAll},
}

// junkAll changes, in an FPDU that starts at SeqStart with Markers and
// carries 619 octets of ULPDU, both Markers' RESERVED fields and
// FPDUPTRs' low bits, and the PAD.
func junkAll(f []byte) {
	f[0], f[1], f[3] = 0xff, 0xff, 0x02
	f[MarkerInterval], f[MarkerInterval+1], f[MarkerInterval+3] = 0x12, 0x34, f[MarkerInterval+3]|1
	copy(f[len(f)-CRCLen-3:], []byte{1, 2, 3})
}

// TestReceiverIgnoresReservedAndPad runs the junk cases through
// ParseFPDU and the Reader with every combination of CRCs and Markers.
func TestReceiverIgnoresReservedAndPad(t *testing.T) {
	for _, tc := range junkCases {
		for _, o := range allOptions {
			if tc.markers && !o.Markers {
				continue
			}
			ulpdu := fillp(make([]byte, tc.ulpdu), 7)
			good, err := AppendFPDU(nil, 0, o, ulpdu)
			if err != nil {
				t.Fatal(err)
			}
			if PadLen(tc.ulpdu) != 3 || (tc.ulpdu > 500 && o.Markers && len(good) != 4+2+tc.ulpdu+3+4+4) {
				t.Fatalf("test bug: %s %+v: FPDU of %d octets", tc.name, o, len(good))
			}
			f := bytes.Clone(good)
			tc.junk(f)
			if bytes.Equal(f, good) {
				t.Fatalf("test bug: %s changed nothing", tc.name)
			}
			if o.CRC {
				// The sender's CRC no longer matches: the changed octets
				// are covered by it.
				if _, _, err := ParseFPDU(nil, f, 0, o); !errors.Is(err, term.MPACRCError) {
					t.Errorf("%s %+v, CRC not made again: ParseFPDU %v, want a CRC error", tc.name, o, err)
				}
				if _, err := NewReader(bytes.NewReader(f), o).Next(); !errors.Is(err, term.MPACRCError) {
					t.Errorf("%s %+v, CRC not made again: Reader %v, want a CRC error", tc.name, o, err)
				}
				PutCRC(f[len(f)-CRCLen:], CRC(f[:len(f)-CRCLen]))
			}
			u, n, err := ParseFPDU(nil, f, 0, o)
			if err != nil || n != len(f) || !bytes.Equal(u, ulpdu) {
				t.Errorf("%s %+v: ParseFPDU took %d of %d octets, %v; ULPDU intact %v", tc.name, o, n, len(f), err, bytes.Equal(u, ulpdu))
			}
			// The Reader, twice in a row: the second FPDU starts where
			// the first one's length says, and its own Markers are
			// checked where they fall.
			stream := append(bytes.Clone(f), func() []byte {
				g, _ := AppendFPDU(nil, uint64(len(f)), o, ulpdu)
				return g
			}()...)
			r := NewReader(bytes.NewReader(stream), o)
			for i := range 2 {
				u, err := r.Next()
				if err != nil || !bytes.Equal(u, ulpdu) {
					t.Errorf("%s %+v: Reader FPDU %d: %v; ULPDU intact %v", tc.name, o, i, err, bytes.Equal(u, ulpdu))
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("%s %+v: after the FPDUs: %v", tc.name, o, err)
			}
		}
	}
}

// TestConnIgnoresReservedAndPad: the same over a connection: a raw
// initiator sends, with the Markers the responder asked for, a Send whose
// FPDU has junk in both Markers' RESERVED fields, in both FPDUPTRs' low
// bits and in the PAD, its CRC made over them; the responder delivers it
// intact and answers no Terminate.
func TestConnIgnoresReservedAndPad(t *testing.T) {
	noLeaks(t)
	l, ch, b := listenFor(t, Config{Markers: true})
	rbuf := b.Reg(t, 1024, rdmap.LocalWrite)
	if err := b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 1024}}}); err != nil {
		t.Fatal(err)
	}
	c := rawDial(t, l.Addr().String())
	c.Write((&Frame{Rev: 1, CRC: true}).Append(nil))
	if rep, err := ReadFrame(c); err != nil || !rep.Markers || !rep.CRC {
		t.Fatalf("Reply %+v, %v; want Markers and CRCs", rep, err)
	}
	conn := <-ch
	// A Send (QN 0, MSN 1, MO 0) of 601 octets: a 619-octet ULPDU.
	payload := fillp(make([]byte, 601), 3)
	f, err := AppendFPDU(nil, 0, markersCRC, append([]byte{0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, payload...))
	if err != nil {
		t.Fatal(err)
	}
	junkAll(f)
	PutCRC(f[len(f)-CRCLen:], CRC(f[:len(f)-CRCLen]))
	if _, err := c.Write(f); err != nil {
		t.Fatal(err)
	}
	if w := waitC(t, b.RCQ); w.Status != rdmap.StatusSuccess || w.ByteLen != uint32(len(payload)) || w.WRID != 1 {
		t.Fatalf("%+v", w)
	}
	if !bytes.Equal(rbuf.Bytes()[:len(payload)], payload) {
		t.Fatal("the Send was not placed intact")
	}
	// Nothing comes back: no Terminate.
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := c.Read(make([]byte, 64)); n != 0 {
		t.Fatalf("the responder sent %d octets", n)
	}
	if err := b.QP.Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	conn.Close()
}

// TestPostAfterClose: RFC 5041 §6.2.1, "If the Local Peer ULP indicates
// graceful teardown, the DDP layer on the Local Peer SHOULD ensure that
// all ULP data would be transferred before the underlying LLP Stream and
// Connection are torn down, and any further data transfer requests by
// the Local Peer ULP MUST return an error." Over MPA: the Writes and the
// Reads posted before Close complete (the Reads, which wait for the
// peer's Read Responses, are still outstanding when Close is called) and
// the peer holds what was written when it sees the orderly close; then
// every kind of work request posted after Close returns ErrNotRunning and
// completes nothing.
func TestPostAfterClose(t *testing.T) {
	noLeaks(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	ac, bc := connectPair(t, Config{}, Config{}, a, b)
	defer bc.Close()
	defer ac.Close()
	const size, count = 64 << 10, 8
	src := a.Reg(t, size*count, rdmap.LocalWrite)
	fillp(src.Bytes(), 5)
	back := a.Reg(t, size*count, rdmap.LocalWrite)
	sink := b.Reg(t, size*count, rdmap.RemoteWrite|rdmap.RemoteRead)
	for i := range count {
		sge := rdmap.SGE{MR: src, Offset: uint64(i * size), Length: size}
		if err := a.QP.PostWrite(rdmap.WriteWR{ID: uint64(i), SGL: []rdmap.SGE{sge}, RemoteSTag: sink.STag(), RemoteTO: uint64(i * size)}); err != nil {
			t.Fatal(err)
		}
	}
	// The Reads follow the Writes on the stream, so they read back what
	// was written.
	for i := range count {
		sge := rdmap.SGE{MR: back, Offset: uint64(i * size), Length: size}
		if err := a.QP.PostRead(rdmap.ReadWR{ID: uint64(count + i), Local: sge, RemoteSTag: sink.STag(), RemoteTO: uint64(i * size)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.QP.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * count {
		if c := waitC(t, a.SCQ); c.Status != rdmap.StatusSuccess || c.WRID != uint64(i) {
			t.Fatalf("work request %d: %+v", i, c)
		}
	}
	if !bytes.Equal(back.Bytes(), src.Bytes()) {
		t.Fatal("the Reads did not read back what was written")
	}
	select {
	case e := <-b.Events:
		if e.Type != rdmap.EventDisconnected {
			t.Fatalf("the peer's event %v, want %v", e.Type, rdmap.EventDisconnected)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer saw no end of the stream")
	}
	if !bytes.Equal(sink.Bytes(), src.Bytes()) {
		t.Fatal("the peer does not hold what was written before Close")
	}

	local := rdmap.SGE{MR: src, Length: 8}
	for _, p := range []struct {
		name string
		post func() error
	}{
		{"Send", func() error { return a.QP.PostSend(rdmap.SendWR{ID: 100, SGL: []rdmap.SGE{local}}) }},
		{"Write", func() error {
			return a.QP.PostWrite(rdmap.WriteWR{ID: 101, SGL: []rdmap.SGE{local}, RemoteSTag: sink.STag()})
		}},
		{"Read", func() error {
			return a.QP.PostRead(rdmap.ReadWR{ID: 102, Local: local, RemoteSTag: sink.STag()})
		}},
		{"Atomic", func() error {
			return a.QP.PostAtomic(rdmap.AtomicWR{ID: 103, Op: rdmap.FetchAdd, Local: local, RemoteSTag: sink.STag(), Add: 1})
		}},
		{"Invalidate", func() error { return a.QP.PostInvalidate(104, src.STag(), false) }},
		{"Recv", func() error { return a.QP.PostRecv(rdmap.RecvWR{ID: 105, SGL: []rdmap.SGE{local}}) }},
		{"Batch", func() error {
			return a.QP.PostBatch(func() error { return a.QP.PostSend(rdmap.SendWR{ID: 106}) })
		}},
	} {
		if err := p.post(); !errors.Is(err, rdmap.ErrNotRunning) {
			t.Errorf("Post%s after Close: %v, want %v", p.name, err, rdmap.ErrNotRunning)
		}
	}
	var cs [8]rdmap.Completion
	if n := a.SCQ.Poll(cs[:]); n != 0 {
		t.Fatalf("%d completions after Close: %+v", n, cs[:n])
	}
	if n := a.RCQ.Poll(cs[:]); n != 0 {
		t.Fatalf("%d receive completions after Close: %+v", n, cs[:n])
	}
}
