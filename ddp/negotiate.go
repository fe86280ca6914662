package ddp

import (
	"fmt"

	"github.com/iwarpgo/iwarp/term"
)

// RTR names an RTR indication (RFC 6581 §9.2): the zero-length message an
// initiator sends first in the peer-to-peer connection model, before any
// other, so that the responder (which sends nothing before it has
// received something, RFC 5044 §7.1.2 rule 4) may start.
type RTR uint8

// The RTR indications. RTRNone is the client-server model: no RTR.
const (
	RTRNone  RTR = iota
	RTRWrite     // a zero-length RDMA Write (Control Flag C)
	RTRRead      // a zero-length RDMA Read Request (Control Flag D)
	RTRSend      // a zero-length Send (Control Flag B)
)

func (r RTR) String() string {
	switch r {
	case RTRNone:
		return "none"
	case RTRWrite:
		return "write"
	case RTRRead:
		return "read"
	case RTRSend:
		return "send"
	}
	return fmt.Sprintf("RTR(%d)", uint8(r))
}

// ParseRTR reads an RTR indication's name as String writes it.
func ParseRTR(s string) (RTR, error) {
	for r := RTRNone; r <= RTRSend; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return RTRNone, fmt.Errorf("ddp: unknown RTR indication %q (write, read, send or none)", s)
}

// has reports whether e's Control Flags include r.
func (e EnhancedData) has(r RTR) bool {
	switch r {
	case RTRWrite:
		return e.WriteRTR
	case RTRRead:
		return e.ReadRTR
	case RTRSend:
		return e.SendRTR
	}
	return false
}

func (e *EnhancedData) set(r RTR) {
	switch r {
	case RTRWrite:
		e.WriteRTR = true
	case RTRRead:
		e.ReadRTR = true
	case RTRSend:
		e.SendRTR = true
	}
}

// field returns v as a 14-bit IRD or ORD: the largest value below
// IRDORDNoNegotiation when v does not fit, since all ones means "no
// negotiation".
func field(v int) uint16 {
	if v >= IRDORDNoNegotiation {
		return IRDORDNoNegotiation - 1
	}
	return uint16(max(v, 0))
}

// The negotiation of RFC 6581 §9.3, once for both lower layers (MPA's
// Request and Reply Frames, DDP over SCTP's Enhanced Initiate and
// Accept): Offer (initiator), Answer (responder), Settle (initiator).

// Offer returns the enhanced data an initiator sends: its IRD and ORD
// and, when rtrs is not empty, the peer-to-peer model with the RTR
// indications it can send. "The initiator MUST set Control Flag A to 1
// for the peer-to-peer model. The initiator MUST set each Control Flag B,
// C, and D to 1 for each of the options it supports" (§9.2). With an ORD
// of 0 it cannot send the zero-length RDMA Read Request (it takes one
// ORD, RFC 5040 §6.1), and does not offer it; if that leaves no RTR
// indication, the offer is for the client-server model.
func Offer(ird, ord int, rtrs []RTR) EnhancedData {
	e := EnhancedData{IRD: field(ird), ORD: field(ord)}
	for _, r := range rtrs {
		if r != RTRNone && (r != RTRRead || ord > 0) {
			e.PeerToPeer = true
			e.set(r)
		}
	}
	return e
}

// Answer returns the enhanced data a responder with the given IRD and
// ORD sends back for an initiator's offer, and the ORD the responder must
// use from then on (§9.1: "The responder MUST set its ORD at most to the
// initiator IRD."). accepts lists the RTR indications the responder takes;
// it is used only for the peer-to-peer model.
func Answer(offer EnhancedData, ird, ord int, accepts []RTR) (reply EnhancedData, newORD int) {
	reply = EnhancedData{IRD: field(ird), ORD: field(ord)}
	newORD = ord
	// "The responder MUST respond to an initiator ORD value of 0x3FFF by
	// leaving its local endpoint IRD value unchanged and setting the IRD
	// to 0x3FFF in its reply message."
	if offer.ORD == IRDORDNoNegotiation {
		reply.IRD = IRDORDNoNegotiation
	}
	// "The responder MUST respond to an initiator IRD value of 0x3FFF by
	// leaving its local endpoint ORD value unchanged, and setting ORD to
	// 0x3FFF in its reply message."
	if offer.IRD == IRDORDNoNegotiation {
		reply.ORD = IRDORDNoNegotiation
	} else if int(offer.IRD) < ord {
		newORD = int(offer.IRD)
		reply.ORD = offer.IRD
	}
	if !offer.PeerToPeer {
		// "The responder MUST set Control Flag A to 0 if Control Flag A
		// is 0 in the request."
		return reply, newORD
	}
	// "If Control Flag A is 1 in the MPA Request message, then the
	// responder MUST set Control Flag A to 1 in the MPA reply message.
	// For each initiator-supported RTR indication option, the responder
	// SHOULD set the corresponding Control Flag if the responder can
	// support that option" ... "If the responder does not support any of
	// the initiator-specified RTR indication options, then the responder
	// MUST set at least one RTR indication type option it supports."
	reply.PeerToPeer = true
	for _, r := range accepts {
		if offer.has(r) {
			reply.set(r)
		}
	}
	if !reply.AnyRTR() {
		for _, r := range accepts {
			reply.set(r)
		}
	}
	return reply, newORD
}

// Settle is the initiator's last step, on the responder's answer: it
// returns the ORD the initiator must use ("its ORD at most to the
// responder IRD", §9.1) and the RTR indication to send first, chosen from
// those both ends allow in the order of prefer (RTRNone in the
// client-server model). It fails with term.MPAInsufficientIRD when the
// responder's ORD exceeds the initiator's IRD, and with
// term.MPANoMatchingRTR when no RTR indication fits: the initiator then
// terminates the connection with that error (§9.1, §9.2). So does an
// answer whose connection model (Control Flag A) is not the offer's.
func Settle(offer, reply EnhancedData, ird, ord int, prefer []RTR) (newORD int, rtr RTR, err error) {
	newORD = ord
	// "The initiator MUST leave its local endpoint ORD value unchanged
	// upon receiving a responder IRD value of 0x3FFF."
	if reply.IRD != IRDORDNoNegotiation && int(reply.IRD) < ord {
		newORD = int(reply.IRD)
	}
	if offer.PeerToPeer != reply.PeerToPeer {
		// "If Control Flag A is 1 in the MPA Request message, then the
		// responder MUST set Control Flag A to 1 in the MPA reply
		// message"; "The responder MUST set Control Flag A to 0 if Control
		// Flag A is 0 in the request." (§9.2) The two ends have no
		// connection model in common, and the TERM for "failure to
		// negotiate a mutually compatible connection model or RTR option"
		// is "Layer 2, Error Type 0, Error Code 7".
		return ord, RTRNone, term.MPANoMatchingRTR.With("the responder's connection model (Control Flag A %t) differs from the offer's (%t)", reply.PeerToPeer, offer.PeerToPeer)
	}
	// "If the initiator does not have sufficient resources for the
	// required IRD, it MUST send a TERM message ... Layer 2, Error Type 0,
	// Error Code 6." 0x3FFF leaves the IRD to the ULP.
	if reply.ORD != IRDORDNoNegotiation && int(reply.ORD) > ird {
		return newORD, RTRNone, term.MPAInsufficientIRD.With("the responder's ORD %d exceeds this end's IRD %d", reply.ORD, ird)
	}
	if !offer.PeerToPeer {
		return newORD, RTRNone, nil
	}
	// "Upon receiving the MPA Accept Frame with Control Flag A set to 1,
	// the initiator MUST generate one of the negotiated RTR indications."
	for _, r := range prefer {
		if !offer.has(r) || !reply.has(r) {
			continue
		}
		if r == RTRRead && newORD == 0 {
			// A zero-length RDMA Read Request still takes one of the
			// responder's IRD slots (RFC 5040 §6.1).
			continue
		}
		return newORD, r, nil
	}
	// "If the initiator is not able to generate any of the
	// responder-supported RTR indications, then it MUST send a TERM
	// message ... Layer 2, Error Type 0, Error Code 7."
	return newORD, RTRNone, term.MPANoMatchingRTR.With("the responder takes %v; this end offered %v", reply, offer)
}

// RejectedError is returned by a connect call when the responder's ULP
// rejected the connection (MPA's Reply Frame with the R bit, DDP over
// SCTP's Reject): its Private Data and, for an enhanced set-up, its IRD
// and ORD, which "The initiator MUST pass ... to the ULP for both MPA
// Accept and Reject messages" (RFC 6581 §9.1).
type RejectedError struct {
	PrivateData []byte
	Enhanced    *EnhancedData
}

func (e *RejectedError) Error() string {
	s := fmt.Sprintf("iwarp: the peer rejected the connection (%d octets of private data", len(e.PrivateData))
	if e.Enhanced != nil {
		s += fmt.Sprintf("; its IRD %d, ORD %d", e.Enhanced.IRD, e.Enhanced.ORD)
	}
	return s + ")"
}
