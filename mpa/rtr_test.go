//go:build !js

package mpa

import (
	"bytes"
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/term"
)

// Each startup model and RTR indication this initiator can use against
// this responder: the RTR is the initiator's first FPDU and is consumed
// without a completion (the zero-length Read's Response included), and
// the queue pairs then work.
func TestStartupModels(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want ddp.RTR
	}{
		{"write RTR", Config{RTR: []ddp.RTR{ddp.RTRWrite}}, ddp.RTRWrite},
		{"read RTR", Config{RTR: []ddp.RTR{ddp.RTRRead}}, ddp.RTRRead},
		{"read preferred", Config{RTR: []ddp.RTR{ddp.RTRRead, ddp.RTRWrite}}, ddp.RTRRead},
		{"client-server", Config{ClientServer: true}, ddp.RTRNone},
		{"revision 1", Config{Revision: 1}, ddp.RTRNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
			ac, bc := connectPair(t, Config{}, tc.cfg, a, b)
			n := ac.Negotiated()
			if n.RTR != tc.want || n.PeerToPeer != (tc.want != ddp.RTRNone) || bc.Negotiated().PeerToPeer != n.PeerToPeer {
				t.Fatalf("initiator %+v, responder %+v", n, bc.Negotiated())
			}
			if tc.cfg.Revision != 1 && n.PeerIRDORD == nil {
				t.Fatal("no enhanced data from the responder")
			}
			rdmaptest.Exercise(t, a, b)
			// The RTR made no completion on either side: Exercise saw
			// exactly its own.
		})
	}
}

// An initiator that offers only an RTR indication this responder does
// not take (a zero-length Send) cannot start: "it MUST send a TERM
// message ... Layer 2, Error Type 0, Error Code 7" (RFC 6581 §9.2), and
// Dial fails with that error; the responder's queue pair receives the
// Terminate.
func TestNoMatchingRTR(t *testing.T) {
	noLeaks(t)
	l, ch, b := listenFor(t, Config{})
	a := newPeer(t, rdmap.QPConfig{})
	_, err := Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &Config{RTR: []ddp.RTR{ddp.RTRSend}})
	if !errors.Is(err, term.MPANoMatchingRTR) {
		t.Fatalf("Dial: %v", err)
	}
	<-ch
	e := <-b.Events
	var te *term.Error
	if !errors.As(e.Err, &te) || !te.Remote || !errors.Is(te, term.MPANoMatchingRTR) {
		t.Fatalf("the responder ended with %v", e.Err)
	}
}

// An RDMA Write whose FPDU fails its CRC changes no octet of the region it
// names (RFC 5044 §6: "An MPA receiver MUST first verify the FPDU before
// passing the ULPDU to DDP"), and is answered with the MPA CRC error's
// Terminate (2/0/2).
func TestBadCRCWritePlacesNothing(t *testing.T) {
	noLeaks(t)
	l, ch, b := listenFor(t, Config{})
	region := b.Reg(t, 4096, rdmap.RemoteWrite)
	fill := bytes.Repeat([]byte{0x5a}, 4096)
	copy(region.Bytes(), fill)
	c := rawDial(t, l.Addr().String())
	c.Write((&Frame{Rev: 1, CRC: true}).Append(nil))
	if _, err := ReadFrame(c); err != nil {
		t.Fatal(err)
	}
	<-ch
	// A tagged, last-segment RDMA Write of 2000 octets at TO 0 of the
	// region, whose CRC is wrong.
	hdr := ddp.Header{Tagged: true, Last: true, DV: ddp.Version, STag: region.STag()}
	hdr.RsvdULP[0] = byte(rdmap.MakeControl(rdmap.OpWrite))
	ulpdu := append(hdr.Append(nil), bytes.Repeat([]byte{0xee}, 2000)...)
	f, err := AppendFPDU(nil, 0, Options{CRC: true}, ulpdu)
	if err != nil {
		t.Fatal(err)
	}
	f[len(f)-1] ^= 0x01
	c.Write(f)
	r := NewReader(c, Options{CRC: true})
	u, err := r.Next()
	if err != nil {
		t.Fatalf("no Terminate: %v", err)
	}
	th, _, err := rdmap.ParseTerminate(u[ddp.UntaggedHeaderLen:])
	if err != nil || !errors.Is(th.Err(), term.MPACRCError) {
		t.Fatalf("Terminate %v, %v", th, err)
	}
	if !bytes.Equal(region.Bytes(), fill) {
		t.Fatal("the bad-CRC Write changed the region")
	}
}
