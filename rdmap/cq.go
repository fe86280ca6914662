package rdmap

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// Status is a completion's status. The names are the ones users of verbs
// expect.
type Status uint8

// The completion statuses.
const (
	StatusSuccess        Status = 0x00 // SUCCESS
	StatusLocLenErr      Status = 0x01 // LOC_LEN_ERR: a local length error
	StatusLocQPOpErr     Status = 0x02 // LOC_QP_OP_ERR: a local queue pair operation error
	StatusLocProtErr     Status = 0x03 // LOC_PROT_ERR: a local protection error
	StatusWRFlushErr     Status = 0x04 // WR_FLUSH_ERR: flushed because the stream stopped
	StatusRemAccessErr   Status = 0x05 // REM_ACCESS_ERR: the peer refused the access
	StatusRemOpErr       Status = 0x06 // REM_OP_ERR: the peer failed the operation
	StatusRemInvReqErr   Status = 0x07 // REM_INV_REQ_ERR: the peer found the request invalid
	StatusRetryExcErr    Status = 0x08 // RETRY_EXC_ERR: the transport gave up
	StatusRNRRetryExcErr Status = 0x09 // RNR_RETRY_EXC_ERR: the receiver was not ready, too often
	StatusInvSTagErr     Status = 0x0a // INV_STAG_ERR: an STag could not be invalidated
	StatusBaseBoundsErr  Status = 0x0b // BASE_BOUNDS_ERR: a base or bounds violation
	StatusAccessErr      Status = 0x0c // ACCESS_ERR: an access rights violation
)

var statusNames = [...]string{"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
	"REM_ACCESS_ERR", "REM_OP_ERR", "REM_INV_REQ_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
	"INV_STAG_ERR", "BASE_BOUNDS_ERR", "ACCESS_ERR"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%#x)", uint8(s))
}

// WorkOp says which operation a completion is for.
type WorkOp uint8

// The operations a completion can report.
const (
	WorkSend WorkOp = iota + 1
	WorkWrite
	WorkRead
	WorkRecv
	WorkLocalInvalidate
	WorkCompSwap    // an Atomic CmpSwap (RFC 7306 §5.1.2): COMP_SWAP
	WorkFetchAdd    // an Atomic FetchAdd (RFC 7306 §5.1.1): FETCH_ADD
	WorkRecvWithImm // a received Immediate Data message (RFC 7306 §6): Imm holds its data
)

func (o WorkOp) String() string {
	switch o {
	case WorkSend:
		return "SEND"
	case WorkWrite:
		return "RDMA_WRITE"
	case WorkRead:
		return "RDMA_READ"
	case WorkRecv:
		return "RECV"
	case WorkLocalInvalidate:
		return "LOCAL_INV"
	case WorkCompSwap:
		return "COMP_SWAP"
	case WorkFetchAdd:
		return "FETCH_ADD"
	case WorkRecvWithImm:
		return "RECV_WITH_IMM"
	}
	return fmt.Sprintf("WorkOp(%d)", uint8(o))
}

// Completion flags.
const (
	FlagInvalidated uint8 = 1 << iota // a received Send with Invalidate invalidated InvalidatedSTag
	FlagSolicited                     // a received Send or Immediate Data asked for a Solicited Event
	FlagImm                           // a received Immediate Data message: Imm holds its 8 octets (IBV_WC_WITH_IMM)
)

// Completion is a completion queue entry.
type Completion struct {
	WRID            uint64
	Status          Status
	Op              WorkOp
	ByteLen         uint32
	InvalidatedSTag uint32
	Flags           uint8
	// Imm is the Immediate Data of a WorkRecvWithImm completion (FlagImm):
	// RFC 7306 fixes it at 8 octets (§6.2), read here as a big-endian
	// number. (Verbs' imm_data is 4 octets: a program that sends those
	// finds them in the low 32 bits.) The receive buffer holds the same
	// octets, and ByteLen is 8.
	Imm uint64
	QP  *QueuePair
	// Err explains a status other than SUCCESS when there is more to say
	// (the Terminate triple, for one).
	Err error
}

// ErrCQOverrun is reported (as a CQ_ERROR event) when a completion queue
// is full.
var ErrCQOverrun = errors.New("rdmap: completion queue overrun")

// CompletionQueue holds completions of one or more queue pairs.
type CompletionQueue struct {
	dev *Device

	mu       sync.Mutex // guards everything below
	ring     []Completion
	head, n  int
	armed    bool
	solOnly  bool
	notify   chan struct{}
	wake     chan struct{} // 1-buffered: a completion arrived while a goroutine slept in Wait (see wakeOne)
	sleepers int           // goroutines in Wait that may sleep on wake
	spin     time.Duration // how long Wait polls before it sleeps
	overrun  bool

	// The queue pairs that report here: a waiter may do the receive work
	// itself (ddp.Poller) when this CQ serves one queue pair only and
	// its next completion can come only from that queue pair's received
	// segments (or a flush, which closes its LLP): see pollQP.
	recvQPs []*QueuePair
	sendQPs []*QueuePair
	ready   func() bool // cq.nonEmpty, made once

	// live counts the queue pairs (once as the receive CQ, once as the
	// send CQ) that report here and have not ended; ended is the error
	// of the last one that ended. Wait returns it once live is zero and
	// the ring is empty.
	live  int
	ended error
}

// SetSpin sets how long Wait polls before it sleeps; by default it
// sleeps at once. Polling helps latency only where the waiting goroutine
// has a core of its own.
func (cq *CompletionQueue) SetSpin(d time.Duration) {
	cq.mu.Lock()
	cq.spin = d
	cq.mu.Unlock()
}

// NewCompletionQueue returns a completion queue that holds up to depth
// completions.
func (d *Device) NewCompletionQueue(depth int) *CompletionQueue {
	if depth <= 0 {
		depth = 1024
	}
	cq := &CompletionQueue{dev: d, ring: make([]Completion, depth), notify: make(chan struct{}, 1), wake: make(chan struct{}, 1), spin: 0}
	cq.ready = cq.nonEmpty
	return cq
}

// attach records that qp reports here (recv: its receives, else its send
// queue); detach undoes it.
func (cq *CompletionQueue) attach(qp *QueuePair, recv bool) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if recv {
		cq.recvQPs = append(cq.recvQPs, qp)
	} else {
		cq.sendQPs = append(cq.sendQPs, qp)
	}
	cq.live++
}

// end records that a queue pair attached here has ended with err, its
// last completions pushed, and wakes a waiter when it was the last.
func (cq *CompletionQueue) end(err error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.live--
	cq.ended = err
	cq.wakeOne()
}

// over reports whether Wait has nothing to wait for: every queue pair
// that reports here has ended and their completions have been taken. The
// caller holds cq.mu.
func (cq *CompletionQueue) over() bool {
	return cq.n == 0 && cq.live == 0 && cq.ended != nil
}

func (cq *CompletionQueue) detach(qp *QueuePair, recv bool) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	qps := &cq.sendQPs
	if recv {
		qps = &cq.recvQPs
	}
	if i := slices.Index(*qps, qp); i >= 0 {
		*qps = slices.Delete(*qps, i, i+1)
	}
}

// pollQP returns the queue pair whose LLP's receive work a waiter may do
// itself, or nil: the one queue pair this CQ serves (its receives, its
// send queue or both). sends reports that the CQ serves its send queue:
// the waiter may then poll only while that queue pair's send queue holds
// Reads only, or one Atomic (QueuePair.awaitsWire). A
// received Send completes only when its segments arrive; so does a Read or
// an Atomic, and the send queue completes in order, so that a Send or
// Write posted meanwhile (completed by the send route after its Flush) is
// not reported before them. The caller holds cq.mu.
func (cq *CompletionQueue) pollQP() (qp *QueuePair, sends bool) {
	switch {
	case len(cq.recvQPs) > 1 || len(cq.sendQPs) > 1:
		return nil, false
	case len(cq.recvQPs) == 1:
		qp = cq.recvQPs[0]
		if len(cq.sendQPs) == 1 && cq.sendQPs[0] != qp {
			return nil, false
		}
		return qp, len(cq.sendQPs) == 1
	case len(cq.sendQPs) == 1:
		return cq.sendQPs[0], true
	}
	return nil, false
}

func (cq *CompletionQueue) nonEmpty() bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.n > 0
}

func (cq *CompletionQueue) push(c Completion, solicited bool) {
	cq.mu.Lock()
	if cq.n == len(cq.ring) {
		first := !cq.overrun
		cq.overrun = true
		cq.mu.Unlock()
		if first {
			cq.dev.event(AsyncEvent{Type: EventCQError, CQ: cq, Err: ErrCQOverrun})
		}
		return
	}
	cq.ring[(cq.head+cq.n)%len(cq.ring)] = c
	cq.n++
	cq.wakeOne()
	fire := cq.armed && (!cq.solOnly || solicited || c.Status != StatusSuccess)
	if fire {
		cq.armed = false
	}
	cq.mu.Unlock()
	if fire {
		select {
		case cq.notify <- struct{}{}:
		default:
		}
	}
}

// Poll moves up to len(out) completions into out and returns how many.
func (cq *CompletionQueue) Poll(out []Completion) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	k := 0
	for ; k < len(out) && cq.n > 0; k++ {
		out[k] = cq.ring[cq.head]
		cq.ring[cq.head] = Completion{}
		cq.head = (cq.head + 1) % len(cq.ring)
		cq.n--
	}
	// Completions left for a sleeper: this caller took its own, and the
	// sleeper may have missed the wake-up that was for it.
	cq.wakeOne()
	return k
}

// wakeOne wakes one goroutine sleeping in Wait if there are completions
// for it. One wake-up is enough: a waiter that takes a completion and
// leaves others wakes the next (Poll), as does one that leaves on its
// context. A wake-up nobody takes only makes the next sleeper look again.
// Signalling a buffered channel allocates nothing, where closing and
// replacing a channel per completion did. The caller holds cq.mu.
func (cq *CompletionQueue) wakeOne() {
	if cq.sleepers > 0 && (cq.n > 0 || cq.over()) {
		select {
		case cq.wake <- struct{}{}:
		default:
		}
	}
}

// Wait returns the next completion, waiting for one until ctx is done.
// Once every queue pair that reports here has ended (its stream stopped,
// or it was closed) and their completions have been taken, it returns
// the error the last of them ended with, as QueuePair.Err gives it
// (matching ddp.ErrDisconnected for a peer's orderly close).
//
// When this CQ serves a single queue pair and its next completion can
// come only from that queue pair's incoming segments (a receive, or the
// Responses to the Reads, or the one Atomic, that the send queue holds),
// the waiting goroutine lets the queue pair's LLP do its receive work on
// it (ddp.Poller; MPA over plain TCP is one), so that the network wakes
// the waiter itself.
func (cq *CompletionQueue) Wait(ctx context.Context) (Completion, error) {
	var one [1]Completion
	// Poll for a while first if asked to (SetSpin), as RDMA applications
	// poll their completion queues: a completion that is microseconds away
	// is taken without parking and waking the goroutine.
	if cq.spin > 0 {
		deadline := time.Now().Add(cq.spin)
		for i := 0; ; i++ {
			if cq.Poll(one[:]) == 1 {
				return one[0], nil
			}
			if i%32 == 31 && time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	// asked is an LLP whose Poll returned false: it may keep this
	// waiter's request for its receive work, which the waiter withdraws
	// when it leaves.
	var asked ddp.Poller
	defer func() {
		if asked != nil {
			asked.Unpoll()
		}
	}()
	for {
		if cq.Poll(one[:]) == 1 {
			return one[0], nil
		}
		cq.mu.Lock()
		qp, sends := cq.pollQP()
		cq.mu.Unlock()
		// Not under cq.mu: a queue pair reports completions holding its
		// own lock, which therefore comes first.
		if qp != nil && ctx.Err() == nil {
			if p := qp.poller(); p != nil {
				if !sends || qp.awaitsWire() {
					if p.Poll(ctx, cq.ready) {
						continue
					}
					asked = p
				} else {
					// This waiter sleeps without receiving.
					p.Unpoll()
				}
			}
		}
		cq.mu.Lock()
		switch {
		case cq.n > 0:
			cq.mu.Unlock()
			continue
		case cq.over():
			// The other sleepers return too, one waking the next.
			cq.wakeOne()
			err := cq.ended
			cq.mu.Unlock()
			return Completion{}, err
		}
		cq.sleepers++
		cq.mu.Unlock()
		select {
		case <-cq.wake:
		case <-ctx.Done():
		}
		cq.mu.Lock()
		cq.sleepers--
		err := ctx.Err()
		if err != nil {
			// The wake-up this goroutine may have taken goes to another.
			cq.wakeOne()
		}
		cq.mu.Unlock()
		if err != nil {
			return Completion{}, err
		}
	}
}

// Arm asks for one notification on Notify when the next completion
// arrives; with solicitedOnly, only a received Send with Solicited Event
// (or a completion in error) triggers it.
func (cq *CompletionQueue) Arm(solicitedOnly bool) {
	cq.mu.Lock()
	cq.armed, cq.solOnly = true, solicitedOnly
	cq.mu.Unlock()
}

// Notify returns the channel an armed completion queue signals on.
func (cq *CompletionQueue) Notify() <-chan struct{} { return cq.notify }

// EventType names an asynchronous event.
type EventType uint8

// The asynchronous events.
const (
	EventStreamError       EventType = iota + 1 // STREAM_ERROR: the stream stopped on an error
	EventSRQLimitReached                        // SRQ_LIMIT_REACHED
	EventCQError                                // CQ_ERROR: a completion queue overran
	EventLocalCatastrophic                      // LOCAL_CATASTROPHIC
	EventPortError                              // PORT_ERROR
	EventDisconnected                           // DISCONNECTED: the peer closed the stream in order
)

func (t EventType) String() string {
	switch t {
	case EventStreamError:
		return "STREAM_ERROR"
	case EventSRQLimitReached:
		return "SRQ_LIMIT_REACHED"
	case EventCQError:
		return "CQ_ERROR"
	case EventLocalCatastrophic:
		return "LOCAL_CATASTROPHIC"
	case EventPortError:
		return "PORT_ERROR"
	case EventDisconnected:
		return "DISCONNECTED"
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// AsyncEvent is an asynchronous event.
type AsyncEvent struct {
	Type EventType
	QP   *QueuePair
	CQ   *CompletionQueue
	Err  error
}
