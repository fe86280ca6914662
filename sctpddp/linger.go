//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"time"
)

// DefaultLingerTimeout is how long an association whose DDP Stream
// Sessions have all ended waits for another before it is shut down
// (Config.LingerTimeout).
const DefaultLingerTimeout = time.Second

// ErrSessionsEnded: every DDP Stream Session the association carried
// had ended, and none started within Config.LingerTimeout, so this end
// shut it down. "For a specific LLP connection, when all Streams are
// either gracefully torn down or are labeled as erroneous Streams, the
// LLP connection MUST be torn down." (RFC 5040 §7)
var ErrSessionsEnded = errors.New("sctpddp: every DDP Stream Session of the association has ended")

// The association counts the DDP streams that carry a session or a
// session request (claimed and not yet retired). When the count falls to
// zero it arms a timer; a new claim disarms it; if it fires, the
// association is shut down: SCTP SHUTDOWN first, so that what the ended
// sessions queued (their Terminates) is delivered, then closed. An
// association that has carried no session (one just dialed, or used for
// raw streams only) is left to its owner. All of it is guarded by idMu.

// claimed notes that a DDP stream now carries a session or a request,
// which keeps the association open. idMu is held.
func (a *Association) claimed() {
	a.inUse++
	a.lingerGen++ // a timer armed before this no longer fires
}

// released notes that a DDP stream's session or request has ended, and
// arms the linger timer if it was the last. idMu is held.
func (a *Association) released() {
	a.inUse--
	if a.inUse > 0 || a.s.LingerTimeout < 0 || a.isClosed() {
		return
	}
	a.lingerGen++
	gen := a.lingerGen
	if a.linger != nil {
		a.linger.Stop()
	}
	a.linger = time.AfterFunc(a.s.LingerTimeout, func() { a.lingerEnd(gen) })
}

// lingerEnd shuts the association down if no session has started since
// the timer of generation gen was armed.
func (a *Association) lingerEnd(gen uint64) {
	a.idMu.Lock()
	if gen != a.lingerGen || a.inUse > 0 || a.isClosed() {
		a.idMu.Unlock()
		return
	}
	// From here no session may start: claims fail as on a closed
	// association. end closes a.closed under idMu, so this Add comes
	// before Close's Wait.
	a.ending = true
	a.lingered.Store(true)
	a.wg.Add(1)
	a.idMu.Unlock()
	defer a.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	_ = a.sctp.Shutdown(ctx)
	_ = a.end(ErrSessionsEnded)
}

// stopLinger disarms the timer when the association ends. idMu is held.
func (a *Association) stopLinger() {
	if a.linger != nil {
		a.linger.Stop()
	}
}
