package rdmap

import (
	"errors"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

// The send side of a queue pair. Posting goroutines queue work requests
// on the send queue (qp.sq), the receive side queues Read and Atomic
// Responses (qp.queued) and the Terminate (qp.terminate). One route sends
// them: drain, run by whoever holds sendMu. It takes what can start at
// once, hands it to DDP and the LLP and then flushes the LLP, so that
// what was queued together leaves together (MPA gathers the FPDUs into
// one writev), and only then completes the Sends and Writes among it (RFC
// 5040 §5.5 rule 14). A posting goroutine drains when it finds the send
// side idle (QueuePair.kick); the queue pair's send goroutine drains
// otherwise. The receive side never waits to write (if both ends'
// receive sides waited for room to write, neither would read again): it
// sends a Response itself only when the send side is idle, nothing is
// queued before it, and the LLP takes it at once (answer); otherwise the
// send goroutine sends it.

// maxBatch bounds the messages the send goroutine hands to the LLP
// between two flushes, and maxBatchBytes their payload: completions are
// reported after each flush. A window of 64 KiB Read Responses or Writes
// leaves in flushes of 4 MiB: 1 MiB made RDMA Read 7 % and RDMA Write
// 11 % slower between two processes, 256 KiB slower still
// (docs/performance.md).
const (
	maxBatch      = 128
	maxBatchBytes = 4 << 20
)

// sendLoop is the queue pair's send goroutine.
func (qp *QueuePair) sendLoop() {
	defer qp.wg.Done()
	for {
		select {
		case <-qp.wake:
		case <-qp.done:
			return
		}
		qp.sendMu.Lock()
		qp.drain()
		qp.sendMu.Unlock()
	}
}

// drain sends what can start, batch by batch, until nothing can. The
// caller holds sendMu.
func (qp *QueuePair) drain() {
	for {
		var stop bool
		qp.responses, qp.wrs, stop = qp.take(qp.responses[:0], qp.wrs[:0])
		if stop {
			return
		}
		qp.send(qp.responses, qp.wrs)
		clear(qp.responses)
		clear(qp.wrs)
	}
}

// take returns the work that can start now: the Read and Atomic
// Responses queued, then the send queue's work requests in order, up to
// the first that must wait for RDMA Read or Atomic Responses to arrive
// (the ORD or the AtomicORD is reached, or it is fenced behind outstanding
// Reads and Atomics). A Read or Atomic Request it takes counts as
// outstanding from then on. stop reports that there is nothing to do;
// when the stream has stopped, take sends the Terminate and flushes the
// queue pair's work first.
func (qp *QueuePair) take(responses []response, wrs []*sqEntry) (_ []response, _ []*sqEntry, stop bool) {
	qp.mu.Lock()
	if qp.faulted {
		t := qp.terminate
		qp.terminate = nil
		qp.faulted = false
		qp.mu.Unlock()
		qp.stopped(t)
		return responses, wrs, true
	}
	if qp.state != StateRunning || qp.batch > 0 {
		qp.mu.Unlock()
		return responses, wrs, true
	}
	bytes := 0
	// "RDMA Read Response Messages MAY be generated at the Remote Peer
	// after subsequent RDMA Write Messages or Send Messages have been
	// Placed or Delivered" (RFC 5040 §5.5 rule 12), and so may Atomic
	// Responses: "Atomic Operation Response Messages MAY be generated at
	// the Responder after subsequent RDMA Write Messages or Send Messages
	// have been Placed or Delivered" (RFC 7306 §5.4 rule 4). Responses do
	// not wait behind work requests that wait for Reads or Atomics.
	//
	// Read and Atomic Responses are one queue, in the order their
	// Requests were delivered on queue 1: RFC 7306 §7's table has "RDMA
	// Read Response Message will not be generated until Atomic Response
	// Message has been generated" (Atomic, then RDMA Read), "Atomic
	// Response Message will not be generated until RDMA Read Response has
	// been generated" (RDMA Read, then Atomic) and "Second Atomic Request
	// Message will not be processed until first Atomic Response has been
	// generated" (Atomic, then Atomic); §5.4 rule 8: "Atomic Operation
	// Response Messages MUST be submitted to the DDP layer on the
	// Responder in the order the Atomic Operation Request Messages were
	// Delivered by DDP."
	n := 0
	for n < len(qp.queued) && len(responses) < maxBatch && bytes < maxBatchBytes {
		responses = append(responses, qp.queued[n])
		bytes += len(qp.queued[n].src)
		n++
	}
	// Keep the array: the IRD bounds it.
	m := copy(qp.queued, qp.queued[n:])
	clear(qp.queued[m:])
	qp.queued = qp.queued[:m]
	for qp.started < len(qp.sq) && len(responses)+len(wrs) < maxBatch && bytes < maxBatchBytes {
		if qp.waitsForResponses() {
			break
		}
		e := qp.sq[qp.started]
		switch e.kind {
		case kindRead:
			qp.reads = append(qp.reads, e)
			e.qn1MSN = qp.nextQN1MSN()
		case kindAtomic:
			qp.atomics = append(qp.atomics, e)
			e.qn1MSN = qp.nextQN1MSN()
		}
		qp.started++
		wrs = append(wrs, e)
		if e.kind == kindSend || e.kind == kindWrite {
			// What the LLP reads from registered memory until the
			// flush; a Read or Atomic Request carries only its header
			// (its n is what the Response brings).
			bytes += int(e.n)
		}
	}
	qp.mu.Unlock()
	return responses, wrs, len(responses)+len(wrs) == 0
}

// waitsForResponses reports whether the next work request to start must
// wait for RDMA Read or Atomic Responses to arrive: take stops there, and
// the Response that lets it go wakes the send goroutine. The caller holds
// qp.mu.
func (qp *QueuePair) waitsForResponses() bool {
	if qp.started == len(qp.sq) {
		return false
	}
	e := qp.sq[qp.started]
	switch {
	case e.fence && len(qp.reads)+len(qp.atomics) > 0:
		return true
	case e.kind == kindRead:
		// "the RDMAP layer MUST NOT exceed the maximum number of
		// outstanding, outbound RDMA Read Requests that were
		// negotiated" (RFC 5040 §6.1)
		return len(qp.reads) >= qp.cfg.ORD
	case e.kind == kindAtomic:
		// The same for Atomic Requests, with the limit the ULP
		// negotiated (RFC 7306 §5.2.2 rules 4 and 5).
		return len(qp.atomics) >= qp.cfg.AtomicORD
	}
	return false
}

// answer sends a Read or Atomic Response for a Request the receive side
// has just delivered, or queues it for the send goroutine. It sends it
// itself, saving the round trip a hand-off to the send goroutine costs
// (docs/performance.md), only if the send route is idle (so nothing of
// this stream is being written), no Response is queued before this one
// (RFC 5040 §5.2.2, RFC 7306 §5.4 rule 8: Responses leave in Request
// order) and the LLP takes the Response's one segment without waiting
// (ddp.NowWriter).
func (qp *QueuePair) answer(r response) {
	if qp.sendMu.TryLock() {
		qp.mu.Lock()
		idle := qp.state == StateRunning && !qp.faulted && len(qp.queued) == 0
		qp.mu.Unlock()
		if idle {
			qp.now = r
			sent := qp.answerNow(&qp.now)
			r = qp.now
			qp.now = response{}
			if sent {
				qp.sendMu.Unlock()
				return
			}
		}
		qp.sendMu.Unlock()
	}
	qp.mu.Lock()
	qp.queued = append(qp.queued, r)
	qp.mu.Unlock()
	signal(qp.wake)
}

// answerNow tries to send r at once and reports whether it did (or the
// stream stopped instead): false leaves it for the send route, an Atomic
// carried out already (r.done). The caller holds sendMu. The queue 1
// buffer is posted again after the Response is sent, not before as in
// send: the next Request can only be delivered by this same receive side,
// after this returns.
func (qp *QueuePair) answerNow(r *response) bool {
	if !r.atomic {
		if r.reg != nil {
			// As in send: the Data Source STag is checked again, under
			// respMu, which a local revocation waits for; WriteNow keeps
			// no reference to the payload once it returns.
			qp.respMu.Lock()
			defer qp.respMu.Unlock()
			if !qp.pd.dev.valid(r.reg) {
				qp.stream.Fail(term.RDMAPInvalidSTag.With("STag %#08x was invalidated before its RDMA Read Response was sent", r.reg.stag))
				return true
			}
		}
		ok, err := qp.sender.SendTaggedNow(byte(MakeControl(OpReadResponse)), r.sinkSTag, r.sinkTO, [][]byte{r.src})
		if !ok || err != nil {
			// An error is the LLP's and stays with it: the send route
			// meets it again and stops the stream.
			return false
		}
		qp.stream.Post(QNReadReq, r.buf)
		qp.inReads.Add(-1)
		return true
	}
	if !r.done {
		if err := qp.carryOut(r); err != nil {
			return true
		}
	}
	ok, err := qp.sender.SendUntaggedNow([5]byte{byte(MakeControl(OpAtomicResponse))}, QNAtomicResp, [][]byte{r.body[:]})
	if !ok || err != nil {
		return false
	}
	qp.stream.Post(QNReadReq, r.buf)
	qp.inAtomics.Add(-1)
	return true
}

// nextQN1MSN returns the MSN that DDP will give the next message on
// queue 1 (the Sender numbers each queue's messages from one, RFC 5041
// §4.3): the send route sends Read and Atomic Requests in the order take
// takes them. A Terminate that names a queue 1 header finds its request
// by it. The caller holds qp.mu.
func (qp *QueuePair) nextQN1MSN() uint32 {
	qp.qn1MSN++
	return qp.qn1MSN
}

// send hands the messages to DDP, flushes the LLP and completes the Sends
// and Writes among them.
func (qp *QueuePair) send(responses []response, wrs []*sqEntry) {
	// While a Read Response's payload may still be read by the LLP (until
	// its Flush), the send route holds respMu, from before it checks the
	// Data Source STag: a local revocation waits for it (revoke).
	holding := false
	defer func() {
		clear(qp.sent)
		qp.sent = qp.sent[:0]
		if holding {
			qp.respMu.Unlock()
		}
	}()
	readUnflushed := false // a Read Response's payload the LLP may read until its Flush
	for i := range responses {
		r := &responses[i]
		if r.atomic {
			// "RDMA Read, Atomic: Atomic Response Message will not be
			// generated until RDMA Read Response has been generated" (RFC
			// 7306 §7): the LLP may read an earlier Read Response's
			// payload from memory until it flushes, so flush before the
			// atomic changes that memory.
			if readUnflushed {
				if err := qp.llp.Flush(); err != nil {
					qp.llpError(err)
					return
				}
				readUnflushed = false
			}
			if err := qp.answerAtomic(r); err == errStreamStopped {
				return
			} else if err != nil {
				qp.llpError(err)
				return
			}
			continue
		}
		if r.reg != nil && !holding {
			qp.respMu.Lock()
			holding = true
		}
		if r.reg != nil && !qp.pd.dev.valid(r.reg) {
			// The Data Source STag was valid when the Read Request was
			// delivered and has been revoked since: the memory is the
			// ULP's again, and its Response is not sent. An error
			// "detected while creating" a message: "the Terminate Message
			// and Error code are sent instead of the request", with no
			// Terminated DDP or RDMA Header (RFC 5040 §7.1 item 1).
			qp.stream.Fail(term.RDMAPInvalidSTag.With("STag %#08x was invalidated before its RDMA Read Response was sent", r.reg.stag))
			return
		}
		// "The Data Source RDMAP layer MUST pass RDMA Read Response
		// Messages to the DDP layer, in the order that the RDMA Read
		// Request Messages were received" (RFC 5040 §5.2.2). The Read
		// Request buffer (one of IRD) is posted again first: the peer
		// sends its next Read Request only after this Response.
		qp.stream.Post(QNReadReq, r.buf)
		qp.inReads.Add(-1)
		if err := qp.sender.SendTagged(byte(MakeControl(OpReadResponse)), r.sinkSTag, r.sinkTO, [][]byte{r.src}); err != nil {
			qp.llpError(err)
			return
		}
		readUnflushed = readUnflushed || len(r.src) > 0
	}
	for _, e := range wrs {
		if e.kind == kindInvalidate && holding {
			// A local invalidation waits for the Responses the LLP may
			// still read (revoke): they leave first.
			if err := qp.llp.Flush(); err != nil {
				qp.llpError(err)
				return
			}
			qp.respMu.Unlock()
			holding, readUnflushed = false, false
		}
		if err := qp.run(e); err != nil {
			qp.llpError(err)
			return
		}
	}
	if err := qp.llp.Flush(); err != nil {
		qp.llpError(err)
		return
	}
	// "A Send or RDMA Write Message MUST NOT be considered Complete at
	// the Local Peer (Data Source) until it has been successfully
	// completed at the DDP layer." (RFC 5040 §5.5 rule 14): the LLP has
	// taken them now.
	for _, e := range qp.sent {
		qp.complete(e, StatusSuccess, nil)
	}
}

// run hands one work request to DDP (RFC 5040 §5.5 rule 13: in the order
// the ULP submitted them).
func (qp *QueuePair) run(e *sqEntry) error {
	switch e.kind {
	case kindSend:
		if e.op.IsImmediate() {
			// "For an Immediate Data or Immediate Data with SE Message, the
			// Local Peer's RDMAP Layer MUST request that the DDP layer set
			// the Queue Number field to zero" and "transmit 8 bytes of
			// data" (RFC 7306 §6.3); its Invalidate STag is "Set to zero
			// by the sender" (§4.1).
			if _, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(e.op))}, QNSend, [][]byte{e.wire[:ImmediateDataLen]}); err != nil {
				return err
			}
			qp.sent = append(qp.sent, e)
			return nil
		}
		var rsvd [5]byte
		rsvd[0] = byte(MakeControl(e.op))
		if e.op.Invalidates() {
			rsvd[1], rsvd[2], rsvd[3], rsvd[4] = byte(e.invSTag>>24), byte(e.invSTag>>16), byte(e.invSTag>>8), byte(e.invSTag)
		}
		if _, err := qp.sender.SendUntagged(rsvd, QNSend, e.sgl); err != nil {
			return err
		}
		qp.sent = append(qp.sent, e)
	case kindWrite:
		if err := qp.sender.SendTagged(byte(MakeControl(OpWrite)), e.stag, e.to, e.sgl); err != nil {
			return err
		}
		if e.imm != 0 {
			// RDMA Write with Immediate: the Immediate Data message right
			// after the Write (RFC 7306 §1, §6).
			if _, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(e.imm))}, QNSend, [][]byte{e.wire[:ImmediateDataLen]}); err != nil {
				return err
			}
		}
		qp.sent = append(qp.sent, e)
	case kindRead:
		// Completes when its Read Response is delivered (rule 19).
		_, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(OpReadRequest))}, QNReadReq, [][]byte{e.wire[:ReadRequestLen]})
		return err
	case kindAtomic:
		// "An Atomic Operation Request Message MUST reference the RDMA Read
		// Request Queue. That is, the Requester's RDMAP layer MUST request
		// that the DDP layer set the Queue Number field to one", and mark
		// it Untagged (RFC 7306 §5.2.1 items 1 and 5); "The Requester
		// MUST pass to the DDP layer Atomic Operation Request Messages in
		// the order they were submitted by the ULP" (item 6): the send
		// queue's order. It completes when its Response is delivered.
		_, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(OpAtomicRequest))}, QNReadReq, [][]byte{e.wire[:AtomicRequestLen]})
		return err
	case kindInvalidate:
		if err := qp.pd.Invalidate(e.stag); err != nil {
			qp.complete(e, StatusInvSTagErr, err)
		} else {
			qp.complete(e, StatusSuccess, nil)
		}
	}
	return nil
}

// answerAtomic carries out a delivered Atomic Request, unless answerNow
// did, and hands its Atomic Response to DDP (RFC 7306 §5.2.1 item 8: "If
// the Responder receives a valid Atomic Operation Request Message, it
// MUST respond with a valid Atomic Operation Response Message"). The
// queue 1 buffer (one of AtomicIRD) is posted again first, as a Read
// Request's is.
func (qp *QueuePair) answerAtomic(r *response) error {
	if !r.done {
		if err := qp.carryOut(r); err != nil {
			return err
		}
	}
	qp.stream.Post(QNReadReq, r.buf)
	qp.inAtomics.Add(-1)
	// "An Atomic Operation Response Message MUST consume an Untagged
	// Buffer. That is, the Responder RDMAP layer MUST request that the DDP
	// mark the Message as Untagged", and "MUST request that the DDP layer
	// set the Queue Number field to 3" (§5.2.2 items 2 and 3).
	_, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(OpAtomicResponse))}, QNAtomicResp, [][]byte{r.body[:]})
	return err
}

// carryOut carries out r's Atomic Operation on the word and makes
// its Atomic Response in r.body. It returns errStreamStopped when the
// region is no longer valid.
func (qp *QueuePair) carryOut(r *response) error {
	// The device's lock is held across the operation, so that a
	// revocation of the STag (which takes it) either comes first and is
	// seen here, or waits until the word is changed: "the network
	// interface can no longer modify an Advertised Buffer after the ULP
	// revokes remote access rights" (RFC 5040 §8.1.1 item 6).
	d := qp.pd.dev
	d.mu.RLock()
	if !r.reg.valid {
		d.mu.RUnlock()
		// The region was deregistered or invalidated after the request was
		// checked: an error "detected while creating an ... Atomic
		// Response": "the Terminate Message and Error code are sent
		// instead of the Message", with no Terminated DDP or RDMA Header
		// (RFC 7306 §8.1 item 1).
		qp.stream.Fail(term.RDMAPInvalidSTag.With("STag %#08x was invalidated before its Atomic Request was carried out", r.req.STag))
		return errStreamStopped
	}
	orig := executeAtomic(r.word, &r.req)
	d.mu.RUnlock()
	if qp.obs != nil {
		// On the goroutine that changed the word, as a placement is
		// reported on the one that placed it: an observer may read it.
		qp.obs.Observe(trace.Event{Kind: trace.AtomicExecuted, Stream: qp.cfg.StreamID, Tagged: true,
			Opcode: uint8(r.req.Op), STag: r.req.STag, TO: r.req.TO, Len: 8})
	}
	resp := AtomicResponse{OrigReqID: r.req.ReqID, OrigValue: orig}
	resp.Append(r.body[:0])
	r.done = true
	return nil
}

// errStreamStopped: the send route found an error of its own and stopped
// the stream; the Terminate follows.
var errStreamStopped = errors.New("rdmap: the stream stopped")

// llpError stops the stream for an error the LLP reported on sending:
// the LLP stream is lost.
func (qp *QueuePair) llpError(err error) {
	var te *term.Error
	if errors.As(err, &te) {
		qp.stream.Fail(te)
		return
	}
	qp.stream.Close(ddp.Lost(err))
}

// stopped runs on the send goroutine once the stream has stopped: it
// sends the Terminate t (if any) and only then completes the outstanding
// work with errors and raises the asynchronous event, so that an
// application that exits on its first error completion has not lost the
// Terminate.
func (qp *QueuePair) stopped(t []byte) {
	if t != nil {
		_, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(OpTerminate))}, QNTerminate, [][]byte{t})
		if err == nil {
			qp.llp.Flush()
		}
	}
	qp.flush()
	qp.mu.Lock()
	fault := qp.fault
	qp.mu.Unlock()
	ev := AsyncEvent{Type: EventStreamError, QP: qp, Err: fault}
	if errors.Is(fault, ddp.ErrDisconnected) {
		ev.Type = EventDisconnected
	}
	qp.pd.dev.event(ev)
	qp.closeTerminated()
}

// closeTerminated marks the queue pair ended, once: its completion
// queues' waiters stop waiting for it.
func (qp *QueuePair) closeTerminated() {
	qp.termOnce.Do(func() {
		close(qp.terminated)
		err := qp.Err()
		if err == nil {
			err = ErrNotRunning
		}
		qp.cfg.RecvCQ.end(err)
		qp.cfg.SendCQ.end(err)
	})
}
