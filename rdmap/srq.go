package rdmap

import (
	"fmt"
	"sync"

	"github.com/iwarpgo/iwarp/ddp"
)

// SharedReceiveQueue is a pool of receive buffers that several queue
// pairs draw from. A stream takes the next buffer when a new Send arrives
// for it, so buffers go to streams in the order messages arrive. A
// queue pair holds at most RecvDepth of them at once (taken and not yet
// delivered), and no more than its stream's reassembly window (the
// segments its LLP may have in flight): a Send whose MSN lies further
// ahead stops that stream with "Invalid MSN - MSN range is not valid" and
// takes nothing, since "the combination of the RNIC and the Privileged Resource Manager
// MUST be able to detect if the Remote Peer is attempting to consume
// more than its fair share of resources" (RFC 5040 §8.1.2 item 8). Set
// each queue pair's RecvDepth to the share it may have.
type SharedReceiveQueue struct {
	pd    *ProtectionDomain
	depth int

	mu    sync.Mutex // guards bufs and limit
	bufs  []ddp.Buffer
	limit int // SRQ_LIMIT_REACHED fires once when fewer remain; 0: disarmed
}

// NewSharedReceiveQueue returns a shared receive queue of up to depth
// buffers.
func (pd *ProtectionDomain) NewSharedReceiveQueue(depth int) *SharedReceiveQueue {
	if depth <= 0 {
		depth = 1024
	}
	return &SharedReceiveQueue{pd: pd, depth: depth}
}

// PostRecv adds a receive buffer.
func (srq *SharedReceiveQueue) PostRecv(wr RecvWR) error {
	qp := &QueuePair{pd: srq.pd}
	sgl, _, err := qp.resolve(wr.SGL, LocalWrite)
	if err != nil {
		return err
	}
	srq.mu.Lock()
	defer srq.mu.Unlock()
	if len(srq.bufs) >= srq.depth {
		return fmt.Errorf("%w: the shared receive queue holds %d", ErrRecvQueue, srq.depth)
	}
	srq.bufs = append(srq.bufs, ddp.Buffer{SGL: sgl, ID: wr.ID})
	return nil
}

// Len returns how many buffers are waiting.
func (srq *SharedReceiveQueue) Len() int {
	srq.mu.Lock()
	defer srq.mu.Unlock()
	return len(srq.bufs)
}

// SetLimit arms the low-water limit: when fewer than n buffers remain, a
// SRQ_LIMIT_REACHED event is raised once and the limit disarms.
func (srq *SharedReceiveQueue) SetLimit(n int) {
	srq.mu.Lock()
	srq.limit = n
	srq.mu.Unlock()
}

// TakeBuffer implements ddp.BufferSource.
func (srq *SharedReceiveQueue) TakeBuffer() (ddp.Buffer, bool) {
	srq.mu.Lock()
	if len(srq.bufs) == 0 {
		srq.mu.Unlock()
		return ddp.Buffer{}, false
	}
	b := srq.bufs[0]
	srq.bufs[0] = ddp.Buffer{}
	srq.bufs = srq.bufs[1:]
	fire := srq.limit > 0 && len(srq.bufs) < srq.limit
	if fire {
		srq.limit = 0
	}
	srq.mu.Unlock()
	if fire {
		srq.pd.dev.event(AsyncEvent{Type: EventSRQLimitReached})
	}
	return b, true
}

// giveBack returns buffers a stopped stream took but did not use, to the
// front of the queue, in order.
func (srq *SharedReceiveQueue) giveBack(bufs []ddp.Buffer) {
	if len(bufs) == 0 {
		return
	}
	srq.mu.Lock()
	srq.bufs = append(append([]ddp.Buffer(nil), bufs...), srq.bufs...)
	srq.mu.Unlock()
}
