package rdmap

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/iwarpgo/iwarp/ddp"
)

// PostSend posts a Send, or with wr.WithImm an Immediate Data message.
func (qp *QueuePair) PostSend(wr SendWR) error {
	if wr.WithImm {
		return qp.postImmediate(wr)
	}
	e := qp.newEntry()
	sgl, n, err := qp.resolveInto(e.sglBuf[:0], wr.SGL, 0)
	if err != nil {
		return err
	}
	op := OpSend
	switch {
	case wr.Solicited && wr.Invalidate:
		op = OpSendSEInvalidate
	case wr.Solicited:
		op = OpSendSE
	case wr.Invalidate:
		op = OpSendInvalidate
	}
	*e = sqEntry{sglBuf: e.sglBuf, id: wr.ID, kind: kindSend, op: op, sgl: sgl, n: n, invSTag: wr.InvalidateSTag, signaled: !wr.Unsignaled, fence: wr.Fence}
	if wr.Data != nil {
		if len(wr.SGL) > 0 {
			return errors.New("rdmap: a Send with Data has an empty SGL")
		}
		if len(wr.Data) > qp.cfg.MaxInline {
			return fmt.Errorf("%w: %d > %d", ErrInlineTooBig, len(wr.Data), qp.cfg.MaxInline)
		}
		e.sgl, e.n = [][]byte{bytes.Clone(wr.Data)}, uint64(len(wr.Data))
	} else if wr.Inline {
		if err := qp.inline(e); err != nil {
			return err
		}
	}
	return qp.post(e)
}

// PostWrite posts an RDMA Write.
func (qp *QueuePair) PostWrite(wr WriteWR) error {
	e := qp.newEntry()
	sgl, n, err := qp.resolveInto(e.sglBuf[:0], wr.SGL, 0)
	if err != nil {
		return err
	}
	if n > 0 && wr.RemoteTO > ^uint64(0)-(n-1) {
		return fmt.Errorf("rdmap: %d octets at remote TO %#x would wrap", n, wr.RemoteTO)
	}
	*e = sqEntry{sglBuf: e.sglBuf, id: wr.ID, kind: kindWrite, op: OpWrite, sgl: sgl, n: n, stag: wr.RemoteSTag, to: wr.RemoteTO, signaled: !wr.Unsignaled, fence: wr.Fence}
	if wr.WithImm {
		if qp.cfg.NoImmediate {
			return fmt.Errorf("%w: a Write with Immediate Data (QPConfig.NoImmediate)", ErrNotSupported)
		}
		e.imm = OpImmediate
		if wr.Solicited {
			e.imm = OpImmediateSE
		}
		(&ImmediateData{Data: wr.Imm}).Append(e.wire[:0])
	}
	if wr.Inline {
		if err := qp.inline(e); err != nil {
			return err
		}
	}
	return qp.post(e)
}

// PostRead posts an RDMA Read.
func (qp *QueuePair) PostRead(wr ReadWR) error {
	if _, ord := qp.ReadLimits(); ord == 0 {
		return errors.New("rdmap: the ORD is 0: the peer accepts no RDMA Read Requests")
	}
	sink, err := qp.resolveOne(wr.Local, LocalWrite)
	if err != nil {
		return err
	}
	mr := wr.Local.MR.r
	rr := ReadRequest{
		SinkSTag: mr.stag, SinkTO: mr.base + wr.Local.Offset, RDMARDSZ: wr.Local.Length,
		SrcSTag: wr.RemoteSTag, SrcTO: wr.RemoteTO,
	}
	e := qp.newEntry()
	*e = sqEntry{id: wr.ID, kind: kindRead, op: OpReadRequest, n: uint64(len(sink)), stag: wr.RemoteSTag, to: wr.RemoteTO,
		sinkSTag: mr.stag, sinkTO: rr.SinkTO, signaled: !wr.Unsignaled, fence: wr.Fence}
	rr.Append(e.wire[:0])
	return qp.post(e)
}

// postImmediate posts an Immediate Data message (RFC 7306 §6): "The ULP
// passes to the RDMAP Layer ... 8 bytes of ULP Immediate Data" (§6.1).
func (qp *QueuePair) postImmediate(wr SendWR) error {
	if qp.cfg.NoImmediate {
		return fmt.Errorf("%w: Immediate Data (QPConfig.NoImmediate)", ErrNotSupported)
	}
	if len(wr.SGL) > 0 || wr.Invalidate {
		// Figure 3: "ULP Message allowed in the RDMA Message: No".
		return errors.New("rdmap: Immediate Data carries no payload and no Invalidate STag (RFC 7306 Figure 3)")
	}
	op := OpImmediate
	if wr.Solicited {
		op = OpImmediateSE
	}
	e := qp.newEntry()
	*e = sqEntry{id: wr.ID, kind: kindSend, op: op, signaled: !wr.Unsignaled, fence: wr.Fence}
	(&ImmediateData{Data: wr.Imm}).Append(e.wire[:0])
	return qp.post(e)
}

// PostAtomic posts an Atomic Operation (RFC 7306 §5): FetchAdd or
// CmpSwap on the peer's 64-bit word at wr.RemoteSTag and wr.RemoteTO.
// It completes (WorkFetchAdd, WorkCompSwap) when the Atomic Response has
// been delivered and the Original Remote Data Value written to wr.Local;
// "the Requester MUST NOT consider the contents of the Tagged Buffer at
// the Responder to be modified by that specific Atomic Operation until
// the Atomic Operation Response Message has been Delivered to RDMAP at the
// Requester" (§5.4 rule 1). At most AtomicORD are outstanding; later ones
// wait in the send queue. A peer without atomics answers with a
// Terminate: the work request then completes with an error (REM_OP_ERR
// for Unexpected OpCode; Linux siw's Terminate, its nibbles swapped, reads
// as another triple and flushes it) and the stream stops.
func (qp *QueuePair) PostAtomic(wr AtomicWR) error {
	if qp.cfg.NoAtomics {
		return fmt.Errorf("%w: Atomic Operations (QPConfig.NoAtomics)", ErrNotSupported)
	}
	if _, ord := qp.AtomicLimits(); ord == 0 {
		return errors.New("rdmap: the atomic ORD is 0: the peer accepts no Atomic Requests")
	}
	req, err := wr.request()
	if err != nil {
		return err
	}
	local, err := qp.resolveOne(wr.Local, LocalWrite)
	if err != nil {
		return err
	}
	if len(local) != 8 {
		return fmt.Errorf("rdmap: an Atomic Operation's local SGE is 8 octets (the 64-bit Original Remote Data Value), not %d", len(local))
	}
	// "The value used in this field is selected by the RNIC that sends the
	// message, and it is reflected back to the Local Peer in the Atomic
	// Operation Response message." (§5.2.1)
	req.ReqID = qp.reqID.Add(1)
	e := qp.newEntry()
	*e = sqEntry{id: wr.ID, kind: kindAtomic, op: OpAtomicRequest, n: 8, stag: wr.RemoteSTag, to: wr.RemoteTO,
		aop: wr.Op, reqID: req.ReqID, signaled: !wr.Unsignaled, fence: wr.Fence}
	e.sglBuf[0] = local
	e.sgl = e.sglBuf[:]
	req.Append(e.wire[:0])
	return qp.post(e)
}

// PostInvalidate posts a local invalidation of stag, ordered with the
// send queue's other work requests.
func (qp *QueuePair) PostInvalidate(id uint64, stag uint32, unsignaled bool) error {
	return qp.post(&sqEntry{id: id, kind: kindInvalidate, stag: stag, signaled: !unsignaled})
}

func (qp *QueuePair) inline(e *sqEntry) error {
	if e.n > uint64(qp.cfg.MaxInline) {
		return fmt.Errorf("%w: %d > %d", ErrInlineTooBig, e.n, qp.cfg.MaxInline)
	}
	b := make([]byte, 0, e.n)
	for _, s := range e.sgl {
		b = append(b, s...)
	}
	e.sgl = [][]byte{b}
	return nil
}

func (qp *QueuePair) post(e *sqEntry) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateRunning {
		return fmt.Errorf("%w (it is %v)", ErrNotRunning, qp.state)
	}
	if qp.closing {
		return fmt.Errorf("%w (it is closing)", ErrNotRunning)
	}
	if len(qp.sq) >= qp.cfg.SendDepth {
		return fmt.Errorf("%w: %d work requests outstanding", ErrSendQueue, len(qp.sq))
	}
	if len(qp.sq) == cap(qp.sq) {
		// Completions take from the front, so a queue that never
		// empties (a window of Reads kept full) slides to the end of
		// its array: move it back to the front, where SendDepth
		// entries fit, rather than let append allocate another.
		base := qp.sqBase[:cap(qp.sqBase)]
		n := copy(base, qp.sq)
		clear(base[n:])
		qp.sq = base[:n]
	}
	qp.sq = append(qp.sq, e)
	if qp.batch == 0 {
		qp.kick()
	}
	return nil
}

// kick has the queued work sent: on the calling goroutine, when the send
// side is idle and the LLP can write now, or else by the send goroutine.
// The caller holds qp.mu, which kick releases and takes again. Sending
// here saves a goroutine hand-off per message, most of a small message's
// round trip on a small machine (docs/performance.md); the caller may
// then wait for room in the LLP, as a writer to a socket does.
func (qp *QueuePair) kick() {
	if (qp.receiveFirst && !qp.heard.Load()) || !qp.sendMu.TryLock() {
		signal(qp.wake)
		return
	}
	qp.mu.Unlock()
	qp.drain()
	qp.sendMu.Unlock()
	qp.mu.Lock()
}

// PostBatch calls post, which posts work requests (PostSend, PostWrite,
// PostRead, PostAtomic, PostInvalidate), and starts them together when
// post returns, as ibv_post_send does with a list of work requests: the
// send queue takes them in order, and the send goroutine hands them to
// the LLP in one go, which an LLP that gathers writes (MPA) sends in as
// few writes as it can: a run of small RDMA Read Requests or Sends in one
// gather write instead of one write (and one wake-up of the peer) each. Work
// requests that other goroutines post meanwhile join the batch.
// PostBatch returns post's error; what post posted before it still
// starts. Batches nest: the outermost one starts them.
func (qp *QueuePair) PostBatch(post func() error) error {
	qp.mu.Lock()
	qp.batch++
	qp.mu.Unlock()
	defer func() {
		qp.mu.Lock()
		qp.batch--
		if qp.batch == 0 {
			qp.kick()
		}
		qp.mu.Unlock()
	}()
	return post()
}

// poller returns the LLP while the stream runs, if it is a ddp.Poller,
// for a completion queue's waiter to receive on.
func (qp *QueuePair) poller() ddp.Poller {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateRunning {
		return nil
	}
	return qp.poll
}

// signal wakes the goroutine that waits on ch (of capacity 1), without
// waiting: a signal already pending is enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// PostRecv posts a receive buffer for one incoming Send. Buffers are
// consumed in the order they are posted.
func (qp *QueuePair) PostRecv(wr RecvWR) error {
	if qp.cfg.SRQ != nil {
		return errors.New("rdmap: this queue pair receives from a shared receive queue; post there")
	}
	var one []byte
	var sgl [][]byte
	var err error
	if len(wr.SGL) == 1 {
		if one, err = qp.resolveOne(wr.SGL[0], LocalWrite); err != nil {
			err = fmt.Errorf("SGE 0: %w", err)
		}
	} else {
		sgl, _, err = qp.resolve(wr.SGL, LocalWrite)
	}
	if err != nil {
		return err
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state > StateRunning {
		return fmt.Errorf("%w (it is %v)", ErrNotRunning, qp.state)
	}
	if qp.stream.Posted(QNSend) >= qp.cfg.RecvDepth {
		return fmt.Errorf("%w: %d receives posted", ErrRecvQueue, qp.cfg.RecvDepth)
	}
	if sgl == nil {
		// A one-element list goes in the next of recvOne's lists, which
		// are used in turn: the k-th one posted is the k-th consumed
		// (RFC 5041 §5.1.2), and RecvDepth bounds those posted, so a
		// list is taken again only 2 * RecvDepth posts later, when the
		// delivery that used it has long returned. Posting allocates
		// nothing.
		slot := &qp.recvOne[qp.recvNext]
		slot[0] = one
		sgl = slot[:]
	}
	if err := qp.stream.Post(QNSend, ddp.Buffer{SGL: sgl, ID: wr.ID}); err != nil {
		if errors.Is(err, ddp.ErrQueueFull) {
			return ErrRecvQueue
		}
		return err
	}
	if len(wr.SGL) == 1 {
		qp.recvNext = (qp.recvNext + 1) % len(qp.recvOne)
	}
	return nil
}
