// Package iwarp connects RDMAP queue pairs to their peers by address, over
// the transport the address names, with a lifecycle rdma_cm users know:
// dial or listen, accept or reject with private data, typed errors for
// each way a connection fails, events, and one Close that releases
// everything the connection made.
//
//	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
//	pd := dev.NewProtectionDomain()
//	cq := dev.NewCompletionQueue(64)
//	qp, _ := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
//
//	conn, err := iwarp.Dial(ctx, "tcp://server:4791", qp, nil)
//	if err != nil { ... }
//	defer conn.Close(ctx)
//	// post work requests on qp; conn.PeerPrivateData() is what the
//	// server sent when it accepted, often an rdmap.RemoteBuffer
//
// The addresses:
//
//   - tcp://host:port is MPA over TCP (RFC 5044 with RFC 6581's enhanced
//     set-up: package mpa), what Linux siw and iWARP NICs speak;
//   - sctp://host:port is DDP over SCTP (RFC 5043: package sctpddp) over
//     DTLS over UDP; the peers authenticate each other (a pre-shared key,
//     pinned certificate fingerprints or CAs, in Config.SCTP).
//
// DialFirst tries several addresses in turn: the usual list is an
// sctp:// address and then a tcp:// one, so that MPA over TCP is the
// fallback when the SCTP path does not come up in time.
//
// Errors: a connection that fails tells why with errors.Is:
// ErrUnreachable (nobody answers: nothing listens, or the path drops the
// packets), ErrRejected (the peer's application rejected it; errors.As
// finds the *ddp.RejectedError with its private data), ErrHandshake (the
// peer answered but the set-up failed: authentication, protocol). Once
// connected, Conn.Err and Conn.Done say how the stream ended:
// rdmap.ErrDisconnected when the peer closed in order, an error wrapping
// rdmap.ErrLLPLost when the transport failed, or the Terminate's triple
// (a *term.Error).
package iwarp
