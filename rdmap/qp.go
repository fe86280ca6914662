package rdmap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

// State is the state of a queue pair's RDMAP stream.
type State uint8

// The stream states.
const (
	StateIdle        State = iota // created, not yet connected
	StateRunning                  // moving data
	StateTerminating              // an error was detected or reported; work is being flushed
	StateClosed                   // closed; nothing more happens
)

func (s State) String() string {
	switch s {
	case StateIdle:
		return "IDLE"
	case StateRunning:
		return "RUNNING"
	case StateTerminating:
		return "TERMINATING"
	case StateClosed:
		return "CLOSED"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// QPConfig configures a queue pair.
type QPConfig struct {
	SendCQ *CompletionQueue // required
	RecvCQ *CompletionQueue // required
	// SRQ, if set, supplies receive buffers instead of PostRecv.
	SRQ *SharedReceiveQueue

	SendDepth int // outstanding send work requests; default 128
	RecvDepth int // posted receive work requests; default 128
	// IRD is the most RDMA Read Requests the peer may have outstanding
	// here, ORD the most this end sends before their responses arrive
	// (RFC 5040 §6.1). Default 8 each; the transport negotiates them.
	IRD, ORD  int
	MaxInline int // largest inline send; default 256

	// Window is the DDP reassembly window the LLP needs: 1 for an ordered
	// LLP (MPA/TCP), its in-flight limit for an unordered one. Default 1.
	Window int
	// StreamID names the stream in events.
	StreamID uint32
	// Observer, if set, receives the stream's events, from its receive
	// and send goroutines: it must be safe for concurrent use.
	Observer trace.Observer
}

// QueuePair is the local endpoint of one RDMAP stream (RFC 5040 §2): a
// send queue, a receive queue, and the completion queues they report to.
//
// A queue pair starts IDLE. A transport connects it to an LLP with Start,
// which makes it RUNNING, and feeds incoming segments to Stream(). An
// error detected here, or a Terminate from the peer, makes it TERMINATING:
// placement stops at once, a Terminate goes to the peer (for an error
// found here), outstanding work requests complete with WR_FLUSH_ERR and a
// STREAM_ERROR event is raised. Close drains outstanding work and makes it
// CLOSED.
type QueuePair struct {
	pd     *ProtectionDomain
	cfg    QPConfig
	stream *ddp.Stream
	obs    trace.Observer

	// Owned by the send goroutine.
	sender *ddp.Sender
	llp    ddp.LLP
	// Owned by whoever holds sendMu: while the LLP holds what it is given
	// (ddp.Batcher), the Sends and Writes it took wait in deferred for
	// their completions.
	holding  bool
	deferred []*sqEntry

	mu         sync.Mutex // guards the fields below
	state      State
	sq         []*sqEntry // posted and not yet completed, in posting order
	sqBase     []*sqEntry // sq's array, SendDepth long
	reads      []*sqEntry // RDMA Reads whose Request was sent, oldest first
	recvPosted int
	termRR     []byte      // the Read Request Header a Terminate copies (R bit)
	fault      *term.Error // what stopped the stream
	terminated chan struct{}
	termOnce   sync.Once

	// PostBatch: while batch > 0, posted work requests wait in held
	// (guarded by mu) and start together when the outermost batch ends.
	batch     int
	held      []job
	heldSpare []job // held's array between batches

	jobs        chan job
	pending     int           // jobs queued or running (guarded by mu)
	sendMu      sync.Mutex    // held while a job runs: the Sender has one user at a time
	urgent      chan []byte   // a Terminate to send before anything else
	readChanged chan struct{} // a read completed, or the stream stopped
	sqChanged   chan struct{} // a send work request completed
	done        chan struct{}
	wg          sync.WaitGroup

	rrBufs [][]byte // QN 1 buffers, one per IRD
}

type sqKind uint8

const (
	kindSend sqKind = iota
	kindWrite
	kindRead
	kindInvalidate
)

type sqEntry struct {
	sglBuf   [1][]byte // the resolved SGL of a one-element list, without a second allocation
	id       uint64
	kind     sqKind
	op       Opcode
	sgl      [][]byte
	n        uint64
	stag     uint32 // Write: remote STag; Read: remote (source) STag; Invalidate: the STag
	to       uint64
	invSTag  uint32
	rr       [ReadRequestLen]byte
	sinkSTag uint32
	signaled bool
	fence    bool

	done   bool
	status Status
	err    error
}

type job struct {
	e *sqEntry // a user work request, or
	// a Read Response
	src      []byte
	sinkSTag uint32
	sinkTO   uint64
	buf      ddp.Buffer
}

// NewQueuePair creates a queue pair in pd.
func (pd *ProtectionDomain) NewQueuePair(cfg QPConfig) (*QueuePair, error) {
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, errors.New("rdmap: a queue pair needs a send and a receive completion queue")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.SendDepth, 128)
	def(&cfg.RecvDepth, 128)
	def(&cfg.IRD, 8)
	def(&cfg.ORD, 8)
	def(&cfg.MaxInline, 256)
	def(&cfg.Window, 1)
	qp := &QueuePair{
		pd: pd, cfg: cfg, obs: cfg.Observer,
		terminated:  make(chan struct{}),
		jobs:        make(chan job, cfg.SendDepth+cfg.IRD+1),
		urgent:      make(chan []byte, 1),
		readChanged: make(chan struct{}, 1),
		sqChanged:   make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	depth := cfg.RecvDepth
	if cfg.SRQ != nil {
		depth = cfg.SRQ.depth
	}
	s, err := ddp.NewStream(ddp.Config{
		Queues: NumQueues, QueueDepth: max(depth, cfg.IRD, 1), Window: cfg.Window,
		ID: cfg.StreamID, ULP: (*receiver)(qp), Observer: cfg.Observer,
	})
	if err != nil {
		return nil, err
	}
	qp.stream = s
	qp.sqBase = make([]*sqEntry, 0, cfg.SendDepth)
	qp.sq = qp.sqBase
	cfg.RecvCQ.attach(qp, true)
	cfg.SendCQ.attach(qp, false)
	pd.dev.mu.Lock()
	pd.qps++
	pd.dev.mu.Unlock()
	if cfg.SRQ != nil {
		s.SetSource(QNSend, cfg.SRQ)
	}
	// "The Data Source MUST ensure that a sufficient number of Untagged
	// Buffers are available on the RDMA Read Request Queue ... to support
	// the maximum number of RDMA Read Requests negotiated" (RFC 5040
	// §5.2.2): one per IRD.
	for i := 0; i < cfg.IRD; i++ {
		b := make([]byte, ReadRequestLen)
		qp.rrBufs = append(qp.rrBufs, b)
		s.Post(QNReadReq, ddp.Buffer{SGL: [][]byte{b}, ID: uint64(i)})
	}
	// One buffer for the single Terminate the peer may send (§5.4).
	s.Post(QNTerminate, ddp.Buffer{SGL: [][]byte{make([]byte, 4+2+ddp.MaxHeaderLen+ReadRequestLen)}})
	return qp, nil
}

// Stream returns the DDP stream the LLP feeds incoming segments to.
func (qp *QueuePair) Stream() *ddp.Stream { return qp.stream }

// State returns the stream's state.
func (qp *QueuePair) State() State {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.state
}

// Err returns the error that stopped the stream, or nil.
func (qp *QueuePair) Err() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.fault == nil {
		return nil
	}
	return qp.fault
}

// Terminated is closed once the stream has stopped on an error and, if
// the error was found here, the Terminate has been handed to the LLP: the
// transport then closes the LLP stream gracefully so that the Terminate
// is delivered (RFC 5040 §6.2.1).
func (qp *QueuePair) Terminated() <-chan struct{} { return qp.terminated }

// Start connects the queue pair to the LLP that carries its segments and
// makes it RUNNING. The transport calls it once the LLP stream is in RDMA
// mode.
func (qp *QueuePair) Start(llp ddp.LLP) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateIdle {
		return fmt.Errorf("rdmap: Start on a queue pair in state %v", qp.state)
	}
	qp.llp = llp
	qp.sender = ddp.NewSender(llp, NumQueues, qp.cfg.StreamID, qp.obs)
	qp.setState(StateRunning)
	qp.wg.Add(1)
	go qp.sendLoop()
	return nil
}

func (qp *QueuePair) setState(s State) {
	qp.state = s
	if qp.obs != nil {
		qp.obs.Observe(trace.Event{Kind: trace.StateChange, Stream: qp.cfg.StreamID, State: s.String()})
	}
}

// PostSend posts a Send.
func (qp *QueuePair) PostSend(wr SendWR) error {
	e := &sqEntry{}
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
	if wr.Inline {
		if err := qp.inline(e); err != nil {
			return err
		}
	}
	return qp.post(e)
}

// PostWrite posts an RDMA Write.
func (qp *QueuePair) PostWrite(wr WriteWR) error {
	e := &sqEntry{}
	sgl, n, err := qp.resolveInto(e.sglBuf[:0], wr.SGL, 0)
	if err != nil {
		return err
	}
	if n > 0 && wr.RemoteTO > ^uint64(0)-(n-1) {
		return fmt.Errorf("rdmap: %d octets at remote TO %#x would wrap", n, wr.RemoteTO)
	}
	*e = sqEntry{sglBuf: e.sglBuf, id: wr.ID, kind: kindWrite, op: OpWrite, sgl: sgl, n: n, stag: wr.RemoteSTag, to: wr.RemoteTO, signaled: !wr.Unsignaled, fence: wr.Fence}
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
	e := &sqEntry{id: wr.ID, kind: kindRead, op: OpReadRequest, n: uint64(len(sink)), stag: wr.RemoteSTag, to: wr.RemoteTO,
		sinkSTag: mr.stag, signaled: !wr.Unsignaled, fence: wr.Fence}
	rr.Append(e.rr[:0])
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
	if qp.state != StateRunning {
		qp.mu.Unlock()
		return fmt.Errorf("%w (it is %v)", ErrNotRunning, qp.state)
	}
	if len(qp.sq) >= qp.cfg.SendDepth {
		qp.mu.Unlock()
		return fmt.Errorf("%w: %d work requests outstanding", ErrSendQueue, len(qp.sq))
	}
	qp.sq = append(qp.sq, e)
	if qp.batch > 0 {
		qp.held = append(qp.held, job{e: e})
		qp.mu.Unlock()
		return nil
	}
	// When nothing else is queued or running, the poster sends the request
	// itself, as Linux siw does: two goroutine hand-offs fewer on the path
	// of a lone request. It only does so when the request cannot wait for
	// Reads (ORD, Fence), so a post never blocks for long.
	reads := len(qp.reads)
	if qp.idle() && qp.startsNow(e, &reads) && qp.sendMu.TryLock() {
		qp.runHere(job{e: e}, nil)
		return nil
	}
	qp.pending++
	qp.jobs <- job{e: e} // never blocks: capacity covers SendDepth + IRD
	qp.mu.Unlock()
	return nil
}

// idle reports whether nothing is queued for the send side or running
// there, and the LLP would take a segment now. The caller holds qp.mu.
func (qp *QueuePair) idle() bool {
	return qp.pending == 0 && len(qp.urgent) == 0 && qp.llpReady()
}

// startsNow reports whether e, posted after *reads RDMA Reads are
// outstanding, can be sent without waiting for Read Responses (ORD,
// Fence), and counts it in *reads if it is a Read. The caller holds
// qp.mu.
func (qp *QueuePair) startsNow(e *sqEntry, reads *int) bool {
	if e.fence && *reads > 0 {
		return false
	}
	if e.kind == kindRead {
		if *reads >= qp.cfg.ORD {
			return false
		}
		*reads++
	}
	return true
}

// PostBatch calls post, which posts work requests (PostSend, PostWrite,
// PostRead, PostInvalidate), and starts them together when post returns,
// as ibv_post_send does with a list of work requests: the send queue
// takes them in order, and an LLP that can (ddp.Batcher: MPA) sends them
// in as few writes as it can, a run of small RDMA Read Requests or Sends
// in one gather write instead of one write (and one wake-up of the peer)
// each. The Sends and Writes among them complete once the LLP has taken
// them all. Work requests that other goroutines post meanwhile join the
// batch. PostBatch returns post's error; what post posted before it still
// starts. Batches nest: the outermost one starts them.
func (qp *QueuePair) PostBatch(post func() error) error {
	qp.mu.Lock()
	qp.batch++
	qp.mu.Unlock()
	defer qp.endBatch()
	return post()
}

// endBatch ends a PostBatch: when it is the outermost, the held work
// requests start. Those that can go without waiting for Read Responses
// are sent on the calling goroutine, as a lone post is when the send side
// is idle; the rest go to the send goroutine, in order after them.
func (qp *QueuePair) endBatch() {
	qp.mu.Lock()
	qp.batch--
	if qp.batch > 0 || len(qp.held) == 0 {
		qp.mu.Unlock()
		return
	}
	held := qp.held
	qp.held, qp.heldSpare = qp.heldSpare, nil
	if qp.state != StateRunning {
		// The stream stopped: flushing reports them (they are on qp.sq).
		qp.endHeld(held)
		qp.mu.Unlock()
		return
	}
	n := 0
	if qp.idle() {
		reads := len(qp.reads)
		for n < len(held) && qp.startsNow(held[n].e, &reads) {
			n++
		}
	}
	if n > 0 && !qp.sendMu.TryLock() {
		n = 0
	}
	// Queued while this goroutine holds sendMu, the rest run after the
	// first n: the send goroutine waits for sendMu.
	for _, j := range held[n:] {
		qp.pending++
		qp.jobs <- j // never blocks: capacity covers SendDepth + IRD
	}
	if n == 0 {
		qp.endHeld(held)
		qp.mu.Unlock()
		return
	}
	qp.pending++
	qp.mu.Unlock()
	qp.runHeld(held[:n])
	qp.mu.Lock()
	qp.pending--
	qp.endHeld(held)
	qp.mu.Unlock()
	qp.sendMu.Unlock()
}

// endHeld keeps the array of a batch's held jobs for the next batch, so
// that batches do not allocate once it has grown. The caller holds qp.mu.
func (qp *QueuePair) endHeld(held []job) {
	if qp.heldSpare == nil {
		clear(held)
		qp.heldSpare = held[:0]
	}
}

// runHeld sends js, on the goroutine that holds sendMu, with the LLP
// holding them until the last has been given to it (ddp.Batcher).
func (qp *QueuePair) runHeld(js []job) {
	b, ok := qp.llp.(ddp.Batcher)
	if !ok || len(js) == 1 {
		for _, j := range js {
			qp.run(j)
		}
		return
	}
	b.Hold()
	qp.holding = true
	for _, j := range js {
		qp.run(j)
	}
	qp.release(b)
}

// release ends a hold of the LLP (ddp.Batcher): the LLP sends what it
// held, and the Sends and Writes among it complete. The caller holds
// sendMu.
func (qp *QueuePair) release(b ddp.Batcher) {
	qp.holding = false
	err := b.Release()
	done := qp.deferred
	qp.deferred = qp.deferred[:0]
	if err != nil {
		// The stream stops; flushing completes what the LLP held.
		qp.llpError(err)
	} else {
		for _, e := range done {
			qp.complete(e, StatusSuccess, nil)
		}
	}
	clear(done)
}

// maxSendBatch bounds the jobs the send goroutine sends in one hold.
const maxSendBatch = 64

// runQueued runs j, on the send goroutine with sendMu held, and with it
// the jobs queued behind it that can start without waiting for Read
// Responses, in one hold of an LLP that can (ddp.Batcher), so that they
// leave together: work requests posted while the send side was busy, and
// Read Responses the receive goroutine could not send itself. It never
// holds the LLP across a wait. It returns how many jobs it ran.
func (qp *QueuePair) runQueued(j job) int {
	b, ok := qp.llp.(ddp.Batcher)
	if !ok || len(qp.jobs) == 0 || !qp.jobStartsNow(j) {
		qp.run(j)
		return 1
	}
	b.Hold()
	qp.holding = true
	n := 0
	var next job
	waits := false
	for {
		qp.run(j)
		n++
		if n == maxSendBatch || len(qp.urgent) > 0 {
			break
		}
		more := false
		select {
		case next, more = <-qp.jobs:
		default:
		}
		if !more {
			break
		}
		if !qp.jobStartsNow(next) {
			waits = true
			break
		}
		j = next
	}
	qp.release(b)
	if waits {
		qp.run(next)
		n++
	}
	return n
}

// jobStartsNow reports whether j can be sent without waiting for Read
// Responses: a Read Response always can.
func (qp *QueuePair) jobStartsNow(j job) bool {
	if j.e == nil {
		return true
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	reads := len(qp.reads)
	return qp.startsNow(j.e, &reads)
}

// runHere sends j on the calling goroutine, which holds qp.mu and
// sendMu and found the send side idle; it releases both. With nw, the
// LLP's BeginNoWait has returned true, and runHere ends it.
func (qp *QueuePair) runHere(j job, nw ddp.NoWaiter) {
	qp.pending++
	qp.mu.Unlock()
	qp.run(j)
	if nw != nil {
		if err := nw.EndNoWait(); err != nil {
			qp.llpError(err)
		}
	}
	qp.mu.Lock()
	qp.pending--
	qp.mu.Unlock()
	qp.sendMu.Unlock()
}

// poller returns the LLP as a ddp.Poller, if it is one and the stream is
// running.
func (qp *QueuePair) poller() ddp.Poller {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateRunning {
		return nil
	}
	p, _ := qp.llp.(ddp.Poller)
	return p
}

// llpReady reports whether the LLP would take a segment now.
func (qp *QueuePair) llpReady() bool {
	h, ok := qp.llp.(ddp.Holder)
	return !ok || h.Ready()
}

// maxNoWaitResponse is the largest Read Response the receive goroutine
// sends itself (respond). What the socket does not take at once is
// copied aside, so the copy stays small.
const maxNoWaitResponse = 256 << 10

// respond sends a Read Response from the receive goroutine when the send
// side is idle and the LLP can take the message without waiting
// (ddp.NoWaiter), as Linux siw sends from its receive path: one goroutine
// hand-off fewer per RDMA Read. Otherwise the send goroutine sends it.
// The receive goroutine never waits here: it only tries the locks, and
// the LLP does not wait for the network.
func (qp *QueuePair) respond(j job) {
	if nw, ok := qp.llp.(ddp.NoWaiter); ok && len(j.src) <= maxNoWaitResponse {
		qp.mu.Lock()
		// Only when nothing is queued or running: Read Responses leave in
		// the order of their Requests (RFC 5040 §5.2.2), and after
		// whatever the send queue has under way.
		if qp.pending == 0 && len(qp.urgent) == 0 && qp.sendMu.TryLock() {
			if nw.BeginNoWait() {
				qp.runHere(j, nw)
				return
			}
			qp.sendMu.Unlock()
		}
		qp.mu.Unlock()
	}
	qp.enqueue(j)
}

// enqueue queues a Read Response for the send side.
func (qp *QueuePair) enqueue(j job) {
	qp.mu.Lock()
	qp.pending++
	qp.mu.Unlock()
	qp.jobs <- j // never blocks: IRD bounds the Read Responses queued
}

// PostRecv posts a receive buffer for one incoming Send. Buffers are
// consumed in the order they are posted.
func (qp *QueuePair) PostRecv(wr RecvWR) error {
	if qp.cfg.SRQ != nil {
		return errors.New("rdmap: this queue pair receives from a shared receive queue; post there")
	}
	sgl, _, err := qp.resolve(wr.SGL, LocalWrite)
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
	if err := qp.stream.Post(QNSend, ddp.Buffer{SGL: sgl, ID: wr.ID}); err != nil {
		if errors.Is(err, ddp.ErrQueueFull) {
			return ErrRecvQueue
		}
		return err
	}
	return nil
}

// complete marks e finished and reports, in posting order, every
// finished request at the head of the send queue (RFC 5040 §5.5 rule 15:
// "RDMA Operations MUST be Completed at the Local Peer in the order that
// they were submitted by the ULP").
func (qp *QueuePair) complete(e *sqEntry, st Status, err error) {
	// Both the send goroutine and the receive goroutine complete work
	// requests: reporting under qp.mu keeps the queue's order.
	qp.mu.Lock()
	e.done, e.status, e.err = true, st, err
	for len(qp.sq) > 0 && qp.sq[0].done {
		qp.report(qp.sq[0])
		qp.sq[0] = nil
		qp.sq = qp.sq[1:]
	}
	if len(qp.sq) == 0 {
		// Start again at the front of the array, so that the next post
		// appends without allocating.
		qp.sq = qp.sqBase[:0]
	}
	qp.mu.Unlock()
	select {
	case qp.sqChanged <- struct{}{}:
	default:
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
	}
	qp.cfg.SendCQ.push(c, false)
	qp.traceCompletion(c)
}

func (qp *QueuePair) traceCompletion(c Completion) {
	if qp.obs != nil {
		qp.obs.Observe(trace.Event{Kind: trace.Completion, Stream: qp.cfg.StreamID, WRID: c.WRID, Status: uint8(c.Status), Len: c.ByteLen, Opcode: uint8(c.Op)})
	}
}

// sendLoop is the send side of the stream: it executes work requests and
// Read Responses in order, one at a time, and sends the Terminate first
// when there is one.
func (qp *QueuePair) sendLoop() {
	defer qp.wg.Done()
	for {
		select {
		case t := <-qp.urgent:
			qp.sendTerminate(t)
			continue
		default:
		}
		select {
		case t := <-qp.urgent:
			qp.sendTerminate(t)
		case j := <-qp.jobs:
			qp.sendMu.Lock()
			n := qp.runQueued(j)
			qp.sendMu.Unlock()
			qp.mu.Lock()
			qp.pending -= n
			qp.mu.Unlock()
		case <-qp.done:
			return
		}
	}
}

func (qp *QueuePair) running() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.state == StateRunning
}

func (qp *QueuePair) run(j job) {
	if !qp.running() {
		return // flushed already
	}
	if j.e == nil {
		qp.sendReadResponse(j)
		return
	}
	e := j.e
	if e.fence && !qp.waitReads(1) {
		return
	}
	var err error
	switch e.kind {
	case kindSend:
		var rsvd [5]byte
		rsvd[0] = byte(MakeControl(e.op))
		if e.op.Invalidates() {
			rsvd[1], rsvd[2], rsvd[3], rsvd[4] = byte(e.invSTag>>24), byte(e.invSTag>>16), byte(e.invSTag>>8), byte(e.invSTag)
		}
		_, err = qp.sender.SendUntagged(rsvd, QNSend, e.sgl)
	case kindWrite:
		err = qp.sender.SendTagged(byte(MakeControl(OpWrite)), e.stag, e.to, e.sgl)
	case kindRead:
		if !qp.waitReads(qp.cfg.ORD) {
			return
		}
		qp.mu.Lock()
		qp.reads = append(qp.reads, e)
		qp.mu.Unlock()
		_, err = qp.sender.SendUntagged([5]byte{byte(MakeControl(OpReadRequest))}, QNReadReq, [][]byte{e.rr[:]})
		if err == nil {
			return // completes when the Read Response is delivered
		}
	case kindInvalidate:
		if ierr := qp.pd.Invalidate(e.stag); ierr != nil {
			qp.complete(e, StatusInvSTagErr, ierr)
			return
		}
	}
	if err != nil {
		qp.llpError(err)
		return
	}
	// "A Send or RDMA Write Message MUST NOT be considered Complete at
	// the Local Peer (Data Source) until it has been successfully
	// completed at the DDP layer." (RFC 5040 §5.5 rule 14) An LLP that
	// holds messages (runHeld) has taken them only when it releases them.
	if qp.holding && e.kind != kindInvalidate {
		qp.deferred = append(qp.deferred, e)
		return
	}
	qp.complete(e, StatusSuccess, nil)
}

// waitReads waits until fewer than limit RDMA Reads are outstanding. It
// returns false if the stream stopped meanwhile.
func (qp *QueuePair) waitReads(limit int) bool {
	for {
		qp.mu.Lock()
		n, st := len(qp.reads), qp.state
		qp.mu.Unlock()
		if st != StateRunning {
			return false
		}
		if n < limit {
			return true
		}
		select {
		case <-qp.readChanged:
		case <-qp.done:
			return false
		}
	}
}

func (qp *QueuePair) signalReads() {
	select {
	case qp.readChanged <- struct{}{}:
	default:
	}
}

func (qp *QueuePair) sendReadResponse(j job) {
	// "The Data Source RDMAP layer MUST pass RDMA Read Response Messages
	// to the DDP layer, in the order that the RDMA Read Request Messages
	// were received" (RFC 5040 §5.2.2): jobs run in order.
	//
	// The Read stops being outstanding here as its Response's last segment
	// leaves: from then on the peer may send its next Read Request, so the
	// Read Request buffer (one of IRD) is posted again just before.
	qp.sender.BeforeLast(func() { qp.stream.Post(QNReadReq, j.buf) })
	if err := qp.sender.SendTagged(byte(MakeControl(OpReadResponse)), j.sinkSTag, j.sinkTO, [][]byte{j.src}); err != nil {
		qp.llpError(err)
	}
}

// llpError stops the stream for an error the LLP reported on sending.
func (qp *QueuePair) llpError(err error) {
	var te *term.Error
	if !errors.As(err, &te) {
		te = term.MPAConnectionLost.With("%v", err)
	}
	qp.stream.Fail(te)
}

func (qp *QueuePair) sendTerminate(t []byte) {
	qp.sendMu.Lock()
	defer qp.sendMu.Unlock()
	qp.sender.SendUntagged([5]byte{byte(MakeControl(OpTerminate))}, QNTerminate, [][]byte{t})
	qp.closeTerminated()
}

func (qp *QueuePair) closeTerminated() { qp.termOnce.Do(func() { close(qp.terminated) }) }

// Close ends the stream. It first waits, until ctx is done, for
// outstanding send work requests to complete (a graceful close drains);
// what is still outstanding then, and every posted receive, completes
// with WR_FLUSH_ERR. Close closes the LLP if it is an io.Closer, and
// returns when the queue pair's goroutines have stopped.
func (qp *QueuePair) Close(ctx context.Context) error {
	for {
		qp.mu.Lock()
		n, st := len(qp.sq), qp.state
		qp.mu.Unlock()
		if n == 0 || st != StateRunning {
			break
		}
		select {
		case <-ctx.Done():
		case <-qp.sqChanged:
			continue
		}
		break
	}
	qp.mu.Lock()
	if qp.state == StateClosed {
		qp.mu.Unlock()
		return nil
	}
	wasRunning := qp.state == StateRunning
	started := qp.llp != nil
	qp.setState(StateClosed)
	qp.mu.Unlock()
	qp.pd.dev.mu.Lock()
	qp.pd.qps--
	qp.pd.dev.mu.Unlock()
	qp.cfg.RecvCQ.detach(qp, true)
	qp.cfg.SendCQ.detach(qp, false)
	qp.stream.Fail(errClosed)
	if wasRunning {
		qp.flush()
	}
	close(qp.done)
	qp.wg.Wait()
	// A poster may be sending inline: wait for it.
	qp.sendMu.Lock()
	qp.sendMu.Unlock()
	if c, ok := qp.llp.(io.Closer); ok && started {
		return c.Close()
	}
	return nil
}

// errClosed stops the stream's placement on Close; it is not reported.
var errClosed = &term.Error{Layer: term.LayerRDMAP, EType: term.ETypeLocalCatastrophic, Detail: "queue pair closed"}

// ReadLimits returns the queue pair's IRD and ORD (ddp.Endpoint).
func (qp *QueuePair) ReadLimits() (ird, ord int) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.cfg.IRD, qp.cfg.ORD
}

// SetORD lowers the ORD before the stream starts, to the peer's IRD as
// the transport negotiated it (RFC 5040 §6.1: "the RDMAP layer MUST NOT
// exceed the maximum number of outstanding, outbound RDMA Read Requests
// that were negotiated").
func (qp *QueuePair) SetORD(ord int) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateIdle {
		return fmt.Errorf("rdmap: SetORD on a queue pair in state %v", qp.state)
	}
	if ord < 0 || ord > qp.cfg.ORD {
		return fmt.Errorf("rdmap: SetORD(%d): the ORD can only be lowered from %d", ord, qp.cfg.ORD)
	}
	qp.cfg.ORD = ord
	return nil
}
