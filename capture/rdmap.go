package capture

import (
	"fmt"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// describeSegment fills in a DDP Segment's DDP and RDMAP fields and note.
func describeSegment(r *Record, seg []byte) {
	r.Raw = seg
	h, hl, err := ddp.ParseHeader(seg)
	if err != nil {
		r.Note = fmt.Sprintf("DDP header unreadable: %v", err)
		return
	}
	r.DDP = &DDP{Tagged: h.Tagged, Last: h.Last, STag: h.STag, TO: h.TO, QN: h.QN, MSN: h.MSN, MO: h.MO}
	payload := seg[hl:]
	op := rdmap.Control(h.RsvdULP[0]).Opcode()
	opv := uint8(op)
	r.Opcode, r.Op = &opv, op.String()
	pl := len(payload)
	r.PayloadLen = &pl
	last := ""
	if h.Last {
		last = " Its Last flag is set: the message is complete once every one of its segments is placed." + orderNote(r)
	}
	switch {
	case h.DV != ddp.Version:
		r.Note = fmt.Sprintf("DDP version %d: not one this decoder knows.", h.DV)
	case op == rdmap.OpWrite:
		r.Note = fmt.Sprintf("RDMA Write: %d bytes for the peer's memory at STag %#08x, TO %#x. The receiver places them there directly, with no receive buffer involved, if the STag is valid and grants remote write over those octets; otherwise it places nothing and answers with a Terminate.%s", pl, h.STag, h.TO, last)
	case op == rdmap.OpReadResponse:
		r.Note = fmt.Sprintf("RDMA Read Response: %d bytes read from the peer, to be placed into STag %#08x at TO %#x, the sink its Read Request named.%s", pl, h.STag, h.TO, last)
	case op == rdmap.OpReadRequest:
		rr, _, err := rdmap.ParseReadRequest(payload)
		if err != nil {
			r.Note = fmt.Sprintf("RDMA Read Request, unreadable: %v", err)
			break
		}
		r.ReadReq = &ReadRequest{SinkSTag: rr.SinkSTag, SinkTO: rr.SinkTO, Size: rr.RDMARDSZ, SrcSTag: rr.SrcSTag, SrcTO: rr.SrcTO}
		r.Note = fmt.Sprintf("RDMA Read Request (queue 1, MSN %d): asks the peer for %d bytes from its STag %#08x at TO %#x, to be placed here into STag %#08x at TO %#x.", h.MSN, rr.RDMARDSZ, rr.SrcSTag, rr.SrcTO, rr.SinkSTag, rr.SinkTO)
	case op == rdmap.OpTerminate:
		t, _, err := rdmap.ParseTerminate(payload)
		if err != nil {
			r.Note = fmt.Sprintf("Terminate, unreadable: %v", err)
			break
		}
		e := t.Err()
		r.Terminate = &Terminate{Layer: uint8(t.Layer), EType: t.EType, ECode: t.Code, LayerName: t.Layer.String(), Name: e.Name()}
		r.Note = fmt.Sprintf("Terminate: the sender stopped the stream because of a %s error: %s (layer %d, type %d, code %#02x). Nothing more is placed on this stream.", t.Layer, e.Name(), t.Layer, t.EType, t.Code)
		r.Note += siwTerminateNote(payload)
	case op.IsSend():
		if op.Invalidates() {
			inv := uint32(h.RsvdULP[1])<<24 | uint32(h.RsvdULP[2])<<16 | uint32(h.RsvdULP[3])<<8 | uint32(h.RsvdULP[4])
			r.InvSTag = &inv
		}
		r.Note = fmt.Sprintf("%s: %d bytes go into the peer's next posted receive buffer (queue %d, message MSN %d, at offset MO %d).", op, pl, h.QN, h.MSN, h.MO)
		if h.Last {
			r.Note += " Its Last flag is set: the receive completes once every segment of the message is placed." + orderNote(r)
			if r.InvSTag != nil {
				r.Note += fmt.Sprintf(" It also invalidates the peer's STag %#08x.", *r.InvSTag)
			}
		}
	case op.Valid() && op > rdmap.OpTerminate:
		describeRFC7306(r, &h, op, payload)
	default:
		r.Note = fmt.Sprintf("RDMAP opcode %d is reserved: the receiver must terminate the stream.", op)
	}
}

// orderNote is what a note on a segment with the Last flag adds for
// the transport: over MPA/TCP the segments come in stream order, so the
// earlier ones are in; over SCTP, with unordered delivery (RFC 5043
// §10), some can arrive after this one.
func orderNote(r *Record) string {
	if r.Transport == "sctp" {
		return " Over SCTP's unordered delivery some can arrive after this one."
	}
	return " Over TCP the earlier ones came before it in the stream."
}

// describeRFC7306 fills in the fields and note of RFC 7306's messages:
// the Atomic Request and Atomic Response, and Immediate Data with and
// without Solicited Event.
func describeRFC7306(r *Record, h *ddp.Header, op rdmap.Opcode, payload []byte) {
	switch op {
	case rdmap.OpAtomicRequest:
		a, _, err := rdmap.ParseAtomicRequest(payload)
		if err != nil || len(payload) != rdmap.AtomicRequestLen {
			r.Note = fmt.Sprintf("Atomic Request of %d bytes, not 52: the responder must terminate the stream.", len(payload))
			return
		}
		da := &Atomic{AOpCode: uint8(a.Op), AOp: a.Op.String(), RequestID: a.ReqID, STag: a.STag, TO: a.TO,
			CompareData: a.CompareData, CompareMask: a.CompareMask}
		r.Atomic = da
		switch a.Op {
		case rdmap.FetchAdd:
			da.AddData, da.AddMask = &a.AddSwapData, &a.AddSwapMask
			r.Note = fmt.Sprintf("Atomic Request (queue 1, MSN %d, Request Identifier %d): FetchAdd adds %#x to the peer's 64-bit word at STag %#08x, TO %#x", h.MSN, a.ReqID, a.AddSwapData, a.STag, a.TO)
			if a.AddSwapMask != 0 {
				r.Note += fmt.Sprintf(", field by field (Add Mask %#x marks each field's top bit, whose carry is dropped)", a.AddSwapMask)
			}
			r.Note += "; the peer answers with the word's value before."
		case rdmap.CmpSwap:
			da.SwapData, da.SwapMask = &a.AddSwapData, &a.AddSwapMask
			r.Note = fmt.Sprintf("Atomic Request (queue 1, MSN %d, Request Identifier %d): CmpSwap: if the peer's 64-bit word at STag %#08x, TO %#x equals %#x (in the bits of Compare Mask %#x), its bits of Swap Mask %#x become those of %#x; the peer answers with the word's value before.",
				h.MSN, a.ReqID, a.STag, a.TO, a.CompareData, a.CompareMask, a.AddSwapMask, a.AddSwapData)
		default:
			r.Note = fmt.Sprintf("Atomic Request with AOpCode %d, which RFC 7306 does not define: the responder must refuse it.", a.Op)
			return
		}
		if a.TO%8 != 0 {
			r.Note += " Its TO is not a multiple of 8: unless the region's memory starts off an 8-byte boundary, the responder refuses it (RFC 7306 §8.2: Terminate 0x0/0x2/0x07)."
		}
	case rdmap.OpAtomicResponse:
		a, _, err := rdmap.ParseAtomicResponse(payload)
		if err != nil || len(payload) != rdmap.AtomicResponseLen {
			r.Note = fmt.Sprintf("Atomic Response of %d bytes, not 12: the requester must terminate the stream.", len(payload))
			return
		}
		r.AtomicResp = &AtomicResponse{OrigRequestID: a.OrigReqID, OrigValue: a.OrigValue}
		r.Note = fmt.Sprintf("Atomic Response (queue 3, MSN %d): answers the Atomic Request with Request Identifier %d; the word held %#x before it. The requester's atomic completes now.", h.MSN, a.OrigReqID, a.OrigValue)
	case rdmap.OpImmediate, rdmap.OpImmediateSE:
		d, _, err := rdmap.ParseImmediateData(payload)
		if err != nil || len(payload) != rdmap.ImmediateDataLen || h.MO != 0 {
			r.Note = fmt.Sprintf("%s of %d bytes at MO %d: it must be exactly 8 bytes (RFC 7306 §6.3); the receiver terminates the stream.", op, len(payload), h.MO)
			return
		}
		r.Immediate = &d.Data
		r.Note = fmt.Sprintf("%s: 8 bytes, %#016x, go into the peer's next posted receive buffer (queue 0, MSN %d), whose completion reports them", op, d.Data, h.MSN)
		if op == rdmap.OpImmediateSE {
			r.Note += " and asks for a Solicited Event"
		}
		r.Note += ". If an RDMA Write came just before, this is RDMA Write with Immediate Data: the receive completes once that Write is placed."
	}
}

// siwTerminateNote says when a Terminate Control (its first three
// octets) looks like Linux siw's on a little-endian machine: siw's struct
// iwarp_terminate uses bitfields, so its Layer and Error Type nibbles go
// out swapped and its M, D and R bits land in the low bits of the third
// octet, which RFC 5040 §4.8 reserves. The note is given when the swapped
// reading is a registered triple (RFC 6580) and either the RFC reading is
// not, or the reserved bits hold what would be siw's M, D, R.
func siwTerminateNote(ctl []byte) string {
	if len(ctl) < 3 {
		return ""
	}
	known := term.Known
	layer, etype, code := term.Layer(ctl[0]>>4), ctl[0]&0xf, ctl[1]
	sl, se := term.Layer(etype), uint8(layer)
	if !known(sl, se, code) || sl == layer {
		return ""
	}
	odd := !known(layer, etype, code)
	siwBits := ctl[2]&0xe0 == 0 && ctl[2]&0x07 != 0
	if !odd && !siwBits {
		return ""
	}
	how := "looks like"
	if !odd {
		how = "may be"
	}
	return fmt.Sprintf(" This %s Linux siw's Terminate header on a little-endian machine, whose Layer and Error Type nibbles are swapped: read swapped it is %s / %s (layer %d, type %d, code %#02x).",
		how, sl, term.New(sl, se, code).Name(), sl, se, code)
}
