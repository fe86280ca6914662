//go:build !js

package sctpddp

import (
	"context"

	"github.com/iwarpgo/iwarp/sctpddp/sctp"
)

// Beneath pion/dtls lies a batchconn.Conn: the Dial's connected socket,
// or the Listener's, which all its associations share. pion/dtls seals
// and writes one record per SCTP packet, at once, so the only place that
// knows a burst is the association's run loop: it corks the socket
// around the packets it sends on one wake-up (sctp.Config.Batcher), and
// the records of the burst leave in one sendmmsg, with UDP GSO where the
// kernel has it. The socket reaches the association's handshake with
// the context of its set-up, the one value passed that way.

// batcherKey is the context key of the Batcher beneath an association's
// DTLS connection.
type batcherKey struct{}

// withBatcher returns ctx carrying b, the socket beneath the DTLS
// connection of the association set up under it.
func withBatcher(ctx context.Context, b sctp.Batcher) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, batcherKey{}, b)
}

// batcherOf returns the Batcher withBatcher put in ctx, or nil.
func batcherOf(ctx context.Context) sctp.Batcher {
	b, _ := ctx.Value(batcherKey{}).(sctp.Batcher)
	return b
}
