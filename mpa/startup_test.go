//go:build !js

package mpa

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// rawResponder listens on loopback and runs answer on the first
// connection after reading its MPA Request Frame: a responder written by
// hand, to give the initiator what a correct one never sends.
func rawResponder(t *testing.T, answer func(c net.Conn, req Frame)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		req, err := ReadFrame(c)
		if err != nil {
			t.Errorf("the initiator's Request: %v", err)
			return
		}
		answer(c, req)
	}()
	return ln.Addr().String()
}

// expectSilentClose fails unless the peer closes c without sending
// another octet.
func expectSilentClose(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Error("the initiator left the TCP connection open")
	} else if n > 0 {
		t.Errorf("the initiator sent %d octets after the Reply", n)
	}
}

// "If the MPA Reply Frame is improperly formatted, the implementation
// MUST close the TCP connection and exit MPA." (RFC 5044 §7.1.2 rule 3);
// "If a received "Key" does not match the expected value ... the TCP/DDP
// connection MUST be closed, and an error returned to the ULP." (rule 5);
// "MPA implementations MUST use the difference between the MPA Request
// Frame and the MPA Reply Frame to check for incorrect
// "Initiator/Initiator" startups." (rule 8). Each answer below is such a
// Reply: Dial fails with code 4 (Invalid MPA Request Frame or MPA
// Response Frame received) and the connection is closed with nothing
// sent after the Request.
func TestInitiatorRejectsBadReply(t *testing.T) {
	enhanced := ddp.EnhancedData{IRD: 8, ORD: 8}
	for _, tc := range []struct {
		name  string
		reply func(req Frame) []byte
	}{
		{"a Request comes back (Initiator/Initiator)", func(req Frame) []byte {
			f := Frame{CRC: true, Rev: req.Rev, Enhanced: req.Enhanced, PrivateData: req.PrivateData}
			return f.Append(nil)
		}},
		{"Reply Key wrong", func(req Frame) []byte {
			b := (&Frame{Reply: true, CRC: true, Rev: req.Rev, Enhanced: true, PrivateData: enhanced.Append(nil)}).Append(nil)
			b[0] ^= 0x20 // "mpa" where "MPA" is due
			return b
		}},
		{"Rev above the Request's", func(req Frame) []byte {
			return (&Frame{Reply: true, CRC: true, Rev: req.Rev + 1, Enhanced: true, PrivateData: enhanced.Append(nil)}).Append(nil)
		}},
		{"an unenhanced Reply to an enhanced Request", func(req Frame) []byte {
			return (&Frame{Reply: true, CRC: true, Rev: req.Rev}).Append(nil)
		}},
		{"PD_Length above 512", func(req Frame) []byte {
			b := (&Frame{Reply: true, CRC: true, Rev: req.Rev}).Append(nil)
			b[18], b[19] = 0x02, 0x01 // 513
			return append(b, make([]byte, 513)...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			addr := rawResponder(t, func(c net.Conn, req Frame) {
				c.Write(tc.reply(req))
				expectSilentClose(t, c)
			})
			a := newPeer(t, rdmap.QPConfig{})
			_, err := Dial(tctx(t), "tcp", addr, a.QP, &Config{})
			if !errors.Is(err, term.MPAInvalidFrame) {
				t.Fatalf("Dial = %v, want code 4 (%v)", err, term.MPAInvalidFrame)
			}
		})
	}
}

// A Reply whose connection model (Control Flag A) is not the Request's:
// "If Control Flag A is 1 in the MPA Request message, then the responder
// MUST set Control Flag A to 1 in the MPA reply message" (RFC 6581 §9.2).
// The ends have no "mutually compatible connection model", so the
// initiator sends the TERM that "MUST contain Layer 2, Error Type 0, Error
// Code 7" and ends the connection.
func TestInitiatorTerminatesOnModelMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ack  ddp.EnhancedData // the responder's answer
	}{
		{"client-server answer to a peer-to-peer Request", Config{}, ddp.EnhancedData{IRD: 8, ORD: 8}},
		{"peer-to-peer answer to a client-server Request", Config{ClientServer: true}, func() ddp.EnhancedData {
			e := ddp.Offer(8, 8, []ddp.RTR{ddp.RTRWrite})
			if !e.PeerToPeer {
				t.Fatal("the offer is not peer-to-peer")
			}
			return e
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			addr := rawResponder(t, func(c net.Conn, req Frame) {
				if !req.Enhanced {
					t.Errorf("an unenhanced Request: %v", req)
					return
				}
				c.Write((&Frame{Reply: true, CRC: true, Rev: req.Rev, Enhanced: true, PrivateData: tc.ack.Append(nil)}).Append(nil))
				ulpdu, err := NewReader(c, Options{CRC: true}).Next()
				if err != nil {
					t.Errorf("no Terminate: %v", err)
					return
				}
				th, _, err := rdmap.ParseTerminate(ulpdu[18:])
				if err != nil || ulpdu[1]&0x0f != byte(rdmap.OpTerminate) || !errors.Is(th.Err(), term.MPANoMatchingRTR) {
					t.Errorf("the initiator's first FPDU % x (%v), want a Terminate 2/0/7", ulpdu, err)
				}
				expectClosed(t, c)
			})
			a := newPeer(t, rdmap.QPConfig{})
			_, err := Dial(tctx(t), "tcp", addr, a.QP, &tc.cfg)
			if !errors.Is(err, term.MPANoMatchingRTR) {
				t.Fatalf("Dial = %v, want 2/0/7", err)
			}
		})
	}
}

// "If the MPA Request Frame is properly formatted but the Private Data is
// not acceptable, the implementation SHOULD return an MPA Reply Frame
// with the Rejected Connection bit set to '1'; ... the implementation
// MUST exit MPA, leaving the TCP connection open. The ULP may close TCP
// or use the connection for other purposes." (RFC 5044 §7.1.2 rule 2),
// and at the initiator "if the Rejected Connection bit is set to '1', the
// implementation MUST exit MPA, leaving the TCP connection open" (rule
// 3). Both ends use the connection after the Reject; the responder's
// Listener no longer counts it against the peer's limit.
func TestRejectLeavesTCPOpen(t *testing.T) {
	noLeaks(t)
	l, err := Listen(tctx(t), "tcp", "127.0.0.1:0", &Config{MaxPerPeer: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			r, err := l.Accept(tctx(t))
			if err != nil {
				return err
			}
			nc, err := r.RejectKeepOpen([]byte("not here"), 2, 3)
			if err != nil {
				return err
			}
			defer nc.Close()
			if _, err := nc.Write([]byte("other purposes")); err != nil {
				return err
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(nc, got); err != nil || string(got) != "ack!" {
				return errors.New("the initiator's answer did not come: " + string(got))
			}
			if _, err := r.RejectKeepOpen(nil, 0, 0); err == nil {
				return errors.New("a second decision on one Request was taken")
			}
			return nil
		}()
	}()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	a := newPeer(t, rdmap.QPConfig{})
	_, err = Client(tctx(t), nc, a.QP, &Config{})
	var re *ddp.RejectedError
	if !errors.As(err, &re) || string(re.PrivateData) != "not here" || re.Enhanced == nil || re.Enhanced.IRD != 2 || re.Enhanced.ORD != 3 {
		t.Fatalf("Client = %v", err)
	}
	got := make([]byte, len("other purposes"))
	if _, err := io.ReadFull(nc, got); err != nil || string(got) != "other purposes" {
		t.Fatalf("after the Reject: %q, %v", got, err)
	}
	if _, err := nc.Write([]byte("ack!")); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	// The rejected connection left the Listener's count: with MaxPerPeer
	// 1, a connection from the same address starts while it is open.
	go func() {
		r, err := l.Accept(tctx(t))
		if err == nil {
			r.Reject([]byte("closed"), 0, 0)
		}
	}()
	b := newPeer(t, rdmap.QPConfig{})
	_, err = Dial(tctx(t), "tcp", l.Addr().String(), b.QP, &Config{})
	if !errors.As(err, &re) || !bytes.Equal(re.PrivateData, []byte("closed")) {
		t.Fatalf("a second connection from the peer: %v", err)
	}
}

// Reject is the other choice rule 2 leaves the ULP: the Reply, then the
// TCP connection closed.
func TestRejectCloses(t *testing.T) {
	noLeaks(t)
	l, err := Listen(tctx(t), "tcp", "127.0.0.1:0", &Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if r, err := l.Accept(tctx(t)); err == nil {
			r.Reject(nil, 0, 0)
		}
	}()
	nc := rawDial(t, l.Addr().String())
	nc.Write((&Frame{CRC: true, Rev: 1}).Append(nil))
	rep, err := ReadFrame(nc)
	if err != nil || !rep.Reply || !rep.Reject {
		t.Fatalf("%v, %v", rep, err)
	}
	expectSilentClose(t, nc)
}
