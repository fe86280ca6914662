package rdmap

import (
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
		if _, f := qp.pd.dev.lookup(qp.pd, stag, 0); f != stagOK {
			return term.RDMAPProtCannotInvalidate.With("STag %#08x: %s", stag, f.rdmap().Name())
		}
		if qp.pd.dev.shared(qp.pd, stag) {
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
	return nil
}

// TaggedBuffer resolves the STag of an RDMA Write (it needs remote write
// rights) or of an RDMA Read Response (the Data Sink STag this end sent in
// its oldest outstanding Read Request; it needs local write rights).
func (r *receiver) TaggedBuffer(h *ddp.Header) (ddp.TaggedBuffer, *term.Error) {
	qp := (*QueuePair)(r)
	need := RemoteWrite
	if Control(h.RsvdULP[0]).Opcode() == OpReadResponse {
		need = LocalWrite
		qp.mu.Lock()
		want := uint32(0)
		if len(qp.reads) > 0 {
			want = qp.reads[0].sinkSTag
		}
		qp.mu.Unlock()
		// "The Data Sink MAY validate that the STag ... of the RDMA Read
		// Response Message [is] the same as ... in the corresponding RDMA
		// Read Request Message." (RFC 5040 §5.2.2)
		if h.STag != want {
			return ddp.TaggedBuffer{}, term.DDPInvalidSTag.With("Read Response to STag %#08x; the outstanding Read Request named %#08x", h.STag, want)
		}
	}
	reg, f := qp.pd.dev.lookup(qp.pd, h.STag, need)
	if f != stagOK {
		return ddp.TaggedBuffer{}, f.ddp().With("STag %#08x", h.STag)
	}
	return reg.tagged(), nil
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
		qp.mu.Lock()
		e := qp.reads[0] // CheckSegment made sure there is one
		qp.reads[0] = nil
		qp.reads = qp.reads[1:]
		qp.mu.Unlock()
		// A work request may be waiting for this Read (the ORD, a Fence).
		signal(qp.wake)
		// "An RDMA Read operation MUST NOT be Completed at the Local Peer
		// until the DDP layer Delivers the associated incoming RDMA Read
		// Response Message." (§5.5 rule 19)
		qp.complete(e, StatusSuccess, nil)
	case op.IsSend():
		qp.deliverSend(op, d)
	case op == OpReadRequest:
		qp.deliverReadRequest(d)
	case op == OpTerminate:
		qp.deliverTerminate(d)
	}
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
		if err := qp.pd.dev.invalidate(qp.pd, stag, true); err != nil {
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
	qp.cfg.RecvCQ.push(c, solicited)
	qp.traceCompletion(c)
}

func (qp *QueuePair) deliverReadRequest(d *ddp.Delivery) {
	body := d.Buffer.SGL[0][:d.Len]
	var raw [ddp.MaxHeaderLen]byte
	hdr := d.Header.Append(raw[:0])
	segLen := ddp.UntaggedHeaderLen + int(d.Len-d.Header.MO)
	rr, _, err := ParseReadRequest(body)
	if err != nil {
		qp.stream.FailSegment(term.RDMAPOpUnspecified.With("RDMA Read Request of %d octets", d.Len), hdr, segLen)
		return
	}
	var src []byte
	// "If the Data Source receives an RDMA Read Request Header with the
	// RDMA Read Message Size set to zero, the Data Source RDMAP: MUST NOT
	// validate the Data Source STag and Data Source Tagged Offset ...
	// and MUST respond with a zero-length RDMA Read Response Message."
	if rr.RDMARDSZ > 0 {
		reg, f := qp.pd.dev.lookup(qp.pd, rr.SrcSTag, RemoteRead)
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
				src = reg.mem[off : off+n]
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
	// Delivered by the DDP layer" (§5.5 rule 17): it is, now. The send
	// goroutine sends it; the IRD bounds the Responses queued.
	qp.mu.Lock()
	qp.queued = append(qp.queued, response{src: src, sinkSTag: rr.SinkSTag, sinkTO: rr.SinkTO, buf: d.Buffer})
	qp.mu.Unlock()
	signal(qp.wake)
}

func (qp *QueuePair) deliverTerminate(d *ddp.Delivery) {
	th, _, err := ParseTerminate(d.Buffer.SGL[0][:d.Len])
	if err != nil {
		qp.stream.Fail(term.RDMAPOpUnspecified.With("malformed Terminate: %v", err))
		return
	}
	e := th.Err()
	if qp.obs != nil {
		qp.obs.Observe(trace.Event{Kind: trace.Terminate, Stream: qp.cfg.StreamID, Err: e})
	}
	qp.mu.Lock()
	if len(th.RDMAHeader) == ReadRequestLen && len(qp.reads) > 0 {
		// The peer refused this end's oldest outstanding Read: complete
		// it with the peer's reason rather than a flush.
		rr, _, _ := ParseReadRequest(th.RDMAHeader)
		if rr.SinkSTag == qp.reads[0].sinkSTag {
			qp.reads[0].err = e
		}
	}
	qp.mu.Unlock()
	qp.stream.Fail(e)
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
// with a status of its own, when it has one), in posting order.
func (qp *QueuePair) flush() {
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
