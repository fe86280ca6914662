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
//	defer conn.Close()
//	remote, _, err := rdmap.ParseRemoteBuffer(conn.PeerPrivateData())
//	// post work requests on qp: remote.Write, remote.Read, ...
//
// A server advertises the memory its clients may use in the private data
// of its Accept, as rdma_cm programs do: req.Accept(ctx, qp,
// region.Remote().Append(nil)), at most MaxPrivateData octets.
//
// The addresses:
//
//   - tcp://host:port is MPA over TCP (RFC 5044 with RFC 6581's enhanced
//     set-up: package mpa), what Linux siw and iWARP NICs speak;
//   - sctp://host:port is DDP over SCTP (RFC 5043: package sctpddp) over
//     DTLS over UDP; Config.SCTP says how the peers authenticate: a
//     pre-shared key (labs), pinned certificate fingerprints or CAs, or a
//     server that authenticates itself only (sctpddp.Config.AcceptAnyClient,
//     its clients pinning its fingerprint).
//
// DialFirst tries several addresses in turn: the usual list is an
// sctp:// address and then a tcp:// one, so that MPA over TCP is the
// fallback when the SCTP path does not come up in time.
//
// Errors: each failure wraps one value for errors.Is: ErrBadAddress,
// ErrConfig (found before any packet is sent), ErrClosed, ErrUnreachable
// (nothing listens, or nothing answers), ErrRejected (errors.As finds
// the *ddp.RejectedError with its private data), ErrHandshake (a wrong
// key or certificate, a protocol error), or the context's own error when
// ctx ended it. Once connected, Conn.Err and Conn.Done say how the stream
// ended: rdmap.ErrDisconnected when the peer closed in order,
// ErrPeerDead when it went silent, ErrClosed after Close, the
// Terminate's triple (a *term.Error), or an error wrapping
// rdmap.ErrLLPLost when the transport failed.
//
// Close ends a connection at once; Shutdown(ctx) lets its outstanding
// work complete first.
package iwarp
