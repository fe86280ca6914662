//go:build !js

package sctpddp

import (
	"context"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// sctpAssociation is the SCTP association beneath an Association: the
// project's own (package sctp, sctpown.go) unless Config.PionSCTP asks for
// pion/sctp's (sctppion.go). It is the only seam between the two: the rest
// of the package is the same over both.
type sctpAssociation interface {
	// OpenStream returns the stream pair of id.
	OpenStream(id uint16) (sctpStream, error)
	// AcceptStream returns the next stream the peer started sending on;
	// it fails once the association has ended.
	AcceptStream() (sctpStream, error)
	// MTU is the largest SCTP packet sent.
	MTU() uint32
	// Shutdown runs the SHUTDOWN sequence, until ctx ends.
	Shutdown(ctx context.Context) error
	// Close ends the association at once.
	Close() error
	// Heartbeat asks for a HEARTBEAT now.
	Heartbeat()
	// Cause says why the association ended by itself, as one of this
	// package's errors, or nil where the countingConn's read error is
	// all that is known.
	Cause() error
}

// sctpStream is one Stream Identifier of an sctpAssociation, both ways.
type sctpStream interface {
	ID() uint16
	// Write queues one message; the stream copies it. It may wait for
	// room until ctx ends.
	Write(ctx context.Context, msg []byte, ppid wire.PPID) error
	// Read reads one whole message; a short buf gives the message's
	// length and io.ErrShortBuffer and keeps the message.
	Read(buf []byte) (int, wire.PPID, error)
	SetReadDeadline(t time.Time) error
	BufferedAmount() uint64
	SetBufferedAmountLowThreshold(threshold uint64)
	OnBufferedAmountLow(f func())
	// Reset resets the outbound stream (RFC 6525).
	Reset() error
}
