package ddp

import (
	"errors"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// The IRD/ORD rules of RFC 6581 §9.1, each end's view.
func TestNegotiateIRDORD(t *testing.T) {
	const all = uint16(IRDORDNoNegotiation)
	for _, tc := range []struct {
		name                  string
		iIRD, iORD            int // the initiator's
		rIRD, rORD            int // the responder's
		replyIRD, replyORD    uint16
		respORD, initORD      int // what each end uses after
		insufficientInitiator bool
	}{
		// "The responder MUST set its ORD at most to the initiator IRD."
		{"responder ORD lowered", 4, 8, 16, 16, 16, 4, 4, 8, false},
		// "the initiator MUST set ... its ORD at most to the responder IRD"
		{"initiator ORD lowered", 16, 16, 2, 16, 2, 16, 16, 2, false},
		{"zero both ways", 0, 0, 8, 8, 8, 0, 0, 0, false},
		{"responder ORD at the initiator IRD", 2, 8, 8, 8, 8, 2, 2, 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offer := Offer(tc.iIRD, tc.iORD, nil)
			reply, respORD := Answer(offer, tc.rIRD, tc.rORD, nil)
			if reply.IRD != tc.replyIRD || reply.ORD != tc.replyORD || respORD != tc.respORD {
				t.Fatalf("Answer: %v, ORD %d", reply, respORD)
			}
			initORD, rtr, err := Settle(offer, reply, tc.iIRD, tc.iORD, nil)
			if err != nil || rtr != RTRNone || initORD != tc.initORD {
				t.Fatalf("Settle: ORD %d, RTR %v, %v", initORD, rtr, err)
			}
		})
	}
	// A responder that answers an ORD beyond the initiator's IRD (it did
	// not lower it): "If the initiator does not have sufficient resources
	// for the required IRD, it MUST send a TERM message" with 2/0/6.
	offer := Offer(2, 8, nil)
	_, _, err := Settle(offer, EnhancedData{IRD: 8, ORD: 5}, 2, 8, nil)
	if !errors.Is(err, term.MPAInsufficientIRD) {
		t.Fatalf("a responder ORD of 5 to an initiator IRD of 2: %v", err)
	}
	// 0x3FFF: "The responder MUST respond to an initiator ORD value of
	// 0x3FFF by leaving its local endpoint IRD value unchanged and setting
	// the IRD to 0x3FFF in its reply message" and likewise for the IRD;
	// "The initiator MUST leave its local endpoint ORD value unchanged
	// upon receiving a responder IRD value of 0x3FFF" and its IRD for an
	// ORD of 0x3FFF.
	offer = EnhancedData{IRD: all, ORD: all}
	reply, respORD := Answer(offer, 3, 5, nil)
	if reply.IRD != all || reply.ORD != all || respORD != 5 {
		t.Fatalf("Answer to 0x3FFF: %v, ORD %d", reply, respORD)
	}
	initORD, _, err := Settle(Offer(1, 7, nil), EnhancedData{IRD: all, ORD: all}, 1, 7, nil)
	if err != nil || initORD != 7 {
		t.Fatalf("Settle with 0x3FFF: ORD %d, %v", initORD, err)
	}
	// Values beyond 14 bits are sent as the largest that is not 0x3FFF.
	if e := Offer(1<<20, 1<<20, nil); e.IRD != all-1 || e.ORD != all-1 {
		t.Fatalf("Offer of large values: %v", e)
	}
}

// The connection model and the RTR indications of RFC 6581 §9.2.
func TestNegotiateRTR(t *testing.T) {
	w, r, s := RTRWrite, RTRRead, RTRSend
	for _, tc := range []struct {
		name    string
		offers  []RTR // the initiator's, in its order of preference
		accepts []RTR // the responder's
		flags   []RTR // the Reply's flags
		want    RTR
		noMatch bool
	}{
		{"client-server", nil, []RTR{w, r}, nil, RTRNone, false},
		// "For each initiator-supported RTR indication option, the
		// responder SHOULD set the corresponding Control Flag if the
		// responder can support that option"
		{"write", []RTR{w, r, s}, []RTR{w, r}, []RTR{w, r}, w, false},
		{"read preferred", []RTR{r, w}, []RTR{w, r}, []RTR{w, r}, r, false},
		{"send only", []RTR{s}, []RTR{w, r, s}, []RTR{s}, s, false},
		// "If the responder does not support any of the initiator-specified
		// RTR indication options, then the responder MUST set at least one
		// RTR indication type option it supports." ... "If the initiator is
		// not able to generate any of the responder-supported RTR
		// indications, then it MUST send a TERM message ... Layer 2, Error
		// Type 0, Error Code 7."
		{"no match", []RTR{s}, []RTR{w, r}, []RTR{w, r}, RTRNone, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offer := Offer(8, 8, tc.offers)
			// "The initiator MUST set Control Flag A to 1 for the
			// peer-to-peer model." / "... to 0 for the client-server
			// model."
			if offer.PeerToPeer != (len(tc.offers) > 0) {
				t.Fatalf("offer %v", offer)
			}
			for _, x := range tc.offers {
				if !offer.has(x) {
					t.Fatalf("offer %v lacks %v", offer, x)
				}
			}
			reply, _ := Answer(offer, 8, 8, tc.accepts)
			// "If Control Flag A is 1 in the MPA Request message, then the
			// responder MUST set Control Flag A to 1" and "MUST set Control
			// Flag A to 0 if Control Flag A is 0 in the request."
			if reply.PeerToPeer != offer.PeerToPeer {
				t.Fatalf("reply %v to offer %v", reply, offer)
			}
			for _, x := range []RTR{w, r, s} {
				want := false
				for _, f := range tc.flags {
					want = want || f == x
				}
				if reply.has(x) != want {
					t.Fatalf("reply %v, want flags %v", reply, tc.flags)
				}
			}
			_, rtr, err := Settle(offer, reply, 8, 8, tc.offers)
			if tc.noMatch {
				if !errors.Is(err, term.MPANoMatchingRTR) {
					t.Fatalf("no common RTR: %v", err)
				}
				return
			}
			if err != nil || rtr != tc.want {
				t.Fatalf("RTR %v, %v; want %v", rtr, err, tc.want)
			}
		})
	}
	// A zero-length RDMA Read Request takes one of the responder's IRD:
	// with an ORD of 0 the initiator chooses another indication.
	offer := Offer(8, 0, []RTR{r, w})
	if offer.has(r) || !offer.has(w) {
		t.Fatalf("with ORD 0 the offer is %v, want the write RTR alone", offer)
	}
	if o := Offer(8, 0, []RTR{r}); o.PeerToPeer {
		t.Fatalf("with ORD 0 and only the read RTR, the offer is %v", o)
	}
	offer.set(r) // as a peer that offers it anyway
	reply, _ := Answer(offer, 0, 8, []RTR{w, r})
	if _, rtr, err := Settle(offer, reply, 8, 0, []RTR{r, w}); err != nil || rtr != w {
		t.Fatalf("with ORD 0: %v, %v", rtr, err)
	}
	// A reply whose connection model differs from the offer's: no
	// "mutually compatible connection model", so TERM 2/0/7 (§9.2).
	if _, _, err := Settle(Offer(8, 8, []RTR{w}), EnhancedData{IRD: 8, ORD: 8}, 8, 8, []RTR{w}); !errors.Is(err, term.MPANoMatchingRTR) {
		t.Fatalf("a client-server reply to a peer-to-peer offer: %v", err)
	}
	p2p := EnhancedData{IRD: 8, ORD: 8}
	p2p.PeerToPeer = true
	p2p.set(w)
	if _, _, err := Settle(Offer(8, 8, nil), p2p, 8, 8, nil); !errors.Is(err, term.MPANoMatchingRTR) {
		t.Fatalf("a peer-to-peer reply to a client-server offer: %v", err)
	}
}

func TestParseRTR(t *testing.T) {
	for r := RTRNone; r <= RTRSend; r++ {
		if got, err := ParseRTR(r.String()); err != nil || got != r {
			t.Fatalf("%v: %v, %v", r, got, err)
		}
	}
	if _, err := ParseRTR("zero"); err == nil {
		t.Fatal("an unknown name parsed")
	}
}

// FuzzNegotiate runs RFC 6581 §9's negotiation on any offer the
// initiator's wire may carry and any limits of the two ends, and checks
// the rules the RFC states as MUSTs: the responder never raises its ORD
// and sets it at most to the initiator's IRD (0x3FFF aside), answers
// 0x3FFF with 0x3FFF, matches Control Flag A, and names an RTR indication
// in the peer-to-peer model; the initiator never raises its ORD either,
// and an answer made by Answer to an offer made by Offer always settles
// (no code 6 or 7) when the two ends share an RTR indication.
func FuzzNegotiate(f *testing.F) {
	f.Add([]byte{0x80, 0x10, 0x00, 0x10}, uint16(16), uint16(16), uint16(8), uint16(8), uint8(7), uint8(3))
	f.Add([]byte{0x7f, 0xff, 0x3f, 0xff}, uint16(0), uint16(0), uint16(1), uint16(1), uint8(0), uint8(0))
	f.Add([]byte{0xe0, 0x00, 0x00, 0x00}, uint16(4), uint16(0), uint16(128), uint16(128), uint8(4), uint8(2))
	f.Fuzz(func(t *testing.T, wire []byte, iIRD, iORD, rIRD, rORD uint16, iRTR, rRTR uint8) {
		rtrs := func(bits uint8) []RTR {
			var out []RTR
			for i, r := range []RTR{RTRSend, RTRWrite, RTRRead} {
				if bits&(1<<i) != 0 {
					out = append(out, r)
				}
			}
			return out
		}
		limit := func(v uint16) int { return int(v % 0x4000) }
		ird, ord, rird, rord := limit(iIRD), limit(iORD), limit(rIRD), limit(rORD)
		accepts := rtrs(rRTR)

		// Any offer off the wire, answered.
		if offer, ok := ParseEnhancedData(wire); ok {
			reply, newORD := Answer(offer, rird, rord, accepts)
			if newORD > rord || newORD < 0 {
				t.Fatalf("Answer raised the responder's ORD %d to %d", rord, newORD)
			}
			if offer.IRD != IRDORDNoNegotiation && (newORD > int(offer.IRD) || (reply.ORD != IRDORDNoNegotiation && reply.ORD > offer.IRD)) {
				t.Fatalf("the responder's ORD %d (sent %d) exceeds the initiator's IRD %d", newORD, reply.ORD, offer.IRD)
			}
			if offer.ORD == IRDORDNoNegotiation && reply.IRD != IRDORDNoNegotiation {
				t.Fatalf("an initiator ORD of 0x3FFF answered with IRD %#x", reply.IRD)
			}
			if offer.IRD == IRDORDNoNegotiation && (reply.ORD != IRDORDNoNegotiation || newORD != rord) {
				t.Fatalf("an initiator IRD of 0x3FFF answered with ORD %#x, local ORD %d", reply.ORD, newORD)
			}
			if reply.PeerToPeer != offer.PeerToPeer {
				t.Fatalf("Control Flag A %t answered with %t", offer.PeerToPeer, reply.PeerToPeer)
			}
			if offer.PeerToPeer && len(accepts) > 0 && !reply.AnyRTR() {
				t.Fatal("a peer-to-peer answer names no RTR indication")
			}
			if !offer.PeerToPeer && reply.AnyRTR() {
				t.Fatal("a client-server answer names an RTR indication")
			}
		}

		// An offer this end makes, answered by a responder of this
		// package, settled.
		mine := rtrs(iRTR)
		offer := Offer(ird, ord, mine)
		reply, _ := Answer(offer, rird, rord, accepts)
		newORD, rtr, err := Settle(offer, reply, ird, ord, mine)
		if newORD > ord || newORD < 0 {
			t.Fatalf("Settle raised the initiator's ORD %d to %d", ord, newORD)
		}
		shared := false
		for _, r := range mine {
			if offer.has(r) && reply.has(r) && (r != RTRRead || newORD > 0) {
				shared = true
			}
		}
		switch {
		case !offer.PeerToPeer && (err != nil || rtr != RTRNone):
			t.Fatalf("client-server: %v, %v", rtr, err)
		case offer.PeerToPeer && shared && err != nil:
			t.Fatalf("peer-to-peer with a shared RTR indication: %v (offer %v, reply %v)", err, offer, reply)
		case err == nil && offer.PeerToPeer && (!offer.has(rtr) || !reply.has(rtr)):
			t.Fatalf("settled on %v, which offer %v and reply %v do not share", rtr, offer, reply)
		}
	})
}
