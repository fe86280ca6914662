//go:build !js

// Package datachannel carries a DDP stream (RFC 5043's chunks, package
// sctpddp's sessions) over a WebRTC data channel of a pion/webrtc
// PeerConnection, natively. Both peers make the channel with the same
// stream identifier before they connect, and start a DDP Stream Session
// on it as on an SCTP stream pair:
//
//	st, err := datachannel.Create(pc, 1, sctpddp.ChannelConfig{})
//	// ... exchange the SDP offer and answer ...
//	sess, err := sctpddp.ConnectStream(ctx, st, qp, sctpddp.SessionConfig{})
//
// The peer may be another Go program or a browser, whose RTCDataChannel
// the js/wasm build drives itself (sctpddp.ChannelStream is the part both
// share). A channel is negotiated out of band (no DCEP exchange), unordered
// and reliable (RFC 5043 §10: "The adaptation layer MUST use the Unordered
// option on all Data Chunks"), and marked with wire.DataChannelProtocol.
// The messages carry no PPID of their own: see package sctpddp/wire for
// how the receiver tells a DDP Segment from session control.
package datachannel

import (
	"errors"
	"fmt"

	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// ErrNotDDP: the channel was not made as NewInit makes one.
var ErrNotDDP = errors.New("datachannel: not a DDP data channel")

// NewInit returns the options of a DDP data channel with stream
// identifier id: negotiated out of band (both peers create it with the
// same id, and no DCEP exchange is needed), unordered (RFC 5043 §10: "The
// adaptation layer MUST use the Unordered option on all Data Chunks"),
// reliable (neither MaxRetransmits nor MaxPacketLifeTime), and marked with
// wire.DataChannelProtocol.
func NewInit(id uint16) *webrtc.DataChannelInit {
	ordered, negotiated := false, true
	protocol := wire.DataChannelProtocol
	return &webrtc.DataChannelInit{
		Ordered:    &ordered,
		Negotiated: &negotiated,
		ID:         &id,
		Protocol:   &protocol,
	}
}

// Create creates the DDP data channel with stream identifier id on pc (see
// NewInit) and returns it as a Stream. The peer does the same with the
// same id. Call it before the channel can open (before the SDP exchange,
// or at once on a connected pc), so that no message arrives before the
// stream listens.
func Create(pc *webrtc.PeerConnection, id uint16, cfg sctpddp.ChannelConfig) (*Stream, error) {
	return create(pc, id, cfg, false)
}

// CreateOrdered is Create for a channel that sends ordered, which RFC
// 5043 §10 forbids ("The adaptation layer MUST use the Unordered option on
// all Data Chunks"): it is there only to show what unordered delivery
// changes, as the demo's ordered mode does (a browser page's channel made
// with ordered: true).
func CreateOrdered(pc *webrtc.PeerConnection, id uint16, cfg sctpddp.ChannelConfig) (*Stream, error) {
	return create(pc, id, cfg, true)
}

func create(pc *webrtc.PeerConnection, id uint16, cfg sctpddp.ChannelConfig, ordered bool) (*Stream, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	init := NewInit(id)
	init.Ordered = &ordered
	dc, err := pc.CreateDataChannel(wire.DataChannelProtocol, init)
	if err != nil {
		return nil, err
	}
	s, err := newStream(dc, cfg, ordered)
	if err != nil {
		_ = dc.Close()
		return nil, err
	}
	return s, nil
}

// Stream is a DDP stream over a pion data channel: an
// sctpddp.ChannelStream (a MessageStream for ConnectStream, ReadInitiate
// and SessionRequest) fed by the channel's events.
//
// The stream installs the channel's OnOpen, OnClose, OnMessage and
// OnBufferedAmountLow handlers; the application must not replace them.
// pion calls OnMessage from one read loop per channel, in arrival order.
// Closing the channel (Close, or the channel's own Close) or its
// PeerConnection makes ReadMessage return sctpddp.ErrChannelClosed once
// the messages received before are read.
type Stream struct {
	*sctpddp.ChannelStream
	dc *webrtc.DataChannel
}

// NewStream makes dc, a DDP data channel (see NewInit), a Stream. dc must
// be unordered, reliable, carry wire.DataChannelProtocol and have its
// stream identifier, and no message may have arrived on it yet: wrap it
// before it opens.
func NewStream(dc *webrtc.DataChannel, cfg sctpddp.ChannelConfig) (*Stream, error) {
	return newStream(dc, cfg, false)
}

func newStream(dc *webrtc.DataChannel, cfg sctpddp.ChannelConfig, ordered bool) (*Stream, error) {
	switch {
	case dc.Protocol() != wire.DataChannelProtocol:
		return nil, fmt.Errorf("%w: protocol %q, want %q", ErrNotDDP, dc.Protocol(), wire.DataChannelProtocol)
	case dc.Ordered() && !ordered:
		return nil, fmt.Errorf("%w: ordered (RFC 5043 §10 requires unordered delivery)", ErrNotDDP)
	case dc.MaxRetransmits() != nil || dc.MaxPacketLifeTime() != nil:
		return nil, fmt.Errorf("%w: partially reliable (DDP needs a reliable LLP)", ErrNotDDP)
	case dc.ID() == nil:
		return nil, fmt.Errorf("%w: no stream identifier yet", ErrNotDDP)
	}
	cs, err := sctpddp.NewChannelStream(pionChannel{dc}, *dc.ID(), cfg)
	if err != nil {
		return nil, err
	}
	s := &Stream{ChannelStream: cs, dc: dc}
	dc.SetBufferedAmountLowThreshold(cs.SendQueueLimit() / 2)
	dc.OnBufferedAmountLow(cs.BufferedAmountLow)
	dc.OnMessage(func(m webrtc.DataChannelMessage) { cs.Receive(m.Data, m.IsString) })
	dc.OnOpen(cs.Opened)
	dc.OnClose(cs.Closed)
	cs.SetReadyState(dc.ReadyState().String())
	return s, nil
}

// pionChannel is a pion data channel as a ChannelStream sends on it.
type pionChannel struct{ dc *webrtc.DataChannel }

func (c pionChannel) Send(msg []byte) error  { return c.dc.Send(msg) }
func (c pionChannel) BufferedAmount() uint64 { return c.dc.BufferedAmount() }

func (c pionChannel) Closing() bool {
	st := c.dc.ReadyState()
	return st == webrtc.DataChannelStateClosing || st == webrtc.DataChannelStateClosed
}

// DataChannel returns the underlying data channel.
func (s *Stream) DataChannel() *webrtc.DataChannel { return s.dc }

// BufferedAmount returns the channel's buffered amount: the bytes queued
// or in flight, not yet acknowledged by the peer.
func (s *Stream) BufferedAmount() uint64 { return s.dc.BufferedAmount() }

// Close closes the data channel. ReadMessage returns the messages already
// received, then sctpddp.ErrChannelClosed; blocked writes return
// sctpddp.ErrChannelClosed.
func (s *Stream) Close() error {
	s.Closed()
	return s.dc.Close()
}
