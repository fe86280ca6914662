//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// ownAssociation is package sctp's association beneath an Association,
// sctp://'s default. Its INIT and INIT ACK carry the Adaptation Layer
// Indication with DDP's code point, and a peer whose indication is not
// DDP's is refused with an ABORT: RFC 5043 §11.1's table, "NONE: RDMA and
// DDP procedures MUST NOT be performed upon this association"; so it does
// not associate with pion/sctp, which sends none (Config.PionSCTP must
// then be set on both ends). Over DTLS both ends announce Zero Checksum
// Acceptable with the DTLS EDMID (RFC 9653): DTLS's MAC protects the
// packets. Over plain UDP (Config.InsecurePlainUDP) neither does: every
// packet carries the CRC32c (RFC 9260 §6.8), and a Listener's
// association starts from the COOKIE ECHO its demultiplexer authenticated,
// with the cookie keys of its peer (plainConn).
type ownAssociation struct{ a *sctp.Association }

// maxStreams is the stream count each way announced in the INIT and INIT
// ACK: every Stream Identifier up to maxStreamID.
const maxStreams = maxStreamID + 1

// ownRTOMax is RTO.Max (RFC 9260 §6.3.1 C7: "A maximum value MAY be
// placed on RTO provided it is at least RTO.Max seconds", a protocol
// parameter whose §16 default is 60 s): it caps the doubling of the
// retransmission timeout, so that once a path comes back from an outage
// a retransmission crosses it within about 2 s, where doubling from
// 250 ms through a 5 s outage would wait 4 s more.
const ownRTOMax = 2 * time.Second

// ownMaxRetrans is Association.Max.Retrans. With RTO.Max at 2 s, §16's
// 10 consecutive timeouts would declare a peer dead within about 20 s,
// whatever Config.DeadPeerTimeout says; the time the peer has been
// silent decides instead (the association's DeadPeerTimeout and the
// monitor's).
const ownMaxRetrans = 1 << 30

// errNoStreamReset is what Stream.Close returns over the association of
// package sctp, which does not implement RFC 6525's stream reset.
var errNoStreamReset = errors.New("sctpddp: this SCTP association does not reset streams (RFC 6525); Config.PionSCTP's does")

// ownHandshake runs the handshake of package sctp over nc, which carries
// one SCTP packet per Read and Write (a DTLS connection). The handshake
// takes no context, so ctx is enforced by closing conn.
func ownHandshake(ctx context.Context, s *settings, conn, nc net.Conn, server bool) (sctpAssociation, error) {
	cfg := sctp.Config{
		Handshake: sctp.HandshakeConfig{
			OutboundStreams: maxStreams,
			InboundStreams:  maxStreams,
			ZeroChecksum:    s.auth != authPlainUDP,
			RequireDDP:      true,
		},
		MTU:               int(s.MTU),
		ReceiveBufferSize: s.MaxWindow,
		ReceiveWindow:     s.MaxReceiveBufferSize,
		SendBufferSize:    int(s.MaxWindow),
		// The monitor sends HEARTBEATs on an idle path (Heartbeat) and
		// applies Config.DeadPeerTimeout; the association's own
		// idle-path HEARTBEATs would duplicate them.
		HeartbeatInterval: -1,
		DeadPeerTimeout:   s.DeadPeerTimeout,
		RTOMax:            ownRTOMax,
		MaxRetrans:        ownMaxRetrans,
		Batcher:           batcherOf(ctx),
	}
	if cfg.DeadPeerTimeout < 0 {
		cfg.DeadPeerTimeout = 1<<63 - 1
	}
	if pc, ok := conn.(*plainConn); ok {
		cfg.Keys = &pc.keys
	}
	if dl, ok := ctx.Deadline(); ok {
		cfg.HandshakeTimeout = max(time.Until(dl), time.Millisecond)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	var a *sctp.Association
	var err error
	if server {
		a, err = sctp.Server(nc, cfg)
	} else {
		a, err = sctp.Client(nc, cfg)
	}
	if !stop() {
		if err == nil {
			a.Abort()
		}
		return nil, fmt.Errorf("sctpddp: SCTP handshake: %w", ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("sctpddp: SCTP handshake: %w", err)
	}
	return ownAssociation{a}, nil
}

func (o ownAssociation) OpenStream(id uint16) (sctpStream, error) {
	st, err := o.a.OpenStream(id)
	if err != nil {
		return nil, err
	}
	return ownStream{st}, nil
}

func (o ownAssociation) AcceptStream() (sctpStream, error) {
	st, err := o.a.AcceptStream(context.Background())
	if err != nil {
		return nil, err
	}
	return ownStream{st}, nil
}

func (o ownAssociation) MTU() uint32                        { return uint32(o.a.MTU()) }
func (o ownAssociation) Shutdown(ctx context.Context) error { return o.a.Shutdown(ctx) }
func (o ownAssociation) Heartbeat()                         { o.a.Heartbeat() }

func (o ownAssociation) Close() error {
	o.a.Abort()
	return nil
}

// Cause names why the association ended by itself.
func (o ownAssociation) Cause() error {
	err := o.a.Err()
	var ab *sctp.AbortError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sctp.ErrDeadPeer):
		return fmt.Errorf("%w: %w", ErrPeerDead, err)
	case errors.As(err, &ab) && ab.Remote:
		return fmt.Errorf("%w: %w", ErrPeerClosed, err)
	case errors.Is(err, sctp.ErrClosed):
		return ErrPeerClosed
	}
	return fmt.Errorf("%w: %w", ErrPeerClosed, err)
}

// ownStream is a stream of package sctp's association, sending every
// message unordered (RFC 5043 §10).
type ownStream struct{ s *sctp.Stream }

func (o ownStream) ID() uint16 { return o.s.ID() }

func (o ownStream) Write(ctx context.Context, msg []byte, ppid wire.PPID) error {
	return o.s.SendMessage(ctx, uint32(ppid), true, [][]byte{msg})
}

// Writev queues one message given as slices, gathered into the
// association's buffer.
func (o ownStream) Writev(ctx context.Context, parts [][]byte, ppid wire.PPID) error {
	return o.s.SendMessage(ctx, uint32(ppid), true, parts)
}

// unacked is the stream's count of messages queued or unacknowledged, by
// which the Chunker keeps RFC 5043 §10's limit.
func (o ownStream) unacked() int { return o.s.UnackedMessages() }

// sendWindow is what the association lets be queued or in flight now.
func (o ownAssociation) sendWindow() uint64 { return uint64(o.a.SendWindow()) }

func (o ownStream) Read(buf []byte) (int, wire.PPID, error) {
	n, ppid, _, err := o.s.ReadMessage(context.Background(), buf)
	return n, wire.PPID(ppid), err
}

func (o ownStream) SetReadDeadline(t time.Time) error { return o.s.SetReadDeadline(t) }
func (o ownStream) BufferedAmount() uint64            { return o.s.BufferedAmount() }

// SetBufferedAmountLowThreshold has no effect: f is called after every
// acknowledgement that frees some of the stream's messages.
func (o ownStream) SetBufferedAmountLowThreshold(uint64) {}
func (o ownStream) OnBufferedAmountLow(f func())         { o.s.OnAcked(f) }
func (o ownStream) Reset() error                         { return errNoStreamReset }
