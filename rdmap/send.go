package rdmap

import (
	"errors"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// The send side of a queue pair. Posting goroutines queue work requests
// on the send queue (qp.sq), the receive goroutine queues Read Responses
// (qp.queued) and the Terminate (qp.terminate). One route sends them:
// drain, run by whoever holds sendMu. It takes what can start at once,
// hands it to DDP and the LLP and then flushes the LLP, so that what was
// queued together leaves together (MPA gathers the FPDUs into one
// writev), and only then completes the Sends and Writes among it (RFC
// 5040 §5.5 rule 14). A posting goroutine drains when it finds the send
// side idle (QueuePair.kick); the queue pair's send goroutine drains
// otherwise: the receive goroutine never writes (if both ends' receive
// goroutines waited for room to write, neither would read again).

// maxBatch bounds the messages the send goroutine hands to the LLP
// between two flushes, and maxBatchBytes their payload: completions are
// reported after each flush.
const (
	maxBatch      = 32
	maxBatchBytes = 1 << 20
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

// take returns the work that can start now: the Read Responses queued,
// then the send queue's work requests in order, up to the first that
// must wait for RDMA Read Responses to arrive (the ORD is reached, or it
// is fenced behind outstanding Reads). A Read Request it takes counts as
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
	// Placed or Delivered" (RFC 5040 §5.5 rule 12): Read Responses do not
	// wait behind work requests that wait for Reads.
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
		e := qp.sq[qp.started]
		if e.fence && len(qp.reads) > 0 {
			break
		}
		if e.kind == kindRead {
			// "the RDMAP layer MUST NOT exceed the maximum number of
			// outstanding, outbound RDMA Read Requests that were
			// negotiated" (RFC 5040 §6.1)
			if len(qp.reads) >= qp.cfg.ORD {
				break
			}
			qp.reads = append(qp.reads, e)
		}
		qp.started++
		wrs = append(wrs, e)
		bytes += int(e.n)
	}
	qp.mu.Unlock()
	return responses, wrs, len(responses)+len(wrs) == 0
}

// send hands the messages to DDP, flushes the LLP and completes the Sends
// and Writes among them.
func (qp *QueuePair) send(responses []response, wrs []*sqEntry) {
	defer func() {
		clear(qp.sent)
		qp.sent = qp.sent[:0]
	}()
	for _, r := range responses {
		// "The Data Source RDMAP layer MUST pass RDMA Read Response
		// Messages to the DDP layer, in the order that the RDMA Read
		// Request Messages were received" (RFC 5040 §5.2.2). The Read
		// Request buffer (one of IRD) is posted again first: the peer
		// sends its next Read Request only after this Response.
		qp.stream.Post(QNReadReq, r.buf)
		if err := qp.sender.SendTagged(byte(MakeControl(OpReadResponse)), r.sinkSTag, r.sinkTO, [][]byte{r.src}); err != nil {
			qp.llpError(err)
			return
		}
	}
	for _, e := range wrs {
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
		qp.sent = append(qp.sent, e)
	case kindRead:
		// Completes when its Read Response is delivered (rule 19).
		_, err := qp.sender.SendUntagged([5]byte{byte(MakeControl(OpReadRequest))}, QNReadReq, [][]byte{e.rr[:]})
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

func (qp *QueuePair) closeTerminated() { qp.termOnce.Do(func() { close(qp.terminated) }) }
