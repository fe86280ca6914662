package rdmap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/iwarpgo/iwarp/ddp"
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
	// SRQ, if set, supplies receive buffers instead of PostRecv. The
	// queue pair holds at most RecvDepth of them at once, and no more
	// than its stream's reassembly window (Window, or the transport's): a
	// peer that asks for more is refused (RFC 5040 §8.1.2 item 8's fair
	// share; SharedReceiveQueue).
	SRQ *SharedReceiveQueue

	SendDepth int // outstanding send work requests; default 128
	RecvDepth int // posted receive work requests; default 128
	// IRD is the most RDMA Read Requests the peer may have outstanding
	// here, ORD the most this end sends before their responses arrive
	// (RFC 5040 §6.1). Default 8 each; the transport negotiates them.
	IRD, ORD  int
	MaxInline int // largest inline send; default 256

	// AtomicIRD is the most Atomic Requests (RFC 7306 §5) the peer may
	// have outstanding here, AtomicORD the most this end sends before
	// their Atomic Responses arrive: the atomic counterparts of IRD and
	// ORD, which RFC 7306 §5.2 has Atomic Requests share the
	// infrastructure of ("Reusing the same Queue Number for Atomic
	// Request messages allows the Atomic Operations to reuse the same
	// infrastructure (e.g., Outbound and Inbound RDMA Read Queue Depth
	// (ORD/IRD) flow control)"). The responder posts AtomicIRD buffers on
	// queue 1 besides the IRD's (§5.2.2 rule 4) and the requester
	// AtomicORD buffers on queue 3 (rule 5). Neither RFC 7306 nor RFC
	// 6581 puts them on the wire: they are "the maximum number of Atomic
	// Operation Requests negotiated by the ULP", which the ULP agrees
	// with its peer and sets with SetAtomicLimits before connecting. A
	// requester that sends more than the responder's AtomicIRD gets a
	// Terminate "no buffer available" (0x1/0x2/0x02). Default 8 each.
	AtomicIRD, AtomicORD int
	// NoAtomics makes the queue pair an RNIC without RFC 7306's Atomic
	// Operations, as Linux siw is: PostAtomic fails with ErrNotSupported,
	// and an Atomic Request or Response from the peer is answered with a
	// Terminate "Unexpected OpCode" (0x0/0x2/0x06), as RFC 7306 §1.1
	// says a peer without them reports.
	NoAtomics bool
	// NoImmediate does the same for RFC 7306's Immediate Data.
	NoImmediate bool

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
// STREAM_ERROR event is raised. The end of the LLP stream does the same
// without a Terminate; an orderly one (the peer disconnected) raises
// DISCONNECTED instead. Close drains outstanding work and makes it
// CLOSED.
//
// Its methods may be called from any goroutine. One route sends for a
// queue pair: work is queued, and a posting goroutine that finds the send
// side idle hands it to the LLP itself; otherwise the queue pair's send
// goroutine does, as it does for what the receive side queues (Read
// Responses, the Terminate) and for what must wait for RDMA Read
// Responses.
type QueuePair struct {
	pd     *ProtectionDomain
	cfg    QPConfig
	stream *ddp.Stream
	obs    trace.Observer

	// Owned by whoever holds sendMu: the goroutine draining the queue.
	sendMu    sync.Mutex
	sender    *ddp.Sender
	llp       ddp.LLP
	poll      ddp.Poller // llp, if it is one
	sent      []*sqEntry // Sends and Writes given to the LLP, to complete after its Flush
	responses []response // taken from qp.queued for one batch
	wrs       []*sqEntry // taken from the send queue for one batch
	now       response   // the Response answer sends (its body must not be on a stack)

	// respMu is held while the LLP may read a Read Response's Data Source
	// memory: from the check that its STag is still valid to the WriteNow
	// or Flush that lets go of the payload. Deregister and a local
	// Invalidate wait for it, so that no octet of memory revoked before
	// its Response was sent leaves (revoke).
	respMu sync.Mutex

	mu         sync.Mutex // guards the fields below
	state      State
	closing    bool        // Close has begun: posts are refused while it drains
	sq         []*sqEntry  // posted and not yet completed, in posting order
	sqBase     []*sqEntry  // sq's array, SendDepth long
	spare      []*sqEntry  // entries completed and reported, for the next posts
	recvOne    [][1][]byte // the SGLs of one-element receives, used in turn (PostRecv)
	recvNext   int
	started    int        // sq[:started] have been started; the rest wait for the send goroutine
	queued     []response // Read and Atomic Responses waiting to be sent, in Request order
	reads      []*sqEntry // RDMA Reads whose Request was sent, oldest first
	atomics    []*sqEntry // Atomic Operations whose Request was sent, oldest first
	qn1MSN     uint32     // the queue 1 MSN of the next Read or Atomic Request taken
	batch      int        // PostBatch nesting: posts wait for the outermost to end
	termRR     []byte     // the Read Request Header a Terminate copies (R bit)
	fault      error      // what stopped the stream
	terminate  []byte     // the Terminate for the send goroutine to send, then flush
	faulted    bool       // the stream stopped: the send goroutine flushes
	terminated chan struct{}
	termOnce   sync.Once
	// receiveFirst: the LLP writes nothing before the stream has received
	// a segment (ddp.Start); heard: it has.
	receiveFirst bool
	heard        atomic.Bool

	// The responder's Read and Atomic Requests that hold a queue 1 buffer
	// (delivered, their buffer not yet posted again): each kind is bounded
	// by its own limit, IRD and AtomicIRD, though they share the queue's
	// buffers. The receive side adds, the send route subtracts.
	inReads, inAtomics atomic.Int32
	// reqID numbers this end's Atomic Requests (their Request Identifier).
	reqID atomic.Uint32

	wake      chan struct{} // work for the send goroutine
	sqChanged chan struct{} // a send work request completed
	done      chan struct{}
	wg        sync.WaitGroup
}

type sqKind uint8

const (
	kindSend sqKind = iota
	kindWrite
	kindRead
	kindInvalidate
	kindAtomic
)

type sqEntry struct {
	sglBuf  [1][]byte // the resolved SGL of a one-element list, without a second allocation
	id      uint64
	kind    sqKind
	op      Opcode // the message sent; a Write with Immediate Data: OpWrite
	sgl     [][]byte
	n       uint64
	stag    uint32 // Write: remote STag; Read: remote (source) STag; Invalidate: the STag
	to      uint64
	invSTag uint32
	// wire holds the RDMA header sent after the DDP header: a Read
	// Request's 28 octets, an Atomic Request's 52, or the 8 of Immediate
	// Data (a Send with Imm, a Write with Imm), until the request
	// completes: the LLP may keep it until its Flush.
	wire     [AtomicRequestLen]byte
	imm      Opcode // a Write followed by Immediate Data: OpImmediate or OpImmediateSE; else 0
	aop      AtomicOp
	reqID    uint32 // Atomic: the Request Identifier
	qn1MSN   uint32 // Read and Atomic: the MSN of the Request on queue 1
	sinkSTag uint32 // Read: the Data Sink STag and TO; n is the length
	sinkTO   uint64
	signaled bool
	fence    bool

	done   bool
	status Status
	err    error
}

// response is an RDMA Read Response to send: the Data Source memory the
// Read Request named, where it goes, and the Read Request buffer (one of
// IRD) to post again. Or, with atomic set, an Atomic Request to carry out
// and answer (RFC 7306 §5): its target word, the region it is in, the
// request, the Atomic Response's octets once made, and the queue 1
// buffer (one of AtomicIRD) to post again.
type response struct {
	src      []byte
	reg      *region // the region src or word lies in: its STag may be revoked before the Response goes
	sinkSTag uint32
	sinkTO   uint64
	buf      ddp.Buffer

	atomic bool
	word   *uint64
	req    AtomicRequest
	done   bool // carried out: body holds the Atomic Response
	body   [AtomicResponseLen]byte
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
	def(&cfg.AtomicIRD, 8)
	def(&cfg.AtomicORD, 8)
	if cfg.NoAtomics {
		cfg.AtomicIRD, cfg.AtomicORD = 0, 0
	}
	qp := &QueuePair{
		pd: pd, cfg: cfg, obs: cfg.Observer,
		terminated: make(chan struct{}),
		wake:       make(chan struct{}, 1),
		sqChanged:  make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	depth := cfg.RecvDepth
	if cfg.SRQ != nil {
		depth = cfg.SRQ.depth
	}
	s, err := ddp.NewStream(ddp.Config{
		Queues: NumQueues, QueueDepth: max(depth, cfg.IRD+cfg.AtomicIRD, cfg.AtomicORD, 1), Window: cfg.Window,
		ID: cfg.StreamID, ULP: (*receiver)(qp), Observer: cfg.Observer,
	})
	if err != nil {
		return nil, err
	}
	qp.stream = s
	qp.sqBase = make([]*sqEntry, 0, cfg.SendDepth)
	qp.sq = qp.sqBase
	qp.spare = make([]*sqEntry, 0, cfg.SendDepth)
	qp.recvOne = make([][1][]byte, 2*cfg.RecvDepth)
	cfg.RecvCQ.attach(qp, true)
	cfg.SendCQ.attach(qp, false)
	pd.dev.mu.Lock()
	pd.qps = append(pd.qps, qp)
	pd.dev.mu.Unlock()
	if cfg.SRQ != nil {
		// A stream holds at most as many of the shared buffers as it may
		// have messages in flight (its reassembly window of segments, which
		// the transport may widen), and no more than its RecvDepth.
		s.SetSource(QNSend, cfg.SRQ, cfg.RecvDepth)
	}
	return qp, nil
}

// Stream returns the DDP stream the LLP feeds incoming segments to. It
// is part of ddp.Endpoint, for transports; programs do not call it.
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

// Start (ddp.Endpoint, for transports: programs connect with package
// iwarp, mpa or sctpddp) connects the queue pair to the LLP that carries
// its segments and
// makes it RUNNING. The transport calls it once the LLP stream is in RDMA
// mode; with an RTR indication (RFC 6581 §9.2) the queue pair sends that
// zero-length message before anything else, as an unsignaled work
// request of its own.
func (qp *QueuePair) Start(llp ddp.LLP, how ddp.Start) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateIdle {
		return fmt.Errorf("rdmap: Start on a queue pair in state %v", qp.state)
	}
	qp.llp = llp
	qp.poll, _ = llp.(ddp.Poller)
	qp.sender = ddp.NewSender(llp, NumQueues, qp.cfg.StreamID, qp.obs)
	// "The Data Source MUST ensure that a sufficient number of Untagged
	// Buffers are available on the RDMA Read Request Queue ... to support
	// the maximum number of RDMA Read Requests negotiated" (RFC 5040
	// §5.2.2), and "The Responder MUST ensure that a sufficient number of
	// Untagged Buffers are available on the RDMA Read Request Queue
	// (Queue with DDP Queue Number 1) to support the maximum number of
	// Atomic Operation Requests negotiated by the ULP in addition to the
	// maximum number of RDMA Read Requests negotiated by the ULP" (RFC
	// 7306 §5.2.2 rule 4): IRD + AtomicIRD, and no more, so that a peer
	// that exceeds both finds no buffer (and one that exceeds either is
	// refused as if it had found none: deliverReadRequest,
	// deliverAtomicRequest). Each holds an Atomic Request, the longer, so
	// that one reaches RDMAP's opcode check even when atomics are off.
	for i := 0; i < qp.cfg.IRD+qp.cfg.AtomicIRD; i++ {
		qp.stream.Post(QNReadReq, ddp.Buffer{SGL: [][]byte{make([]byte, AtomicRequestLen)}, ID: uint64(i)})
	}
	// "The Requester MUST ensure that a sufficient number of Untagged
	// Buffers are available on the RDMA Atomic Response Queue (Queue with
	// DDP Queue Number 3) to support the maximum number of Atomic
	// Operation Requests negotiated by the ULP." (RFC 7306 §5.2.2 rule 5)
	for i := 0; i < qp.cfg.AtomicORD; i++ {
		qp.stream.Post(QNAtomicResp, ddp.Buffer{SGL: [][]byte{make([]byte, AtomicResponseLen)}, ID: uint64(i)})
	}
	qp.queued = make([]response, 0, qp.cfg.IRD+qp.cfg.AtomicIRD)
	// One buffer for the single Terminate the peer may send (§5.4).
	qp.stream.Post(QNTerminate, ddp.Buffer{SGL: [][]byte{make([]byte, 4+2+ddp.MaxHeaderLen+ReadRequestLen)}})
	qp.receiveFirst = how.ReceiveFirst
	switch how.RTR {
	case ddp.RTRNone:
	case ddp.RTRWrite:
		qp.sq = append(qp.sq, &sqEntry{kind: kindWrite, op: OpWrite})
	case ddp.RTRSend:
		qp.sq = append(qp.sq, &sqEntry{kind: kindSend, op: OpSend})
	case ddp.RTRRead:
		// A zero-length RDMA Read Request: "the Data Source RDMAP ...
		// MUST NOT validate the Data Source STag and Data Source Tagged
		// Offset ... and MUST respond with a zero-length RDMA Read
		// Response Message" (RFC 5040 §4.4), which completes it.
		e := &sqEntry{kind: kindRead, op: OpReadRequest}
		(&ReadRequest{}).Append(e.wire[:0])
		qp.sq = append(qp.sq, e)
	default:
		return fmt.Errorf("rdmap: Start with an unknown RTR indication %v", how.RTR)
	}
	qp.setState(StateRunning)
	qp.wg.Add(1)
	go qp.sendLoop()
	if len(qp.sq) > 0 {
		signal(qp.wake)
	}
	return nil
}

func (qp *QueuePair) setState(s State) {
	qp.state = s
	if qp.obs != nil {
		qp.obs.Observe(trace.Event{Kind: trace.StateChange, Stream: qp.cfg.StreamID, State: s.String()})
	}
}

// Close ends the stream. It first waits, until ctx is done, for
// outstanding send work requests to complete (a graceful close drains;
// work posted once Close has begun is refused with ErrNotRunning);
// what is still outstanding then, and every posted receive, completes
// with WR_FLUSH_ERR. Close closes the LLP if it is an io.Closer, and
// returns when the queue pair's goroutines have stopped.
func (qp *QueuePair) Close(ctx context.Context) error {
	// "If the Local Peer ULP indicates graceful teardown, ... any further
	// data transfer requests by the Local Peer ULP MUST return an error."
	// (RFC 5041 §6.2.1)
	qp.mu.Lock()
	qp.closing = true
	qp.mu.Unlock()
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
	started := qp.llp != nil
	qp.setState(StateClosed)
	qp.fault = errClosed
	qp.mu.Unlock()
	qp.cfg.RecvCQ.detach(qp, true)
	qp.cfg.SendCQ.detach(qp, false)
	// Placement stops; the state is CLOSED already, so this raises no
	// event and sends no Terminate.
	qp.stream.Close(ddp.ErrDisconnected)
	qp.flush()
	close(qp.done)
	var err error
	if c, ok := qp.llp.(io.Closer); ok && started {
		// Closing the LLP also ends a write the send goroutine may be
		// waiting in.
		err = c.Close()
	}
	qp.wg.Wait()
	// A posting goroutine may be sending: wait for it.
	qp.sendMu.Lock()
	qp.sendMu.Unlock()
	// The domain counts the queue pair until its placements have ended:
	// revoking memory waits for those of every queue pair listed.
	qp.pd.dev.mu.Lock()
	qp.pd.qps = slices.DeleteFunc(qp.pd.qps, func(q *QueuePair) bool { return q == qp })
	qp.pd.dev.mu.Unlock()
	qp.closeTerminated()
	return err
}

// errClosed is what work flushed by Close reports.
var errClosed = errors.New("rdmap: the queue pair was closed")

// ReadLimits returns the queue pair's IRD and ORD (ddp.Endpoint).
func (qp *QueuePair) ReadLimits() (ird, ord int) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.cfg.IRD, qp.cfg.ORD
}

// AtomicLimits returns the queue pair's AtomicIRD and AtomicORD.
func (qp *QueuePair) AtomicLimits() (ird, ord int) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.cfg.AtomicIRD, qp.cfg.AtomicORD
}

// SetAtomicLimits sets the AtomicIRD and AtomicORD before the queue pair
// connects, to what the ULP negotiated with its peer (RFC 7306 §5.2.2
// rules 4 and 5: "the maximum number of Atomic Operation Requests
// negotiated by the ULP"; RFC 7306 §1.1 RECOMMENDS that ULPs negotiate
// the extensions' use, and neither it nor RFC 6581 defines a wire
// negotiation for them). They can only be lowered from the configuration,
// which sized the queue pair's resources; zero turns that direction's
// atomics off.
func (qp *QueuePair) SetAtomicLimits(ird, ord int) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateIdle {
		return fmt.Errorf("rdmap: SetAtomicLimits on a queue pair in state %v", qp.state)
	}
	if ird < 0 || ird > qp.cfg.AtomicIRD || ord < 0 || ord > qp.cfg.AtomicORD {
		return fmt.Errorf("rdmap: SetAtomicLimits(%d, %d): they can only be lowered from %d and %d", ird, ord, qp.cfg.AtomicIRD, qp.cfg.AtomicORD)
	}
	qp.cfg.AtomicIRD, qp.cfg.AtomicORD = ird, ord
	return nil
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

// SetReadLimits sets the IRD and ORD the queue pair offers before it
// connects, as rdma_cm's rdma_conn_param does per connection
// (responder_resources and initiator_depth): zero included, for a
// connection that uses no RDMA Reads in that direction. They can only be
// lowered from the queue pair's configuration, which sized its
// resources. The transport then negotiates them with the peer's (RFC
// 6581 §9.1); ReadLimits returns the result once connected.
func (qp *QueuePair) SetReadLimits(ird, ord int) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != StateIdle {
		return fmt.Errorf("rdmap: SetReadLimits on a queue pair in state %v", qp.state)
	}
	if ird < 0 || ird > qp.cfg.IRD || ord < 0 || ord > qp.cfg.ORD {
		return fmt.Errorf("rdmap: SetReadLimits(%d, %d): IRD and ORD can only be lowered from %d and %d", ird, ord, qp.cfg.IRD, qp.cfg.ORD)
	}
	qp.cfg.IRD, qp.cfg.ORD = ird, ord
	return nil
}
