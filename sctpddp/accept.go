//go:build !js

package sctpddp

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/internal/netpeer"
)

// DefaultPendingSessions is how many session requests may wait for the
// ULP's decision at once.
const DefaultPendingSessions = 16

// SessionAcceptor hands out the DDP Stream Session requests of one
// association, within limits: requests pending the ULP's decision (RFC
// 5043 §6.4) and sessions held, by the association (Config.MaxSessions)
// and, on a Listener's association, by the peer's IP address
// (Config.MaxPeerSessions) and the Listener (Config.MaxListenerSessions).
// An Initiate beyond a limit is answered with a DDP Stream Session
// Terminate, and Config.Refused hears why.
type SessionAcceptor struct {
	a          *Association
	maxPending int
	maxHeld    int

	mu      sync.Mutex
	reading int               // new streams whose Initiate is being read
	queue   []*SessionRequest // requests waiting for Accept, oldest first
	held    int               // requests queued or being decided, and sessions not closed
	notify  chan struct{}     // signalled when a request is queued
	wg      sync.WaitGroup
}

// Sessions starts accepting DDP Stream Sessions on the association, with at
// most pending requests waiting for a decision (Config.MaxPendingSessions,
// DefaultPendingSessions, if 0): "There MUST be a finite limit on the number
// of such requests that are pending a ULP decision. When more session requests
// are received, the passive side MUST respond to the Initiate message with a
// DDP Stream Terminate Message." (RFC 5043 §6.4). A request counts as pending
// from the arrival of its stream until Accept returns it; one that Accept does
// not return within Config.AcceptTimeout is answered with a Terminate. The
// association holds at most Config.MaxSessions sessions (and a Listener's
// associations Config.MaxPeerSessions per peer (IPv4 address or IPv6 /64) and
// Config.MaxListenerSessions in all), counted from the request until the
// Session closes or the request is rejected; more are refused the same way.
// Call it once per association.
func (a *Association) Sessions(pending int) *SessionAcceptor {
	if pending <= 0 {
		pending = a.s.MaxPendingSessions
	}
	sa := &SessionAcceptor{a: a, maxPending: pending, maxHeld: a.s.MaxSessions, notify: make(chan struct{}, 1)}
	sa.wg.Add(1)
	go sa.loop()
	return sa
}

// Accept returns the next session request.
func (sa *SessionAcceptor) Accept(ctx context.Context) (*SessionRequest, error) {
	for {
		sa.mu.Lock()
		if len(sa.queue) > 0 {
			r := sa.queue[0]
			sa.queue[0] = nil
			sa.queue = sa.queue[1:]
			r.expire.Stop()
			sa.mu.Unlock()
			return r, nil
		}
		sa.mu.Unlock()
		select {
		case <-sa.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-sa.a.Done():
			return nil, sa.a.Err()
		}
	}
}

func (sa *SessionAcceptor) loop() {
	defer sa.wg.Done()
	for {
		st, err := sa.a.acceptStream(context.Background())
		if err != nil {
			return
		}
		// The peer started this stream: its id is used for the
		// association's life. pion hands out a stream once, unless the
		// peer resets it and starts it again: an Initiate on an id that
		// has carried a session is refused, as the retired stream's
		// reader answers it with a Terminate (Stream.drain). (An id in
		// use here is one this end started at the same moment: its
		// session reads the stream.)
		if err := sa.a.claim(st.ID()); err != nil {
			if sa.a.retired(st.ID()) {
				sa.a.retire(st)
			}
			continue
		}
		sa.mu.Lock()
		ok := sa.reading+len(sa.queue) < sa.maxPending
		if ok {
			sa.reading++
		}
		sa.mu.Unlock()
		if !ok {
			// Refused without reading the Initiate here: its stream is
			// at least the (maxPending+1)th pending one. The retired
			// stream's reader answers the Initiate with the Terminate.
			sa.a.s.refused(sa.a.RemoteAddr(), fmt.Errorf("%w (%d)", ErrTooManyPendingSessions, sa.maxPending))
			sa.a.retire(st)
			continue
		}
		sa.wg.Add(1)
		go func() {
			defer sa.wg.Done()
			sa.initiate(st)
		}()
	}
}

// initiate waits for a new stream's Initiate and queues the request.
func (sa *SessionAcceptor) initiate(st *Stream) {
	ctx, cancel := context.WithTimeout(context.Background(), sa.a.s.HandshakeTimeout)
	defer cancel()
	queued := false
	defer func() {
		if !queued {
			sa.a.retire(st)
		}
	}()
	r, terminate, err := readInitiate(ctx, st, sa.a.s.HandshakeTimeout)
	sa.mu.Lock()
	sa.reading--
	if err != nil {
		sa.mu.Unlock()
		// Counted out before the peer hears the Terminate, so that it
		// may start another session at once.
		if terminate {
			terminateStream(st)
		}
		return
	}
	if sa.held >= sa.maxHeld {
		sa.mu.Unlock()
		sa.refuse(st, fmt.Errorf("%w (%d on the association)", ErrTooManySessions, sa.maxHeld))
		return
	}
	ip := netpeer.OfAddr(sa.a.RemoteAddr())
	if c := sa.a.sessions; c != nil {
		if err := c.take(ip); err != nil {
			sa.mu.Unlock()
			sa.refuse(st, err)
			return
		}
	}
	sa.held++
	r.release = sa.releaseOnce(ip, st)
	r.deadline = time.Now().Add(sa.a.s.AcceptTimeout)
	r.expire = time.AfterFunc(sa.a.s.AcceptTimeout, func() { sa.expire(r) })
	sa.queue = append(sa.queue, r)
	queued = true
	sa.mu.Unlock()
	select {
	case sa.notify <- struct{}{}:
	default:
	}
}

// expire refuses a request still queued after AcceptTimeout.
func (sa *SessionAcceptor) expire(r *SessionRequest) {
	sa.mu.Lock()
	found := false
	for i, q := range sa.queue {
		if q == r {
			sa.queue = append(sa.queue[:i], sa.queue[i+1:]...)
			found = true
			break
		}
	}
	sa.mu.Unlock()
	if !found {
		return // Accept took it
	}
	r.once.Do(func() {})
	r.release()
	if !sa.a.isClosed() {
		sa.refuse(r.st, ErrAcceptTimeout)
	}
}

// releaseOnce returns the function that gives back one held session and
// retires its stream.
func (sa *SessionAcceptor) releaseOnce(ip netip.Addr, st *Stream) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			sa.a.retire(st)
			sa.mu.Lock()
			sa.held--
			sa.mu.Unlock()
			if c := sa.a.sessions; c != nil {
				c.give(ip)
			}
		})
	}
}

// refuse answers a session request with a DDP Stream Session Terminate and
// reports why.
func (sa *SessionAcceptor) refuse(st MessageStream, why error) {
	sa.a.s.refused(sa.a.RemoteAddr(), why)
	terminateStream(st)
}

func (sa *SessionAcceptor) closed() bool {
	select {
	case <-sa.a.Done():
		return true
	default:
		return false
	}
}
