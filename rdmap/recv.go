package rdmap

import (
	"encoding/binary"
	"errors"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

// receiver is the queue pair seen from its DDP stream: RDMAP's Data Sink
// side. Its methods run on the stream's receive goroutine.
type receiver QueuePair

// CheckSegment makes RFC 5040 §7.2's checks 2 and 3 ("The RDMA OpCode
// MUST be valid", "The RDMA Version MUST be valid") and Figure 4's rules
// tying each opcode to its buffer model and queue, before placement.
func (r *receiver) CheckSegment(h *ddp.Header) *term.Error {
	qp := (*QueuePair)(r)
	if !qp.heard.Load() {
		// The LLP may send now (ddp.Start's ReceiveFirst).
		qp.heard.Store(true)
	}
	c := Control(h.RsvdULP[0])
	if !c.ValidVersion() {
		return term.RDMAPInvalidVersion.With("RDMAP version %d", c.RV())
	}
	op := c.Opcode()
	if !op.Valid() {
		return term.RDMAPUnexpectedOpcode.With("reserved opcode %#x", uint8(op))
	}
	if op > OpTerminate {
		// "On incoming Atomic Requests, Atomic Responses, Immediate Data,
		// and Immediate Data with Solicited Event, the following MUST be
		// validated: ... The RDMA OpCode MUST be valid. The RDMA Version
		// MUST be valid." (RFC 7306 §8.2) "All RDMA Messages defined in
		// this specification MUST have: The RDMA Version (RV) field: 01b."
		// (§4.1)
		if c.RV() != Version {
			return term.RDMAPInvalidVersion.With("%v with RDMAP version %d (RFC 7306 requires 1)", op, c.RV())
		}
		// A queue pair without the extension answers as an RNIC that
		// does not implement it: "A Remote Operation Error or Unexpected
		// OpCode error will be reported by the remote peer if there is an
		// Immediate Data or Atomic Operation that is not supported by the
		// remote peer." (§1.1)
		if op.IsImmediate() && qp.cfg.NoImmediate {
			return term.RDMAPUnexpectedOpcode.With("%v: this queue pair implements no RFC 7306 Immediate Data", op)
		}
		if !op.IsImmediate() && qp.cfg.NoAtomics {
			return term.RDMAPUnexpectedOpcode.With("%v: this queue pair implements no RFC 7306 Atomic Operations", op)
		}
	}
	if h.Tagged != op.Tagged() {
		return term.RDMAPUnexpectedOpcode.With("%v in a DDP segment with T=%t", op, h.Tagged)
	}
	if !h.Tagged && h.QN != op.QN() {
		return term.RDMAPUnexpectedOpcode.With("%v on queue %d", op, h.QN)
	}
	if op.Invalidates() {
		// §7.2: "The Invalidate STag MUST be valid" and "The STag MUST be
		// associated to this RDMAP Stream". Checked here, before the
		// payload is placed, as well as when the Send is delivered.
		stag := u32(h.RsvdULP[1:5])
		if _, f := qp.pd.dev.lookup(qp, stag, 0); f != stagOK {
			return term.RDMAPProtCannotInvalidate.With("STag %#08x: %s", stag, f.rdmap().Name())
		}
		if qp.pd.dev.shared(stag) {
			return term.RDMAPProtCannotInvalidate.With("STag %#08x: %v", stag, ErrSharedSTag)
		}
	}
	if op == OpReadResponse {
		qp.mu.Lock()
		n := len(qp.reads)
		qp.mu.Unlock()
		if n == 0 {
			return term.RDMAPUnexpectedOpcode.With("RDMA Read Response with no RDMA Read outstanding")
		}
	}
	if op == OpAtomicResponse {
		qp.mu.Lock()
		n := len(qp.atomics)
		qp.mu.Unlock()
		if n == 0 {
			return term.RDMAPUnexpectedOpcode.With("Atomic Response with no Atomic Request outstanding")
		}
	}
	return nil
}

// TaggedBuffer resolves the STag of an RDMA Write (it needs remote write
// rights) or of an RDMA Read Response (sinkBuffer).
func (r *receiver) TaggedBuffer(h *ddp.Header) (ddp.TaggedBuffer, *term.Error) {
	qp := (*QueuePair)(r)
	if Control(h.RsvdULP[0]).Opcode() == OpReadResponse {
		return qp.sinkBuffer(h)
	}
	reg, f := qp.pd.dev.lookup(qp, h.STag, RemoteWrite)
	if f != stagOK {
		return ddp.TaggedBuffer{}, f.ddp().With("STag %#08x", h.STag)
	}
	return reg.tagged(), nil
}

// sinkBuffer resolves a Read Response segment to the Data Sink buffer of
// the outstanding RDMA Read it belongs to: the oldest whose Data Sink STag
// it names and whose buffer holds its TO (over an unordered LLP a later
// Response's segment may come first). It may write that buffer only, not
// the rest of the region it lies in: "An RNIC MUST ensure that a Remote
// Peer is not able to access memory outside of the buffer specified"
// (RFC 5040 §8.1.1 item 3), and the region grants no remote rights of its
// own. DDP checks the segment's end against it (Base or bounds
// violation).
func (qp *QueuePair) sinkBuffer(h *ddp.Header) (ddp.TaggedBuffer, *term.Error) {
	qp.mu.Lock()
	stag, found := false, false
	var sinkTO, n uint64
	// Over an ordered LLP (a window of one segment) only the oldest can be
	// under way; over an unordered one, those the stream's reassembly
	// window reaches.
	for _, rd := range qp.reads[:min(len(qp.reads), qp.stream.Window())] {
		if rd.sinkSTag != h.STag {
			continue
		}
		stag = true
		if h.TO >= rd.sinkTO && h.TO-rd.sinkTO < max(rd.n, 1) {
			sinkTO, n, found = rd.sinkTO, rd.n, true
			break
		}
	}
	qp.mu.Unlock()
	// "The Data Sink MAY validate that the STag ... of the RDMA Read
	// Response Message [is] the same as ... in the corresponding RDMA Read
	// Request Message." (RFC 5040 §5.2.2)
	if !stag {
		return ddp.TaggedBuffer{}, term.DDPInvalidSTag.With("Read Response to STag %#08x, which no outstanding Read Request named", h.STag)
	}
	if !found {
		return ddp.TaggedBuffer{}, term.DDPBaseBounds.With("Read Response to TO %#x of STag %#08x, outside every outstanding Read's Data Sink buffer", h.TO, h.STag)
	}
	reg, f := qp.pd.dev.lookup(qp, h.STag, LocalWrite)
	if f != stagOK {
		return ddp.TaggedBuffer{}, f.ddp().With("STag %#08x", h.STag)
	}
	off := sinkTO - reg.base
	if sinkTO < reg.base || off > uint64(len(reg.mem)) || n > uint64(len(reg.mem))-off {
		return ddp.TaggedBuffer{}, term.DDPBaseBounds.With("the Read's Data Sink buffer is no longer in STag %#08x", h.STag)
	}
	return ddp.TaggedBuffer{Mem: reg.mem[off : off+n], Base: sinkTO}, nil
}

// Deliver acts on a whole message (RFC 5040 §5).
func (r *receiver) Deliver(d *ddp.Delivery) {
	qp := (*QueuePair)(r)
	op := Control(d.Header.RsvdULP[0]).Opcode()
	switch {
	case op == OpWrite:
		// "A valid RDMA Write Message MUST NOT be delivered to the Data
		// Sink's ULP (i.e., it is placed by the DDP layer)." (§5.1)
	case op == OpReadResponse:
		qp.deliverReadResponse(d)
	case op.IsSend():
		qp.deliverSend(op, d)
	case op == OpReadRequest:
		qp.deliverReadRequest(d)
	case op == OpTerminate:
		qp.deliverTerminate(d)
	case op == OpAtomicRequest:
		qp.deliverAtomicRequest(d)
	case op == OpAtomicResponse:
		qp.deliverAtomicResponse(d)
	case op.IsImmediate():
		qp.deliverImmediate(op, d)
	}
}

// deliverReadResponse completes the oldest outstanding RDMA Read with
// the Read Response just delivered. Read Responses come in the order of
// their Read Requests (§5.2.2: "The Data Source RDMAP layer MUST pass
// RDMA Read Response Messages to the DDP layer, in the order that the
// RDMA Read Request Messages were received"), and DDP delivers in that
// order, so the oldest is this Response's Read. Its segments were placed
// only into the Data Sink buffer of some outstanding Read (sinkBuffer);
// here the whole message is matched: a Response with no Read left to
// answer (one that answers nothing, or a second for one Read) is an
// Unexpected OpCode (0x0/0x2/0x06), as at placement, and one whose STag,
// Tagged Offset or length differ from the oldest Read's gets the tagged
// buffer errors of RFC 5041 §7.2, "Invalid STag" (0x1/0x1/0x00) and "Base
// or bounds violation" (0x1/0x1/0x01): "The Data Sink MAY validate that
// the STag, Tagged Offset, and length of the RDMA Read Response Message
// are the same as the STag, Tagged Offset, and length included in the
// corresponding RDMA Read Request Message" (§5.2.2). Either way the
// stream stops and places nothing more.
func (qp *QueuePair) deliverReadResponse(d *ddp.Delivery) {
	h := &d.Header
	qp.mu.Lock()
	if len(qp.reads) == 0 {
		qp.mu.Unlock()
		if qp.stream.Stopped() {
			// The stream stopped after the segment was placed, and its
			// Reads were flushed: nothing is left to complete.
			return
		}
		qp.failMessage(term.RDMAPUnexpectedOpcode.With("RDMA Read Response (STag %#08x, %d octets) with no RDMA Read outstanding", h.STag, d.Len), d)
		return
	}
	e := qp.reads[0]
	var bad *term.Error
	switch {
	case h.STag != e.sinkSTag:
		bad = term.DDPInvalidSTag.With("RDMA Read Response to STag %#08x; the oldest outstanding Read's Data Sink STag is %#08x", h.STag, e.sinkSTag)
	case uint64(d.Len) != e.n || h.TO < e.sinkTO || h.TO-e.sinkTO > e.n:
		bad = term.DDPBaseBounds.With("RDMA Read Response of %d octets ending at TO %#x; the oldest outstanding Read asked for %d at TO %#x", d.Len, h.TO, e.n, e.sinkTO)
	}
	if bad != nil {
		qp.mu.Unlock()
		qp.failMessage(bad, d)
		return
	}
	waited := qp.waitsForResponses()
	qp.reads = dropFirst(qp.reads)
	freed := waited && !qp.waitsForResponses()
	// "An RDMA Read operation MUST NOT be Completed at the Local Peer
	// until the DDP layer Delivers the associated incoming RDMA Read
	// Response Message." (§5.5 rule 19) It completes under the same hold
	// of qp.mu that ends it being outstanding, as an Atomic does.
	qp.completeLocked(e, StatusSuccess, nil)
	qp.mu.Unlock()
	signal(qp.sqChanged)
	if freed {
		// A work request waited for this Read (the ORD, a Fence).
		signal(qp.wake)
	}
}

// failMessage stops the stream for an error found on a delivered message:
// its Terminate carries the message's last DDP header and that segment's
// length (§7.1 item 2: "the Error Type, Error Code, ULP PDU Length, and
// Terminated DDP Header fields are included").
func (qp *QueuePair) failMessage(e *term.Error, d *ddp.Delivery) {
	var raw [ddp.MaxHeaderLen]byte
	hdr := d.Header.Append(raw[:0])
	qp.stream.FailSegment(e, hdr, len(hdr)+int(d.LastLen))
}

func (qp *QueuePair) deliverSend(op Opcode, d *ddp.Delivery) {
	c := Completion{WRID: d.Buffer.ID, Op: WorkRecv, ByteLen: d.Len, QP: qp}
	if op.Solicited() {
		c.Flags |= FlagSolicited
	}
	if op.Invalidates() {
		stag := u32(d.Header.RsvdULP[1:5])
		// "Invalidate the STag if it is associated with the RDMAP Stream;
		// or issue a Terminate Message with the STag Cannot be Invalidated
		// Terminate Error Code, if the STag is not associated with the
		// RDMAP Stream." (§5.3)
		if err := qp.pd.dev.invalidate(qp.pd, stag, qp); err != nil {
			e := term.RDMAPProtCannotInvalidate.With("STag %#08x: %v", stag, err)
			c.Status, c.Err = StatusInvSTagErr, e
			qp.pushRecv(c, false)
			var raw [ddp.MaxHeaderLen]byte
			qp.stream.FailSegment(e, d.Header.Append(raw[:0]), ddp.UntaggedHeaderLen+int(d.Len-d.Header.MO))
			return
		}
		c.Flags |= FlagInvalidated
		c.InvalidatedSTag = stag
	}
	// "Send Messages MUST be Delivered to the ULP at the Remote Peer after
	// they are Delivered to RDMAP by DDP and in the order that they were
	// Delivered to RDMAP." (§5.5 rule 10)
	qp.pushRecv(c, op.Solicited())
}

func (qp *QueuePair) pushRecv(c Completion, solicited bool) {
	qp.traceCompletion(c)
	qp.cfg.RecvCQ.push(c, solicited)
}

func (qp *QueuePair) deliverReadRequest(d *ddp.Delivery) {
	body := d.Buffer.SGL[0][:d.Len]
	var raw [ddp.MaxHeaderLen]byte
	hdr := d.Header.Append(raw[:0])
	segLen := ddp.UntaggedHeaderLen + int(d.Len-d.Header.MO)
	if qp.inReads.Load() >= int32(qp.cfg.IRD) {
		// Queue 1's buffers serve Atomic Requests too: a peer past the
		// IRD is refused as if it had found no buffer, as it would on a
		// queue of its own (RFC 5040 §6.1, RFC 5041 §7.2 0x2/0x02).
		qp.stream.FailSegment(term.DDPNoBuffer.With("QN 1 MSN %d: more than IRD=%d RDMA Read Requests outstanding", d.Header.MSN, qp.cfg.IRD), hdr, segLen)
		return
	}
	rr, _, err := ParseReadRequest(body)
	if err != nil || d.Len != ReadRequestLen {
		qp.stream.FailSegment(term.RDMAPOpUnspecified.With("RDMA Read Request of %d octets", d.Len), hdr, segLen)
		return
	}
	var src []byte
	var srcReg *region
	// "If the Data Source receives an RDMA Read Request Header with the
	// RDMA Read Message Size set to zero, the Data Source RDMAP: MUST NOT
	// validate the Data Source STag and Data Source Tagged Offset ...
	// and MUST respond with a zero-length RDMA Read Response Message."
	if rr.RDMARDSZ > 0 {
		reg, f := qp.pd.dev.lookup(qp, rr.SrcSTag, RemoteRead)
		e := f.rdmap()
		if e == nil {
			n := uint64(rr.RDMARDSZ)
			switch {
			case rr.SrcTO < reg.base || rr.SrcTO-reg.base >= uint64(len(reg.mem)):
				// §7.2 4c: "The Data Source Tagged Offset MUST fall in the
				// range of legal offsets associated with the Data Source
				// STag."
				e = term.RDMAPBaseBounds
			case rr.SrcTO+n < rr.SrcTO:
				// 4e: "... MUST NOT cause the Data Source Tagged Offset to
				// wrap."
				e = term.RDMAPTOWrap
			case rr.SrcTO-reg.base+n > uint64(len(reg.mem)):
				// 4d: the sum "MUST fall in the range of legal offsets".
				e = term.RDMAPBaseBounds
			default:
				off := rr.SrcTO - reg.base
				src, srcReg = reg.mem[off:off+n], reg
			}
		}
		if e != nil {
			qp.mu.Lock()
			qp.termRR = append([]byte(nil), body...)
			qp.mu.Unlock()
			qp.stream.FailSegment(e.With("Read Request for %d octets at STag %#08x TO %#x", rr.RDMARDSZ, rr.SrcSTag, rr.SrcTO), hdr, segLen)
			return
		}
	}
	// "RDMA Read Response Message processing at the Remote Peer ... MUST
	// be started only after the RDMA Read Request Message has been
	// Delivered by the DDP layer" (§5.5 rule 17): it is, now. The IRD
	// bounds the Responses queued.
	qp.inReads.Add(1)
	qp.answer(response{src: src, reg: srcReg, sinkSTag: rr.SinkSTag, sinkTO: rr.SinkTO, buf: d.Buffer})
}

// deliverAtomicRequest checks a delivered Atomic Request and hands it to
// the send route (answer), which carries it out and answers it in its
// turn among the Read Responses (send.go). "The Responder's RDMAP layer
// MUST process an Atomic Operation Request Message. A valid Atomic
// Operation Request Message MUST NOT be delivered to the Responder's ULP"
// (RFC 7306 §5.2.1 item 3): nothing reaches a completion queue. "Atomic
// Operation Request Messages MUST NOT start processing at the Responder
// until they have been Delivered to RDMAP by DDP" (§5.4 rule 3): this is
// that delivery. An error answers with a Terminate whose "Error Type,
// Error Code, and Terminated DDP Header fields are included ..., but the
// Terminated RDMA Header field is set to zero" (§8.1 item 2), and leaves
// the memory untouched.
func (qp *QueuePair) deliverAtomicRequest(d *ddp.Delivery) {
	body := d.Buffer.SGL[0][:d.Len]
	var raw [ddp.MaxHeaderLen]byte
	hdr := d.Header.Append(raw[:0])
	segLen := ddp.UntaggedHeaderLen + int(d.Len-d.Header.MO)
	fail := func(e *term.Error) { qp.stream.FailSegment(e, hdr, segLen) }
	if qp.inAtomics.Load() >= int32(qp.cfg.AtomicIRD) {
		// As for Read Requests past the IRD (deliverReadRequest).
		fail(term.DDPNoBuffer.With("QN 1 MSN %d: more than AtomicIRD=%d Atomic Requests outstanding", d.Header.MSN, qp.cfg.AtomicIRD))
		return
	}
	req, _, err := ParseAtomicRequest(body)
	if err != nil || d.Len != AtomicRequestLen {
		fail(term.RDMAPOpUnspecified.With("Atomic Request of %d octets, not 52", d.Len))
		return
	}
	// "At the Responder, an error MUST be surfaced in response to
	// delivery to the Remote Peer's RDMAP layer of an Atomic Operation
	// Request Message with an Atomic Operation Code that the RNIC does not
	// support." (§5.2.1 item 4) As an opcode not supported: §1.1.
	if !req.Op.Supported() {
		fail(term.RDMAPUnexpectedOpcode.With("Atomic Request with AOpCode %#x", uint8(req.Op)))
		return
	}
	// "Atomic Operation Request Messages use the same remote addressing
	// mechanism as RDMA Reads and Writes" (§5): the STag must be valid,
	// this stream's, and allow remote atomics; the 8 octets must lie in
	// its range, without wrapping (RFC 5040 §7.2's checks of a Read
	// Request's Data Source STag and TO, with RDMAP's codes).
	reg, f := qp.pd.dev.lookup(qp, req.STag, RemoteAtomic)
	if e := f.rdmap(); e != nil {
		fail(e.With("Atomic Request for STag %#08x TO %#x", req.STag, req.TO))
		return
	}
	switch {
	case req.TO < reg.base || req.TO-reg.base >= uint64(len(reg.mem)):
		fail(term.RDMAPBaseBounds.With("Atomic Request for TO %#x outside STag %#08x", req.TO, req.STag))
		return
	case req.TO+8 < req.TO:
		fail(term.RDMAPTOWrap.With("Atomic Request for TO %#x wraps", req.TO))
		return
	case req.TO-reg.base+8 > uint64(len(reg.mem)):
		fail(term.RDMAPBaseBounds.With("Atomic Request for TO %#x runs past STag %#08x", req.TO, req.STag))
		return
	}
	off := req.TO - reg.base
	word, aligned := atomicWord(reg.mem[off : off+8])
	if !aligned {
		// "FetchAdd Atomic Operations that target ULP Buffer addresses
		// that are not 64-bit aligned MUST be surfaced as errors, and the
		// Responder's memory MUST NOT be modified in such cases.
		// Additionally, an error MUST be surfaced and a terminate message
		// MUST be generated." (§5.1.1; likewise §5.1.2 for CmpSwap) "In
		// the case of an error, the RDMAP layer MUST generate a Terminate
		// Message indicating RDMA Layer Remote Operation Error with Error
		// Code Name "Catastrophic error, localized to RDMAP Stream"" (§8.2)
		fail(term.RDMAPCatastrophicStream.With("%v at STag %#08x TO %#x: not a 64-bit aligned address", req.Op, req.STag, req.TO))
		return
	}
	qp.inAtomics.Add(1)
	qp.answer(response{atomic: true, word: word, reg: reg, req: req, buf: d.Buffer})
}

// deliverAtomicResponse completes the oldest outstanding Atomic
// Operation: "The RDMAP layer MUST Deliver the Atomic Operation Response
// Message to the ULP" and "An Atomic Operation MUST NOT be Completed at
// the Requester until the DDP layer Delivers the associated incoming
// Atomic Operation Response Message" (RFC 7306 §5.2.2 item 6, §5.4 rule
// 7). Responses come in Request order (§5.2.2 item 8); "the Message
// Sequence Number (MSN) will be used to locate the corresponding Atomic
// Operation request" (§5): queue 3's buffers are consumed in MSN order,
// so the oldest outstanding request is this response's, and its Request
// Identifier must be the one reflected.
func (qp *QueuePair) deliverAtomicResponse(d *ddp.Delivery) {
	var raw [ddp.MaxHeaderLen]byte
	hdr := d.Header.Append(raw[:0])
	segLen := ddp.UntaggedHeaderLen + int(d.Len-d.Header.MO)
	resp, _, err := ParseAtomicResponse(d.Buffer.SGL[0][:d.Len])
	qp.mu.Lock()
	if len(qp.atomics) == 0 {
		qp.mu.Unlock()
		if qp.stream.Stopped() {
			// The stream stopped after the segment was placed, and its
			// Atomic Operations were flushed.
			return
		}
		// A Response that answers nothing (a second one for one Request):
		// "At the Requester, when an invalid Atomic Operation Response
		// Message is delivered to the Remote Peer's RDMAP layer, an error
		// is surfaced" (§5.2.2 item 7), the Unexpected OpCode of the
		// placement check (0x0/0x2/0x06).
		qp.stream.FailSegment(term.RDMAPUnexpectedOpcode.With("Atomic Response (QN 3 MSN %d) with no Atomic Request outstanding", d.Header.MSN), hdr, segLen)
		return
	}
	e := qp.atomics[0]
	if err != nil || d.Len != AtomicResponseLen || resp.OrigReqID != e.reqID {
		qp.mu.Unlock()
		// "At the Requester, when an invalid Atomic Operation Response
		// Message is delivered to the Remote Peer's RDMAP layer, an error
		// is surfaced." (§5.2.2 item 7)
		qp.stream.FailSegment(term.RDMAPOpUnspecified.With("Atomic Response of %d octets for Request Identifier %d; the oldest outstanding Atomic Request is %d",
			d.Len, resp.OrigReqID, e.reqID), hdr, segLen)
		return
	}
	binary.NativeEndian.PutUint64(e.sgl[0], resp.OrigValue)
	// The buffer serves a later Response; then the request stops being
	// outstanding, and a work request waiting for the AtomicORD may go.
	qp.stream.Post(QNAtomicResp, d.Buffer)
	waited := qp.waitsForResponses()
	qp.atomics = dropFirst(qp.atomics)
	freed := waited && !qp.waitsForResponses()
	// Completed under the same hold of qp.mu, so that what observes this
	// end sees the Request stop being outstanding before the one waiting
	// for it goes.
	qp.completeLocked(e, StatusSuccess, nil)
	qp.mu.Unlock()
	signal(qp.sqChanged)
	if freed {
		signal(qp.wake)
	}
}

// deliverImmediate reports an Immediate Data message as a receive
// completion. "The Remote Peer MUST check that Immediate Data and
// Immediate Data with SE Messages include exactly 8 bytes of data from the
// DDP layer" (RFC 7306 §6.3); the message consumed the receive buffer it
// was placed in ("One Immediate Data or Immediate Data with SE Message
// MUST consume one Untagged Buffer"), which completes: "If the Immediate
// Data operation is Completed successfully, the RDMAP Layer passes the
// following information to the ULP Layer: 8 bytes of Immediate Data; An
// Event, if the Data Sink is configured to generate an Event" (§6.1).
// "At the Remote Peer, the Immediate Data and Immediate Data with SE
// Messages MUST be Delivered to the Remote Peer's ULP in the order they
// were sent": they complete here, in delivery order, as Sends do (§6.4).
func (qp *QueuePair) deliverImmediate(op Opcode, d *ddp.Delivery) {
	c := Completion{WRID: d.Buffer.ID, Op: WorkRecvWithImm, ByteLen: d.Len, Flags: FlagImm, QP: qp}
	if d.Len != ImmediateDataLen {
		// "If the Immediate Data operation is Completed in error, the Data
		// Sink RDMAP Layer will pass up the corresponding error information
		// to the Data Sink ULP and send a Terminate Message" (§6.1).
		e := term.RDMAPOpUnspecified.With("%v of %d octets, not 8", op, d.Len)
		c.Status, c.Err = StatusLocLenErr, e
		qp.pushRecv(c, false)
		var raw [ddp.MaxHeaderLen]byte
		qp.stream.FailSegment(e, d.Header.Append(raw[:0]), ddp.UntaggedHeaderLen+int(d.Len-d.Header.MO))
		return
	}
	var b [ImmediateDataLen]byte
	n := 0
	for _, s := range d.Buffer.SGL {
		n += copy(b[n:], s)
		if n == len(b) {
			break
		}
	}
	imm, _, _ := ParseImmediateData(b[:])
	c.Imm = imm.Data
	if op.Solicited() {
		c.Flags |= FlagSolicited
	}
	qp.pushRecv(c, op.Solicited())
}

func (qp *QueuePair) deliverTerminate(d *ddp.Delivery) {
	th, _, err := ParseTerminate(d.Buffer.SGL[0][:d.Len])
	if err != nil {
		qp.stream.Fail(term.RDMAPOpUnspecified.With("malformed Terminate: %v", err))
		return
	}
	// Decoded as RFC 5040 §4.8 lays it out, whoever sent it (Linux siw's
	// Terminates arrive with the Layer and Error Type nibbles swapped;
	// `iwarp dump` points that out).
	e := th.Err()
	qp.mu.Lock()
	if qp.obs != nil {
		qp.obs.Observe(trace.Event{Kind: trace.Terminate, Stream: qp.cfg.StreamID, Err: e})
	}
	if target := qp.refused(&th, e); target != nil {
		// The peer refused this request: complete it with the peer's
		// reason rather than a flush.
		target.err = e
	}
	qp.mu.Unlock()
	qp.stream.Fail(e)
}

// refused returns the outstanding Read or Atomic request the peer's
// Terminate is about, or nil. The caller holds qp.mu.
func (qp *QueuePair) refused(th *TerminateHeader, e *term.Error) *sqEntry {
	if len(th.RDMAHeader) == ReadRequestLen && len(qp.reads) > 0 {
		// The oldest outstanding Read, when the Terminated RDMA Header is
		// its Read Request.
		rr, _, _ := ParseReadRequest(th.RDMAHeader)
		if rr.SinkSTag == qp.reads[0].sinkSTag {
			return qp.reads[0]
		}
		return nil
	}
	if len(th.DDPHeader) == ddp.UntaggedHeaderLen {
		// The Terminated DDP Header names a Read or Atomic Request by its
		// queue 1 MSN (an Atomic Request's Terminate carries no RDMA
		// Header: RFC 7306 §8.1 item 2).
		h, _, err := ddp.ParseHeader(th.DDPHeader)
		if err != nil || h.Tagged || h.QN != QNReadReq {
			return nil
		}
		for _, list := range [][]*sqEntry{qp.atomics, qp.reads} {
			for _, x := range list {
				if x.qn1MSN == h.MSN {
					return x
				}
			}
		}
		return nil
	}
	if !th.D && len(qp.atomics) > 0 && errors.Is(e, term.RDMAPUnexpectedOpcode) {
		// A peer answers an opcode it does not know (an Atomic Request,
		// from a peer without RFC 7306) with Unexpected OpCode and no
		// Terminated DDP Header, its layout being unknown: that is the
		// oldest Atomic Request.
		return qp.atomics[0]
	}
	return nil
}

// Fault is the stream's first error, or the end of its LLP stream: stop
// placing at once, and have the send goroutine send the Terminate (for
// an error found here) and then flush the outstanding work.
func (r *receiver) Fault(f *ddp.Fault) {
	qp := (*QueuePair)(r)
	qp.mu.Lock()
	if qp.state != StateRunning && qp.state != StateIdle {
		qp.mu.Unlock()
		return
	}
	qp.fault = f.Err
	qp.setState(StateTerminating)
	// No Terminate answers the peer's Terminate, nor the end of the LLP
	// stream (there is nothing left to carry it).
	if te := f.Term(); te != nil && !te.Remote {
		// "The Local Peer MUST send a Terminate Message" (§7.1), and only
		// one: this runs once per stream.
		t := terminateFor(f, te, qp.termRR)
		qp.terminate = t.Append(nil)
		if qp.obs != nil {
			qp.obs.Observe(trace.Event{Kind: trace.Terminate, Stream: qp.cfg.StreamID, Err: te})
		}
	}
	qp.faulted = true
	started := qp.llp != nil
	qp.mu.Unlock()
	if started {
		signal(qp.wake)
		return
	}
	qp.mu.Lock()
	qp.faulted = false
	qp.mu.Unlock()
	qp.stopped(nil)
}

// terminateFor builds the Terminate Header for a fault, following RFC
// 5040 Figure 10: no headers for a Local Catastrophic Error or an LLP
// error; the DDP Segment Length and DDP header for DDP errors and RDMAP
// remote errors; and the RDMA Read Request Header too for a Remote
// Protection Error on an RDMA Read Request.
func terminateFor(f *ddp.Fault, e *term.Error, rr []byte) TerminateHeader {
	t := TerminateHeader{Layer: e.Layer, EType: e.EType, Code: e.Code}
	if e.Layer == term.LayerLLP || e.EType == 0 || f.HeaderLen == 0 {
		return t
	}
	t.M, t.D = true, true
	t.SegLen = uint16(min(f.SegLen, 0xffff))
	t.DDPHeader = f.Header[:f.HeaderLen]
	if e.Layer == term.LayerRDMAP && e.EType == term.ETypeRemoteProtection &&
		!f.Parsed.Tagged && Control(f.Parsed.RsvdULP[0]).Opcode() == OpReadRequest && len(rr) == ReadRequestLen {
		t.R = true
		t.RDMAHeader = rr
	}
	return t
}

// flush completes every outstanding work request with WR_FLUSH_ERR (or
// with a status of its own, when it has one), in posting order. The
// stream has stopped: once a segment being placed has been written
// (Quiesce), no receive buffer reported flushed here is written again.
func (qp *QueuePair) flush() {
	qp.stream.Quiesce()
	qp.mu.Lock()
	for _, e := range qp.sq {
		if !e.done {
			e.status = StatusWRFlushErr
			if re, ok := e.err.(*term.Error); ok && re.Remote {
				e.status = remoteStatus(re)
			} else if qp.fault != nil {
				e.err = qp.fault
			}
		}
		qp.report(e)
	}
	clear(qp.sq)
	qp.sq = qp.sqBase[:0]
	qp.started = 0
	qp.reads = nil
	qp.atomics = nil
	qp.queued = nil
	fault := qp.fault
	qp.mu.Unlock()
	bufs := qp.stream.Drain(QNSend)
	if qp.cfg.SRQ != nil {
		// Buffers this stream took from the shared queue but did not use
		// go back to it; the shared queue's own are not flushed.
		qp.cfg.SRQ.giveBack(bufs)
		bufs = nil
	}
	for _, b := range bufs {
		qp.pushRecv(Completion{WRID: b.ID, Status: StatusWRFlushErr, Op: WorkRecv, QP: qp, Err: fault}, false)
	}
	signal(qp.sqChanged)
}

// remoteStatus maps a Terminate the peer sent about a Read to a status.
func remoteStatus(e *term.Error) Status {
	switch {
	case e.Layer == term.LayerRDMAP && e.EType == term.ETypeRemoteProtection:
		return StatusRemAccessErr
	case e.Layer == term.LayerRDMAP && e.EType == term.ETypeRemoteOperation:
		return StatusRemOpErr
	case e.Layer == term.LayerDDP:
		return StatusRemInvReqErr
	}
	return StatusWRFlushErr
}

// dropFirst removes the oldest of the outstanding requests in place,
// keeping the array (the ORD bounds it), so that the next one is
// appended without allocating.
func dropFirst(q []*sqEntry) []*sqEntry {
	n := copy(q, q[1:])
	q[n] = nil
	return q[:n]
}
