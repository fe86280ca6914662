//go:build !js

package sctpddp

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/pion/sctp"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// pionAssociation is pion/sctp's association beneath an Association
// (Config.PionSCTP). pion/sctp sends no Adaptation Layer Indication (RFC
// 5043 §11.1) and retransmits without limit; the monitor's dead-peer
// timeout bounds a silent peer.
type pionAssociation struct{ a *sctp.Association }

// pionHandshake runs pion/sctp's handshake over nc. Its server side takes
// no context, so ctx is enforced by closing conn.
func pionHandshake(ctx context.Context, s *settings, conn, nc net.Conn, server bool) (sctpAssociation, error) {
	opts := []sctp.AssociationOption{
		sctp.WithNetConn(nc),
		sctp.WithMTU(s.MTU),
		sctp.WithMaxReceiveBufferSize(s.MaxReceiveBufferSize),
		sctp.WithMaxMessageSize(s.MaxMessageSize),
		// RFC 5043 §10 speaks of DATA chunks with the U flag; keep pion
		// from negotiating I-DATA (RFC 8260) instead.
		sctp.WithEnableInterleaving(false),
	}
	if s.LoggerFactory != nil {
		opts = append(opts, sctp.WithLoggerFactory(s.LoggerFactory))
	}
	var assoc *sctp.Association
	var err error
	if server {
		sopts := make([]sctp.ServerOption, len(opts))
		for i, o := range opts {
			sopts[i] = o
		}
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		assoc, err = sctp.ServerWithOptions(sopts...)
		if !stop() {
			if err == nil {
				_ = assoc.Close()
			}
			return nil, fmt.Errorf("sctpddp: SCTP handshake: %w", ctx.Err())
		}
	} else {
		copts := make([]sctp.ClientOption, len(opts))
		for i, o := range opts {
			copts[i] = o
		}
		assoc, err = sctp.ClientContext(ctx, copts...)
	}
	if err != nil {
		return nil, fmt.Errorf("sctpddp: SCTP handshake: %w", err)
	}
	return pionAssociation{assoc}, nil
}

func (p pionAssociation) OpenStream(id uint16) (sctpStream, error) {
	st, err := p.a.OpenStream(id, sctp.PayloadProtocolIdentifier(wire.PPIDSegment))
	if err != nil {
		return nil, err
	}
	st.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
	return pionStream{st}, nil
}

func (p pionAssociation) AcceptStream() (sctpStream, error) {
	st, err := p.a.AcceptStream()
	if err != nil {
		return nil, err
	}
	st.SetReliabilityParams(true, sctp.ReliabilityTypeReliable, 0)
	return pionStream{st}, nil
}

func (p pionAssociation) MTU() uint32                        { return p.a.MTU() }
func (p pionAssociation) Shutdown(ctx context.Context) error { return p.a.Shutdown(ctx) }
func (p pionAssociation) Close() error                       { return p.a.Close() }
func (p pionAssociation) Heartbeat()                         { p.a.ActiveHeartbeat() }
func (p pionAssociation) Cause() error                       { return nil }

// pionStream is a pion/sctp stream, sending every message unordered and
// reliably.
type pionStream struct{ s *sctp.Stream }

func (p pionStream) ID() uint16 { return p.s.StreamIdentifier() }

func (p pionStream) Write(_ context.Context, msg []byte, ppid wire.PPID) error {
	_, err := p.s.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(ppid))
	return err
}

func (p pionStream) Read(buf []byte) (int, wire.PPID, error) {
	n, ppi, err := p.s.ReadSCTP(buf)
	return n, wire.PPID(ppi), err
}

func (p pionStream) SetReadDeadline(t time.Time) error { return p.s.SetReadDeadline(t) }
func (p pionStream) BufferedAmount() uint64            { return p.s.BufferedAmount() }
func (p pionStream) SetBufferedAmountLowThreshold(n uint64) {
	p.s.SetBufferedAmountLowThreshold(n)
}
func (p pionStream) OnBufferedAmountLow(f func()) { p.s.OnBufferedAmountLow(f) }
func (p pionStream) Reset() error                 { return p.s.Close() }
