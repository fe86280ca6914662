//go:build !js

package sctpddp

import (
	"context"

	"github.com/iwarpgo/iwarp/ddp"
)

// Connect starts a DDP Stream Session as the active side on the DDP
// stream id of association a (RFC 5043 §6.2); see ConnectStream.
func Connect(ctx context.Context, a *Association, id uint16, ep ddp.Endpoint, cfg SessionConfig) (*Session, error) {
	st, err := a.OpenStream(id)
	if err != nil {
		return nil, err
	}
	return ConnectStream(ctx, st, ep, cfg)
}
