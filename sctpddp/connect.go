//go:build !js

package sctpddp

import (
	"context"

	"github.com/iwarpgo/iwarp/ddp"
)

// Connect starts a DDP Stream Session as the active side on the DDP
// stream id of association a (RFC 5043 §6.2); see ConnectStream. A
// stream that carries a session of the association already (one this end
// started, or one the peer did) fails with ErrStreamInUse and nothing is
// sent: "A DDP Stream Identifier MUST NOT be reused for another DDP
// Stream Session while any Data Chunk from a prior session might be
// outstanding." (RFC 5043 §6.6) Most programs let Association.Connect
// choose the stream.
func Connect(ctx context.Context, a *Association, id uint16, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	if err := a.claim(id); err != nil {
		return nil, err
	}
	st, err := a.OpenStream(id)
	if err != nil {
		a.unclaim(id)
		return nil, err
	}
	s, err := ConnectStream(ctx, st, ep, cfg)
	if err != nil {
		a.unclaim(id)
		return nil, err
	}
	s.addRelease(func() { a.unclaim(id) })
	return s, nil
}

// Connect starts a DDP Stream Session on a DDP stream of the association
// that carries none: the lowest free odd stream id on the dialing side,
// even on the Listener's (so that the two ends never choose the same).
// Session.ID says which.
func (a *Association) Connect(ctx context.Context, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	id, err := a.freeID()
	if err != nil {
		return nil, err
	}
	return Connect(ctx, a, id, ep, cfg)
}
