package sctpddp

import (
	"context"
	"sync"
	"time"
)

// putRecheck bounds how long a blocked put waits before asking again
// whether the channel has closed: pion reports the close of a data channel
// only after its read loop, the caller of put, has returned.
const putRecheck = 20 * time.Millisecond

// messageQueue holds the messages a data channel has received until the
// stream's reader takes them, in the order put was called. One goroutine
// at a time may put (pion's read loop natively, or a syscall/js message
// handler) and one at a time may peek and pop (the session's read loop).
//
// put blocks while the queue holds limit bytes or more, so that a reader
// that falls behind stops the data channel's read loop and with it the
// SCTP receive window, instead of letting the queue grow; a queue fed from
// a JavaScript event handler, which must not block, is made with limit 0
// (no bound).
type messageQueue struct {
	mu    sync.Mutex // guards msgs, head, size and err
	msgs  []queued   // msgs[head:] are queued, oldest first
	head  int
	size  int   // bytes in msgs[head:]
	limit int   // put blocks while size >= limit; 0: never
	err   error // set by close: returned once msgs[head:] is empty

	ready chan struct{} // 1-buffered: a message or the end arrived
	room  chan struct{} // 1-buffered: size fell below limit
	done  chan struct{} // closed by close
	once  sync.Once
}

// queued is one received message: its bytes, and whether the channel
// delivered it as text rather than binary.
type queued struct {
	data []byte
	text bool
}

func newMessageQueue(limit int) *messageQueue {
	return &messageQueue{
		limit: limit,
		ready: make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// put appends msg, which the queue keeps (the caller must not reuse it),
// and whether it came as a text message.
// It blocks while the queue is full, until the reader makes room, the
// queue is closed, or stopped (asked every putRecheck) returns true; in
// the last two cases msg is dropped and put returns false.
func (q *messageQueue) put(msg []byte, text bool, stopped func() bool) bool {
	q.mu.Lock()
	if q.limit > 0 && q.size >= q.limit && q.err == nil {
		t := time.NewTimer(putRecheck)
		defer t.Stop()
		for q.size >= q.limit && q.err == nil {
			q.mu.Unlock()
			select {
			case <-q.room:
			case <-q.done:
			case <-t.C:
				if stopped() {
					return false
				}
				t.Reset(putRecheck)
			}
			q.mu.Lock()
		}
	}
	if q.err != nil {
		q.mu.Unlock()
		return false
	}
	q.msgs = append(q.msgs, queued{msg, text})
	q.size += len(msg)
	q.mu.Unlock()
	signal(q.ready)
	return true
}

// peek returns the oldest message without removing it, waiting for one if
// the queue is empty. It returns ErrReadInterrupted if interrupt has a
// token (which it takes), ctx's error if ctx ends first, and the close
// error once the queue is closed and empty.
func (q *messageQueue) peek(ctx context.Context, interrupt chan struct{}) (queued, error) {
	for {
		select {
		case <-interrupt:
			return queued{}, ErrReadInterrupted
		default:
		}
		q.mu.Lock()
		if q.head < len(q.msgs) {
			m := q.msgs[q.head]
			q.mu.Unlock()
			return m, nil
		}
		err := q.err
		q.mu.Unlock()
		if err != nil {
			return queued{}, err
		}
		select {
		case <-q.ready:
		case <-interrupt:
			return queued{}, ErrReadInterrupted
		case <-ctx.Done():
			return queued{}, ctx.Err()
		}
	}
}

// pop removes the oldest message, which peek returned.
func (q *messageQueue) pop() {
	q.mu.Lock()
	if q.head == len(q.msgs) {
		q.mu.Unlock()
		return
	}
	wasFull := q.limit > 0 && q.size >= q.limit
	q.size -= len(q.msgs[q.head].data)
	q.msgs[q.head] = queued{}
	q.head++
	switch {
	case q.head == len(q.msgs):
		q.msgs, q.head = q.msgs[:0], 0
	case q.head >= 64 && 2*q.head >= len(q.msgs):
		// Move the queued messages to the front so that the slice does
		// not grow without bound while the queue never empties.
		n := copy(q.msgs, q.msgs[q.head:])
		clear(q.msgs[n:])
		q.msgs, q.head = q.msgs[:n], 0
	}
	free := wasFull && q.size < q.limit
	q.mu.Unlock()
	if free {
		signal(q.room)
	}
}

// close ends the queue with err: peek returns the messages already queued,
// then err; put drops what it is given. Only the first call counts.
func (q *messageQueue) close(err error) {
	q.once.Do(func() {
		q.mu.Lock()
		q.err = err
		q.mu.Unlock()
		close(q.done)
		signal(q.ready)
	})
}
