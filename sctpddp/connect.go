//go:build !js

package sctpddp

import (
	"context"

	"github.com/iwarpgo/iwarp/ddp"
)

// Connect starts a DDP Stream Session as the active side on the DDP
// stream id of association a (RFC 5043 §6.2); see ConnectStream. A
// stream that carries or has carried a session of the association (one
// this end started, or one the peer did) fails with ErrStreamInUse and
// nothing is sent: "A DDP Stream Identifier MUST NOT be reused for
// another DDP Stream Session while any Data Chunk from a prior session
// might be outstanding." (RFC 5043 §6.6) Most programs let
// Association.Connect choose the stream.
func Connect(ctx context.Context, a *Association, id uint16, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	if err := a.claim(id); err != nil {
		return nil, err
	}
	return a.connect(ctx, id, ep, cfg)
}

// Connect starts a DDP Stream Session on a DDP stream of the association
// that has carried none: the next odd stream id on the dialing side, even
// on the Listener's (so that the two ends never choose the same).
// Session.ID says which. Ids are not used again on the association (RFC
// 5043 §6.6), so after 32767 sessions on one end it fails with
// ErrNoStreamID (a Listener's Config.MaxStreams may close the association
// sooner).
func (a *Association) Connect(ctx context.Context, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	id, err := a.claimNew()
	if err != nil {
		return nil, err
	}
	return a.connect(ctx, id, ep, cfg)
}

// connect runs the session on stream id, which the caller has claimed;
// when the session ends, or fails to start, the stream is retired.
func (a *Association) connect(ctx context.Context, id uint16, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	st, err := a.openStream(id)
	if err != nil {
		return nil, err
	}
	s, err := ConnectStream(ctx, st, ep, cfg)
	if err != nil {
		a.retire(st)
		return nil, err
	}
	s.addRelease(func() { a.retire(st) })
	return s, nil
}
