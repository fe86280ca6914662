//go:build !js

package mpa

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/term"
)

// expectTerminate reads the next FPDU from c and checks that it is an
// RDMAP Terminate carrying want.
func expectTerminate(t *testing.T, c net.Conn, want *term.Error) {
	t.Helper()
	ulpdu, err := NewReader(c, Options{CRC: true}).Next()
	if err != nil {
		t.Errorf("no Terminate: %v", err)
		return
	}
	th, _, err := rdmap.ParseTerminate(ulpdu[ddp.UntaggedHeaderLen:])
	if err != nil || rdmap.Control(ulpdu[1]).Opcode() != rdmap.OpTerminate || !errors.Is(th.Err(), want) {
		t.Errorf("the FPDU % x (%v), want a Terminate %v", ulpdu, err, want)
	}
}

// "The initiator or responder MUST generate the TERM message that
// contains Layer 2, Error Type 0, Error Code 5 when it encounters any
// error locally for which the special Error Code is not defined in
// Section 8 before resetting the connection." (RFC 6581 §9.3) The
// initiator cannot lower its ORD to the responder's IRD: its first FPDU
// is that Terminate, instead of the RTR, and the connection closes.
func TestInitiatorLocalErrorTerminates(t *testing.T) {
	noLeaks(t)
	addr := rawResponder(t, func(c net.Conn, req Frame) {
		ack := ddp.Offer(1, 1, []ddp.RTR{ddp.RTRWrite})
		c.Write((&Frame{Reply: true, CRC: true, Rev: req.Rev, Enhanced: true, PrivateData: ack.Append(nil)}).Append(nil))
		expectTerminate(t, c, term.MPALocalCatastrophic)
		expectClosed(t, c)
	})
	a := newPeer(t, rdmap.QPConfig{IRD: 4, ORD: 4})
	_, err := Dial(tctx(t), "tcp", addr, rdmaptest.FixedORD{QueuePair: a.QP}, &Config{RTR: []ddp.RTR{ddp.RTRWrite}})
	if !errors.Is(err, term.MPALocalCatastrophic) {
		t.Fatalf("Dial = %v, want 2/0/5", err)
	}
}

// The same at the responder, whose ORD cannot be lowered to the
// initiator's IRD: the Reply, then, once the initiator's RTR has come
// (RFC 5044 §7.1.2 rule 6), the Terminate 2/0/5, and the connection
// closes; Accept returns the error.
func TestResponderLocalErrorTerminates(t *testing.T) {
	noLeaks(t)
	l, err := Listen(tctx(t), "tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := newPeer(t, rdmap.QPConfig{IRD: 4, ORD: 4})
	accepted := make(chan error, 1)
	go func() {
		r, err := l.Accept(tctx(t))
		if err == nil {
			_, err = r.Accept(rdmaptest.FixedORD{QueuePair: b.QP}, nil)
		}
		accepted <- err
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	offer := ddp.Offer(1, 1, []ddp.RTR{ddp.RTRWrite})
	c.Write((&Frame{Rev: 2, CRC: true, Enhanced: true, PrivateData: offer.Append(nil)}).Append(nil))
	rep, err := ReadFrame(c)
	if err != nil || !rep.Reply || rep.Reject {
		t.Fatalf("the Reply: %+v, %v", rep, err)
	}
	// Nothing comes before the initiator's first FPDU.
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("before the RTR the responder sent %d octets (%v)", n, err)
	}
	c.SetReadDeadline(time.Time{})
	// The RTR: a zero-length RDMA Write (RFC 6581 §9.2, flag C).
	h := ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpWrite))}}
	rtr, err := AppendFPDU(nil, 0, Options{CRC: true}, h.Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	c.Write(rtr)
	expectTerminate(t, c, term.MPALocalCatastrophic)
	expectClosed(t, c)
	c.Close() // the responder's close waits for this end's FIN
	if err := <-accepted; !errors.Is(err, term.MPALocalCatastrophic) {
		t.Fatalf("Accept = %v, want 2/0/5", err)
	}
}
