package main

import (
	"sync"
	"time"
)

// A peer may open connection after connection beyond its limits, as fast
// as it can, and each refusal is a line of the listening command's
// output. The refusals a listener reports are bounded, so that such a
// flood costs the peer its connections and not the operator's log: up to
// refusalBurst at once, then refusalRate a second. Those held back are
// counted, and the count is reported before the next refusal that is, and
// when the listener stops.
const (
	refusalBurst = 100
	refusalRate  = 10 // a second, once the burst is spent
)

// refusals reports refused connections within those bounds: line for one
// refusal, unreported for a count of refusals held back.
type refusals struct {
	line       func(peer, why string)
	unreported func(n int)

	mu     sync.Mutex
	now    func() time.Time
	tokens float64 // refusals that may be reported now
	last   time.Time
	held   int // refused and not reported since the last one that was
}

func newRefusals(line func(peer, why string), unreported func(n int)) *refusals {
	return &refusals{line: line, unreported: unreported, now: time.Now, tokens: refusalBurst}
}

// report reports one refusal, or counts it if the bounds are reached.
func (r *refusals) report(peer, why string) {
	ok, held := r.take()
	if !ok {
		return
	}
	if held > 0 {
		r.unreported(held)
	}
	r.line(peer, why)
}

// take reports whether a refusal may be reported now and, if it may, how
// many were held back before it.
func (r *refusals) take() (ok bool, held int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.now()
	if !r.last.IsZero() {
		r.tokens = min(refusalBurst, r.tokens+t.Sub(r.last).Seconds()*refusalRate)
	}
	r.last = t
	if r.tokens < 1 {
		r.held++
		return false, 0
	}
	r.tokens--
	held, r.held = r.held, 0
	return true, held
}

// close reports the refusals still held back: the listener has stopped.
func (r *refusals) close() {
	r.mu.Lock()
	held := r.held
	r.held = 0
	r.mu.Unlock()
	if held > 0 {
		r.unreported(held)
	}
}
