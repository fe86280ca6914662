package sctp

import (
	"context"
	"io"
	"os"
	"time"
)

// Stream is one Stream Identifier of an association, both directions:
// the outbound stream messages are sent on and the inbound stream they
// are read from (RFC 9260 §1.5.2: streams are unidirectional; a user
// pairs the two of one identifier, as RFC 5043 §8 does for DDP streams).
// OpenStream returns the Stream of an identifier; AcceptStream the next
// one the peer started sending on.
//
// Received messages wait in the stream until read, and count against the
// association's receive window until then: a stream nobody reads slows
// the peer, never grows memory beyond the window. Writes may come from
// several goroutines; reads from one at a time.
type Stream struct {
	a     *Association
	id    uint16
	ready chan struct{} // a message arrived, the deadline moved, or the association ended

	// Guarded by a.mu.
	inbox     fifo[*inMsg]
	deadline  time.Time
	dlTimer   *time.Timer
	buffered  int // bytes of this stream's messages queued or unacknowledged
	messages  int // and their number
	onAcked   func()
	ackedDue  bool // queued in the association's acked
	opened    bool // returned by OpenStream or AcceptStream
	announced bool // queued for AcceptStream
}

// streamLocked returns the Stream of id, creating it. a.mu is held.
// Stream Identifiers are bounded by the stream counts of the handshake:
// the Receiver refuses DATA beyond the inbound count, SendMessage beyond
// the outbound count.
func (a *Association) streamLocked(id uint16) (*Stream, bool) {
	if s, ok := a.streams[id]; ok {
		return s, false
	}
	s := &Stream{a: a, id: id, ready: make(chan struct{}, 1)}
	a.streams[id] = s
	return s, true
}

// OpenStream returns the Stream of id, which must be below the
// association's outbound stream count (Established.OutboundStreams). A
// stream the peer started and AcceptStream has not returned yet is
// returned here instead, and AcceptStream will not return it.
func (a *Association) OpenStream(id uint16) (*Stream, error) {
	if id >= a.est.OutboundStreams {
		return nil, ErrInvalidStream
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return nil, a.err
	}
	s, _ := a.streamLocked(id)
	s.opened = true
	return s, nil
}

// AcceptStream returns the next stream on which the peer sent a message
// before this end opened it.
func (a *Association) AcceptStream(ctx context.Context) (*Stream, error) {
	for {
		a.mu.Lock()
		for len(a.accepts) > 0 {
			s := a.accepts[0]
			a.accepts[0] = nil
			a.accepts = a.accepts[1:]
			if s.opened {
				continue // opened meanwhile: OpenStream returned it
			}
			s.opened = true
			more := len(a.accepts) > 0
			a.mu.Unlock()
			if more {
				a.signal(a.acceptReady)
			}
			return s, nil
		}
		a.accepts = a.accepts[:0:0]
		err := a.err
		a.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-a.acceptReady:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-a.done:
			a.signal(a.acceptReady)
		}
	}
}

// ID returns the Stream Identifier.
func (s *Stream) ID() uint16 { return s.id }

// SendMessage queues a user message of the concatenated payload slices,
// ordered or unordered, blocking while the association's send buffer is
// full and until ctx ends. The payload is copied and may be reused on
// return.
func (s *Stream) SendMessage(ctx context.Context, ppid uint32, unordered bool, payload [][]byte) error {
	return s.a.sendMessage(ctx, s.id, ppid, unordered, payload)
}

// ReadMessage copies the next message received on the stream into buf
// and returns its length, PPID and U bit. A buf shorter than the message
// returns the message's length with io.ErrShortBuffer and keeps the
// message for the next call. It returns os.ErrDeadlineExceeded once the
// read deadline has passed, ctx's error when ctx ends, and the
// association's error once it has ended and the stream holds nothing.
func (s *Stream) ReadMessage(ctx context.Context, buf []byte) (n int, ppid uint32, unordered bool, err error) {
	a := s.a
	for {
		a.mu.Lock()
		if s.inbox.len() > 0 {
			m := s.inbox.peek()
			if len(buf) < len(m.buf) {
				a.mu.Unlock()
				return len(m.buf), m.ppid, m.unordered, io.ErrShortBuffer
			}
			s.inbox.pop()
			a.ulpRelease += len(m.buf)
			more := s.inbox.len() > 0
			a.mu.Unlock()
			if more {
				a.signal(s.ready)
			}
			a.poke()
			n = copy(buf, m.buf)
			ppid, unordered = m.ppid, m.unordered
			inMsgPool.Put(m)
			return n, ppid, unordered, nil
		}
		e := a.err
		dl := s.deadline
		a.mu.Unlock()
		if e != nil {
			return 0, 0, false, e
		}
		if !dl.IsZero() && !time.Now().Before(dl) {
			return 0, 0, false, os.ErrDeadlineExceeded
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return 0, 0, false, ctx.Err()
		case <-a.done:
			a.signal(s.ready)
		}
	}
}

// SetReadDeadline makes ReadMessage return os.ErrDeadlineExceeded from t
// on, as net.Conn's does; the zero time removes the deadline. A reader
// blocked when t passes (or when t is already past) is woken.
func (s *Stream) SetReadDeadline(t time.Time) error {
	a := s.a
	a.mu.Lock()
	s.deadline = t
	if s.dlTimer != nil {
		s.dlTimer.Stop()
		s.dlTimer = nil
	}
	if !t.IsZero() {
		if d := time.Until(t); d > 0 {
			s.dlTimer = time.AfterFunc(d, func() { a.signal(s.ready) })
		}
	}
	a.mu.Unlock()
	a.signal(s.ready)
	return nil
}

// BufferedAmount returns the bytes of the stream's messages queued or
// sent and not yet acknowledged.
func (s *Stream) BufferedAmount() uint64 {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	return uint64(s.buffered)
}

// UnackedMessages returns the number of the stream's messages queued or
// sent and not yet acknowledged.
func (s *Stream) UnackedMessages() int {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	return s.messages
}

// OnAcked asks for f to be called, on the association's goroutine,
// whenever acknowledgements free some of the stream's messages: a writer
// waiting for BufferedAmount to fall looks again. f must not block.
func (s *Stream) OnAcked(f func()) {
	s.a.mu.Lock()
	s.onAcked = f
	s.a.mu.Unlock()
}
