//go:build !js

package sctpddp

import (
	"context"
	"sync"
)

// DefaultPendingSessions is how many session requests may wait for the
// ULP's decision at once.
const DefaultPendingSessions = 16

// SessionAcceptor hands out the DDP Stream Session requests of one
// association.
type SessionAcceptor struct {
	a       *Association
	pending chan *SessionRequest
	wg      sync.WaitGroup
}

// Sessions starts accepting DDP Stream Sessions on the association, with
// at most pending requests waiting for a decision (DefaultPendingSessions
// if 0): "There MUST be a finite limit on the number of such requests
// that are pending a ULP decision. When more session requests are
// received, the passive side MUST respond to the Initiate message with a
// DDP Stream Terminate Message." (RFC 5043 §6.4). Call it once per
// association.
func (a *Association) Sessions(pending int) *SessionAcceptor {
	if pending <= 0 {
		pending = DefaultPendingSessions
	}
	sa := &SessionAcceptor{a: a, pending: make(chan *SessionRequest, pending)}
	sa.wg.Add(1)
	go sa.loop()
	return sa
}

// Accept returns the next session request.
func (sa *SessionAcceptor) Accept(ctx context.Context) (*SessionRequest, error) {
	select {
	case r := <-sa.pending:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-sa.a.Done():
		return nil, ErrClosed
	}
}

func (sa *SessionAcceptor) loop() {
	defer sa.wg.Done()
	for {
		st, err := sa.a.AcceptStream(context.Background())
		if err != nil {
			return
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
	r, err := ReadInitiate(ctx, st, sa.a.s.HandshakeTimeout)
	if err != nil {
		return
	}
	select {
	case sa.pending <- r:
	default:
		terminateStream(st)
	}
}

func (sa *SessionAcceptor) closed() bool {
	select {
	case <-sa.a.Done():
		return true
	default:
		return false
	}
}
