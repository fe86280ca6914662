package rdmap

import (
	"github.com/iwarpgo/iwarp/trace"
)

// complete marks e finished and reports, in posting order, every
// finished request at the head of the send queue (RFC 5040 §5.5 rule 15:
// "RDMA Operations MUST be Completed at the Local Peer in the order that
// they were submitted by the ULP").
func (qp *QueuePair) complete(e *sqEntry, st Status, err error) {
	// Both the send goroutine and the receive goroutine complete work
	// requests: reporting under qp.mu keeps the queue's order.
	qp.mu.Lock()
	qp.completeLocked(e, st, err)
	qp.mu.Unlock()
	signal(qp.sqChanged)
}

// completeLocked is complete for a caller that holds qp.mu and signals
// qp.sqChanged after releasing it.
func (qp *QueuePair) completeLocked(e *sqEntry, st Status, err error) {
	e.done, e.status, e.err = true, st, err
	for len(qp.sq) > 0 && qp.sq[0].done {
		qp.report(qp.sq[0])
		qp.recycle(qp.sq[0])
		qp.sq[0] = nil
		qp.sq = qp.sq[1:]
		qp.started--
	}
	if len(qp.sq) == 0 {
		// Start again at the front of the array, so that the next post
		// appends without allocating.
		qp.sq = qp.sqBase[:0]
	}
}

// awaitsWire reports whether the send queue's next completion can come
// only from incoming segments, so that a waiter on the send queue's
// completions may do the receive work itself (CompletionQueue.Wait): the
// queue holds RDMA Reads only, or one Atomic Operation. Only their
// Responses complete them, and completions are reported in order, so a
// Send or Write posted meanwhile (completed by the send route) is not
// reported before them. A window of Reads is then received, completed and
// posted again by one goroutine, without a wake-up per completion
// reported; a window of Atomics is not, as their small Responses are
// received faster beside the goroutine that posts (docs/performance.md).
func (qp *QueuePair) awaitsWire() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if len(qp.sq) == 1 && qp.sq[0].kind == kindAtomic {
		return true
	}
	for _, e := range qp.sq {
		if e.kind != kindRead {
			return false
		}
	}
	return len(qp.sq) > 0
}

// newEntry returns a send queue entry to fill: one the queue pair has
// finished with, or a new one, so that posting allocates nothing once the
// send queue has been as deep as it gets.
func (qp *QueuePair) newEntry() *sqEntry {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if n := len(qp.spare); n > 0 {
		e := qp.spare[n-1]
		qp.spare = qp.spare[:n-1]
		return e
	}
	return new(sqEntry)
}

// recycle keeps a completed, reported entry for newEntry. Nothing refers
// to it any more: the LLP let go of its memory at the Flush that
// preceded its completion (a Read or Atomic Request's, before its
// Response could come). The entries a flush completes are left to the
// collector, since the send route may still hold them. The caller holds
// qp.mu.
func (qp *QueuePair) recycle(e *sqEntry) {
	if len(qp.spare) < cap(qp.spare) {
		*e = sqEntry{}
		qp.spare = append(qp.spare, e)
	}
}

func (qp *QueuePair) report(e *sqEntry) {
	if !e.signaled && e.status == StatusSuccess {
		return
	}
	c := Completion{WRID: e.id, Status: e.status, ByteLen: uint32(e.n), QP: qp, Err: e.err}
	switch e.kind {
	case kindSend:
		c.Op = WorkSend
	case kindWrite:
		c.Op = WorkWrite
	case kindRead:
		c.Op = WorkRead
	case kindInvalidate:
		c.Op, c.ByteLen = WorkLocalInvalidate, 0
	case kindAtomic:
		c.Op = WorkFetchAdd
		if e.aop == CmpSwap {
			c.Op = WorkCompSwap
		}
	}
	qp.traceCompletion(c)
	qp.cfg.SendCQ.push(c, false)
}

// traceCompletion observes a completion before it goes on its queue, so
// that an observer sees it before the ULP can poll it and act.
func (qp *QueuePair) traceCompletion(c Completion) {
	if qp.obs != nil {
		qp.obs.Observe(trace.Event{Kind: trace.Completion, Stream: qp.cfg.StreamID, WRID: c.WRID, Status: uint8(c.Status), Len: c.ByteLen, Opcode: uint8(c.Op)})
	}
}
