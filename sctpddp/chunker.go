package sctpddp

import (
	"context"
	"time"
)

// controlReserve is how many session control messages may be sent between
// two moments when nothing is buffered (see sendRoom).
const controlReserve = 1024

// maxSendQueueLimit is the largest send queue cap that keeps RFC 5043
// §10's limit of 32767 unacknowledged chunks (see sendRoom).
const maxSendQueueLimit = (MaxInFlight - controlReserve) * MinSegmentChunkLen

// recheckInterval bounds a wait for send-queue room when no
// buffered-amount-low signal arrives (while waiting for the queue to drain
// completely, or after the stream closed under the writer).
const recheckInterval = 2 * time.Millisecond

// sendRoom keeps what a stream has queued or in flight under a cap, for
// both kinds of stream (an SCTP stream pair, a data channel). The cap also
// keeps RFC 5043 §10's limit: "the sending DDP must simply refrain from
// sending more than 32767 Data Chunks for a single stream without
// acknowledgment. Note that it MUST NOT rely upon ULP flow control for
// this purpose." Every message is one Data Chunk (it fits the MULPDU) of
// at least MinSegmentChunkLen bytes, except control messages, of which at
// most controlReserve are sent between two moments when the queue is
// empty. So unacknowledged chunks number at most limit/MinSegmentChunkLen
// + controlReserve <= MaxInFlight.
//
// Its fields are guarded by the stream's write mutex.
type sendRoom struct {
	limit    uint64          // cap, bytes
	buffered func() uint64   // queued + in flight
	low      chan struct{}   // signalled when the buffered amount drops
	closed   <-chan struct{} // closed when the stream can no longer send
	// gone, checked after each recheck, reports an end of the stream that
	// closed may not have signalled yet; nil if there is none.
	gone      func() bool
	closedErr error

	ctlSinceDrain int
	timer         *time.Timer
}

// waitRoom blocks until a message of n bytes fits under the cap.
func (r *sendRoom) waitRoom(ctx context.Context, n int, control bool) error {
	for {
		b := r.buffered()
		if b == 0 {
			r.ctlSinceDrain = 0
		}
		if b+uint64(n) <= r.limit && (!control || r.ctlSinceDrain < controlReserve) {
			return nil
		}
		if err := r.wait(ctx); err != nil {
			return err
		}
	}
}

// waitEmpty blocks until nothing is queued or in flight.
func (r *sendRoom) waitEmpty(ctx context.Context) error {
	for r.buffered() != 0 {
		if err := r.wait(ctx); err != nil {
			return err
		}
	}
	r.ctlSinceDrain = 0
	return nil
}

// sent counts a message just queued.
func (r *sendRoom) sent(control bool) {
	if control {
		r.ctlSinceDrain++
	}
}

// wait blocks until the buffered amount may have dropped.
func (r *sendRoom) wait(ctx context.Context) error {
	if r.timer == nil {
		r.timer = time.NewTimer(recheckInterval)
	} else {
		r.timer.Reset(recheckInterval)
	}
	defer r.timer.Stop()
	select {
	case <-r.low:
		return nil
	case <-r.timer.C:
		if r.gone != nil && r.gone() {
			return r.closedErr
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.closed:
		return r.closedErr
	}
}
