//go:build !js

package mpa

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/leaktest"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/term"
)

type peer = rdmaptest.Peer

func newPeer(t testing.TB, cfg rdmap.QPConfig) *peer { return rdmaptest.NewPeer(t, cfg) }

func waitC(t testing.TB, cq *rdmap.CompletionQueue) rdmap.Completion { return rdmaptest.Wait(t, cq) }

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func noLeaks(t *testing.T) { leaktest.Check(t) }

// connectPair: a listener with lcfg, a dialer with dcfg; a and b are the
// initiator's and responder's queue pairs.
func connectPair(t *testing.T, lcfg, dcfg Config, a, b *peer) (*Conn, *Conn) {
	t.Helper()
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &lcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := l.Accept(tctx(t))
		if err != nil {
			ch <- res{nil, err}
			return
		}
		if string(r.PrivateData) != string(dcfg.PrivateData) {
			ch <- res{nil, fmt.Errorf("private data %q", r.PrivateData)}
			return
		}
		c, err := r.Accept(b.QP, lcfg.PrivateData)
		ch <- res{c, err}
	}()
	ac, err := Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &dcfg)
	if err != nil {
		t.Fatal(err)
	}
	rr := <-ch
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if string(ac.Negotiated().PeerData) != string(lcfg.PrivateData) {
		t.Fatalf("reply private data %q", ac.Negotiated().PeerData)
	}
	return ac, rr.c
}

func fillp(b []byte, seed byte) []byte { return rdmaptest.Fill(b, seed) }

// Every RDMAP operation over real loopback TCP, for every revision, CRC
// and Marker setting.
func TestConnAllOperations(t *testing.T) {
	for _, rev := range []int{1, 2} {
		for _, crc := range []bool{true, false} {
			for _, markers := range []bool{false, true} {
				name := fmt.Sprintf("rev%d/crc=%v/markers=%v", rev, crc, markers)
				t.Run(name, func(t *testing.T) {
					noLeaks(t)
					a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
					lcfg := Config{Revision: rev, NoCRC: !crc, Markers: markers, PrivateData: []byte("responder")}
					dcfg := Config{Revision: rev, NoCRC: !crc, Markers: markers, PrivateData: []byte("initiator")}
					ac, bc := connectPair(t, lcfg, dcfg, a, b)
					na, nb := ac.Negotiated(), bc.Negotiated()
					if na.CRC != crc || nb.CRC != crc || na.MarkersTx != markers || na.MarkersRx != markers || na.Revision != rev || nb.Revision != rev {
						t.Fatalf("negotiated %+v / %+v", na, nb)
					}
					rdmaptest.Exercise(t, a, b)
				})
			}
		}
	}
}

func TestConnReject(t *testing.T) {
	noLeaks(t)
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		r, err := l.Accept(tctx(t))
		if err == nil {
			r.Reject([]byte("go away"), 2, 3)
		}
	}()
	a := newPeer(t, rdmap.QPConfig{})
	_, err = Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &Config{})
	var re *ddp.RejectedError
	if !errors.As(err, &re) || string(re.PrivateData) != "go away" || re.Enhanced == nil || re.Enhanced.IRD != 2 || re.Enhanced.ORD != 3 {
		t.Fatalf("Dial = %v", err)
	}
}

// IRD/ORD negotiation (RFC 6581 §9.1): each end's ORD is lowered to the
// other's IRD.
func TestConnIRDORD(t *testing.T) {
	a := newPeer(t, rdmap.QPConfig{IRD: 4, ORD: 16})
	b := newPeer(t, rdmap.QPConfig{IRD: 2, ORD: 8})
	ac, bc := connectPair(t, Config{}, Config{}, a, b)
	if _, ord := a.QP.ReadLimits(); ord != 2 {
		t.Fatalf("initiator ORD %d, want the responder's IRD 2", ord)
	}
	if _, ord := b.QP.ReadLimits(); ord != 4 {
		t.Fatalf("responder ORD %d, want the initiator's IRD 4", ord)
	}
	if !ac.Negotiated().PeerToPeer || ac.Negotiated().RTR != ddp.RTRWrite || !bc.Negotiated().PeerToPeer {
		t.Fatalf("%+v", ac.Negotiated())
	}
}

// rawPeer speaks MPA by hand over a TCP connection.
func rawDial(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// listenFor runs one responder with a fresh queue pair and returns what
// Accept gave.
func listenFor(t *testing.T, cfg Config) (*Listener, chan *Conn, *peer) {
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b := newPeer(t, rdmap.QPConfig{})
	ch := make(chan *Conn, 1)
	go func() {
		r, err := l.Accept(tctx(t))
		if err != nil {
			close(ch)
			return
		}
		c, _ := r.Accept(b.QP, nil)
		ch <- c
	}()
	return l, ch, b
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection stayed open")
			}
			return
		}
	}
}

// Scripted startups against the responder: invalid frames close the
// connection (RFC 5044 §7.1.2 rules 2, 5, 8, 9); a silent initiator times
// out (rule 10); a Rev 1 Request gets a Rev 1 Reply, an enhanced one an
// enhanced Reply.
func TestResponderStartup(t *testing.T) {
	req := func(f Frame) []byte { return f.Append(nil) }
	bad := map[string][]byte{
		"wrong key":                       append([]byte("MPA ID Bad Frame"), 0x40, 1, 0, 0),
		"reply key (responder/responder)": req(Frame{Reply: true, Rev: 1}),
		"PD_Length over 512":              append(append([]byte(RequestKey), 0x40, 1, 0x02, 0x01), make([]byte, 513)...),
		"Rev 3":                           append([]byte(RequestKey), 0x40, 3, 0, 0),
		"S bit without data":              append([]byte(RequestKey), 0x50, 2, 0, 0),
	}
	for name, frame := range bad {
		t.Run(name, func(t *testing.T) {
			l, _, _ := listenFor(t, Config{})
			c := rawDial(t, l.Addr().String())
			c.Write(frame)
			expectClosed(t, c)
		})
	}
	t.Run("silent initiator times out", func(t *testing.T) {
		l, _, _ := listenFor(t, Config{HandshakeTimeout: 200 * time.Millisecond})
		c := rawDial(t, l.Addr().String())
		start := time.Now()
		expectClosed(t, c)
		if time.Since(start) > 3*time.Second {
			t.Fatal("no timeout")
		}
	})
	for _, tc := range []struct {
		name string
		f    Frame
	}{
		{"rev 1", Frame{Rev: 1, CRC: true, PrivateData: []byte("v1")}},
		{"rev 2 unenhanced", Frame{Rev: 2, PrivateData: []byte("v2")}},
		{"rev 2 enhanced", Frame{Rev: 2, Enhanced: true, Markers: true, PrivateData: append((&EnhancedData{IRD: 3, ORD: 5}).Append(nil), "v2e"...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ch, _ := listenFor(t, Config{})
			c := rawDial(t, l.Addr().String())
			c.Write(tc.f.Append(nil))
			rep, err := ReadFrame(c)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Reply || rep.Reject || rep.Rev != tc.f.Rev || rep.Enhanced != tc.f.Enhanced || !rep.CRC {
				t.Fatalf("reply %v to %v", rep, tc.f)
			}
			if tc.f.Enhanced {
				e, _, _ := rep.Enhancement()
				if e.ORD != 3 || e.IRD != 8 {
					t.Fatalf("enhanced reply %v: responder ORD must be at most the initiator's IRD 3", e)
				}
			}
			conn := <-ch
			// Rule 4: the responder sends nothing before it has received
			// an FPDU, even when its ULP posts a Send at once.
			_ = conn
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil {
				t.Fatalf("the responder sent %d octets before receiving an FPDU", n)
			}
		})
	}
}

// Rule 4 with a real queue pair: the responder's Send waits for the
// initiator's first FPDU.
func TestResponderWaitsForFirstFPDU(t *testing.T) {
	l, ch, b := listenFor(t, Config{})
	c := rawDial(t, l.Addr().String())
	c.Write((&Frame{Rev: 1}).Append(nil))
	if _, err := ReadFrame(c); err != nil {
		t.Fatal(err)
	}
	<-ch
	src := b.Reg(t, 8, 0)
	if err := b.QP.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 8}}}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := c.Read(make([]byte, 64)); n != 0 {
		t.Fatalf("the responder sent %d octets before receiving an FPDU", n)
	}
	// Now an FPDU: a zero-length RDMA Write (CRC on: the default C bit of
	// the responder).
	w := NewWriter(c, Options{CRC: true})
	w.WriteFPDU(zeroWrite, nil)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := NewReader(c, Options{CRC: true})
	u, err := r.Next()
	if err != nil || len(u) != 18+8 {
		t.Fatalf("FPDU of %d octets, %v", len(u), err)
	}
}

// zeroWrite is the DDP header of a zero-length RDMA Write (STag 0, TO 0):
// the RTR indication of RFC 6581 §9.2 that a raw initiator sends.
var zeroWrite = []byte{0xc1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// Bad input in Full Operation gets MPA's Terminate and nothing is placed.
// The Terminate carries the exact triple of RFC 5040 §4.8 (Layer and
// Error Type in its first octet, Error Code in its second) that RFC
// 6580 §3 registers: 0x2/0x0/0x02 "MPA CRC Error", 0x2/0x0/0x03 "MPA
// Marker and ULPDU Length field mismatch", 0x2/0x0/0x04 "Invalid MPA
// Request Frame or MPA Response Frame" (which this package uses for an
// impossible ULPDU_Length), 0x1/0x1/0x00 "Tagged Buffer Error / Invalid
// Steering Tag". A Marker whose FPDUPTR does not point at its FPDU's ULPDU_Length
// field, in an FPDU whose CRC is valid, is RFC 5044 §8's error 3: "In
// the event that the CRC is valid, received MPA Marker (if enabled) and
// ULPDU Length fields do not agree on the start of an FPDU"; the
// responder's Config.Markers has the raw initiator send Markers. Both
// Marker cases carry a Send that the posted receive would take, so an
// unchecked Marker would place it.
func TestFullOperationErrors(t *testing.T) {
	// A Send (QN 0, MSN 1, MO 0) of n octets.
	send := func(n int) []byte {
		return append([]byte{0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, fillp(make([]byte, n), 9)...)
	}
	for _, tc := range []struct {
		name    string
		markers bool
		send    func(t *testing.T, c net.Conn, w *Writer)
		want    *term.Error
		triple  [2]byte // the Terminate Control's first two octets
	}{
		{"CRC mismatch", false, func(t *testing.T, c net.Conn, w *Writer) {
			f, _ := AppendFPDU(nil, 0, Options{CRC: true}, append([]byte{0xc1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "abcd"...))
			f[len(f)-1] ^= 0xff
			c.Write(f)
		}, term.MPACRCError, [2]byte{0x20, 0x02}},
		{"ULPDU_Length too small", false, func(t *testing.T, c net.Conn, w *Writer) {
			c.Write([]byte{0, 4, 1, 2, 3, 4, 0, 0, 0, 0})
		}, term.MPAInvalidFrame, [2]byte{0x20, 0x04}},
		{"DDP invalid STag", false, func(t *testing.T, c net.Conn, w *Writer) {
			w.WriteFPDU([]byte{0xc1, 0x40, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0}, [][]byte{[]byte("data")})
		}, term.DDPInvalidSTag, [2]byte{0x11, 0x00}},
		{"Marker before the FPDU not zero", true, func(t *testing.T, c net.Conn, w *Writer) {
			// The first Marker, at SeqStart, precedes the first FPDU:
			// "the first Marker has an FPDUPTR value of 0x0000" (RFC
			// 5044 §4.3). Here it says 8; the CRC covers it and is
			// valid.
			f, _ := AppendFPDU(nil, 0, markersCRC, send(20))
			if m, _, _ := ParseMarker(f); m.FPDUPTR != 0 {
				t.Fatalf("test bug: first Marker %+v", m)
			}
			f[3] = 8
			PutCRC(f[len(f)-CRCLen:], CRC(f[:len(f)-CRCLen]))
			c.Write(f)
		}, term.MPAMarkerMismatch, [2]byte{0x20, 0x03}},
		{"Marker inside the FPDU", true, func(t *testing.T, c net.Conn, w *Writer) {
			// The Marker at stream octet 512 is inside the FPDU, 508
			// octets after its ULPDU_Length field; here it says 504.
			f, _ := AppendFPDU(nil, 0, markersCRC, send(600))
			if m, _, _ := ParseMarker(f[MarkerInterval:]); m.FPDUPTR != MarkerInterval-MarkerLen {
				t.Fatalf("test bug: Marker at 512 %+v", m)
			}
			binary.BigEndian.PutUint16(f[MarkerInterval+2:], MarkerInterval-2*MarkerLen)
			PutCRC(f[len(f)-CRCLen:], CRC(f[:len(f)-CRCLen]))
			c.Write(f)
		}, term.MPAMarkerMismatch, [2]byte{0x20, 0x03}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			l, ch, b := listenFor(t, Config{Markers: tc.markers})
			rbuf := b.Reg(t, 1024, rdmap.LocalWrite)
			b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 1024}}})
			c := rawDial(t, l.Addr().String())
			c.Write((&Frame{Rev: 1, CRC: true}).Append(nil))
			rep, err := ReadFrame(c)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Markers != tc.markers {
				t.Fatalf("Reply Frame M bit %v, want %v", rep.Markers, tc.markers)
			}
			conn := <-ch
			tc.send(t, c, NewWriter(c, Options{CRC: true, Markers: tc.markers}))
			// The responder answers with a Terminate carrying the triple,
			// then closes the connection.
			r := NewReader(c, Options{CRC: true})
			ulpdu, err := r.Next()
			if err != nil {
				t.Fatalf("no Terminate: %v", err)
			}
			th, _, err := rdmap.ParseTerminate(ulpdu[18:])
			if err != nil || ulpdu[1]&0x0f != byte(rdmap.OpTerminate) || !errors.Is(th.Err(), tc.want) {
				t.Fatalf("terminate % x: %v", ulpdu, err)
			}
			if got := [2]byte{ulpdu[18], ulpdu[19]}; got != tc.triple {
				t.Fatalf("Terminate Layer/EType %#02x, Error Code %#02x; want %#02x, %#02x", got[0], got[1], tc.triple[0], tc.triple[1])
			}
			expectClosed(t, c)
			if w := waitC(t, b.RCQ); w.Status != rdmap.StatusWRFlushErr {
				t.Fatalf("%+v", w)
			}
			if !errors.Is(b.QP.Err(), tc.want) || !bytes.Equal(rbuf.Bytes(), make([]byte, 1024)) {
				t.Fatal(b.QP.Err())
			}
			conn.Close()
		})
	}
}

// A peer that disconnects in the middle of an FPDU, or of a message,
// never hangs the endpoint:
// outstanding work completes with WR_FLUSH_ERR.
// A peer whose stream ends inside an FPDU has lost the LLP stream; one
// whose stream ends between FPDUs (a FIN with no Terminate) disconnected:
// an error value of its own, and a DISCONNECTED event instead of
// STREAM_ERROR.
func TestPeerDisconnects(t *testing.T) {
	for _, cut := range []int{3, 20, 40, 0, 52} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			noLeaks(t)
			l, ch, b := listenFor(t, Config{NoCRC: true})
			rbuf := b.Reg(t, 64, rdmap.LocalWrite)
			b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}})
			c := rawDial(t, l.Addr().String())
			c.Write((&Frame{Rev: 1}).Append(nil))
			ReadFrame(c)
			conn := <-ch
			defer conn.Close()
			f, _ := AppendFPDU(nil, 0, Options{}, append([]byte{0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, make([]byte, 30)...))
			c.Write(f[:cut])
			c.Close()
			if w := waitC(t, b.RCQ); w.Status != rdmap.StatusWRFlushErr {
				t.Fatalf("%+v", w)
			}
			orderly := cut == 0 || cut == len(f)
			if errors.Is(b.QP.Err(), ddp.ErrDisconnected) != orderly || errors.Is(b.QP.Err(), ddp.ErrLLPLost) == orderly {
				t.Fatalf("cut at %d of %d: %v", cut, len(f), b.QP.Err())
			}
			want := rdmap.EventStreamError
			if orderly {
				want = rdmap.EventDisconnected
			}
			if e := <-b.Events; e.Type != want {
				t.Fatalf("event %v, want %v", e.Type, want)
			}
		})
	}
}

func TestDialTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The peer accepts and then says nothing until the test ends.
	silent := make(chan struct{})
	defer close(silent)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			<-silent
		}
	}()
	a := newPeer(t, rdmap.QPConfig{})
	start := time.Now()
	_, err = Dial(context.Background(), "tcp", ln.Addr().String(), a.QP, &Config{HandshakeTimeout: 200 * time.Millisecond})
	if err == nil || time.Since(start) > time.Second {
		t.Fatalf("Dial = %v after %v", err, time.Since(start))
	}
}

// A queue pair closed the moment the connection has started it: Close
// closes the connection, whose goroutines must already be counted, and
// Accept, Dial and Close all return.
func TestConnCloseWhileStarting(t *testing.T) {
	noLeaks(t)
	for i := range 10 {
		l, accepted, b := listenFor(t, Config{})
		closed := rdmaptest.CloseWhenStarted(b.QP)
		a := newPeer(t, rdmap.QPConfig{})
		if _, err := Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &Config{}); err != nil {
			t.Fatalf("Dial %d: %v", i, err)
		}
		<-closed
		<-accepted
		a.QP.Close(tctx(t))
		l.Close()
	}
}
