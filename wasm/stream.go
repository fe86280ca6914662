//go:build js && wasm

package main

import (
	"errors"
	"fmt"
	"syscall/js"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// jsStream is a DDP stream (sctpddp.MessageStream) over a browser
// RTCDataChannel: an sctpddp.ChannelStream, the same DDP-SSN numbering,
// framing and checks as the Go peer's data channels, fed by the channel's
// events through syscall/js rather than pion/webrtc's wrapper. pion's
// OnMessage starts a goroutine per message in js/wasm, so messages could
// reach the session in another order than the channel delivered them
// (pion/webrtc#747); here the channel's onmessage handler hands each
// message to the stream synchronously, in delivery order, and never
// blocks (the stream's receive queue has no cap).
//
// Its MULPDU is the page's, which may be below RFC 5043 §9's floor (see
// peer.MinMULPDU): the session segments to it and sizes its read buffer
// by it. The channel itself carries segments up to
// wire.MaxDataChannelMULPDU.
type jsStream struct {
	*sctpddp.ChannelStream
	dc     js.Value
	mulpdu int
	listeners
}

func newJSStream(dc js.Value, mulpdu int) (*jsStream, error) {
	id := dc.Get("id")
	if id.IsNull() || id.IsUndefined() {
		return nil, errors.New("the data channel has no stream identifier (create it negotiated, with an id)")
	}
	if p := dc.Get("protocol").String(); p != wire.DataChannelProtocol {
		return nil, fmt.Errorf("the data channel's protocol is %q, want %q", p, wire.DataChannelProtocol)
	}
	if mulpdu < peer.MinMULPDU || mulpdu > wire.MaxDataChannelMULPDU {
		return nil, fmt.Errorf("MULPDU %d outside [%d, %d]", mulpdu, peer.MinMULPDU, wire.MaxDataChannelMULPDU)
	}
	cs, err := sctpddp.NewChannelStream(jsChannel{dc}, uint16(id.Int()), sctpddp.ChannelConfig{ReceiveQueueLimit: -1})
	if err != nil {
		return nil, err
	}
	s := &jsStream{ChannelStream: cs, dc: dc, mulpdu: mulpdu, listeners: listeners{target: dc}}
	dc.Set("binaryType", "arraybuffer")
	dc.Set("bufferedAmountLowThreshold", cs.SendQueueLimit()/2)
	s.on("message", func(ev js.Value) {
		data := ev.Get("data")
		if data.Type() == js.TypeString {
			cs.Receive([]byte(data.String()), true)
			return
		}
		u8 := js.Global().Get("Uint8Array").New(data)
		msg := make([]byte, u8.Length())
		js.CopyBytesToGo(msg, u8)
		cs.Receive(msg, false)
	})
	s.on("open", func(js.Value) { cs.Opened() })
	s.on("close", func(js.Value) { cs.Closed() })
	s.on("bufferedamountlow", func(js.Value) { cs.BufferedAmountLow() })
	cs.SetReadyState(dc.Get("readyState").String())
	return s, nil
}

// MULPDU returns the page's MULPDU.
func (s *jsStream) MULPDU() int { return s.mulpdu }

// release removes the handlers; the channel is closed.
func (s *jsStream) release() {
	s.Closed()
	if !(jsChannel{s.dc}).Closing() {
		s.dc.Call("close")
	}
	s.listeners.release()
}

// jsChannel is an RTCDataChannel as a ChannelStream sends on it.
type jsChannel struct{ dc js.Value }

// Send copies msg into a Uint8Array and sends it (jsCall: an exception is
// an error).
func (c jsChannel) Send(msg []byte) error {
	u8 := js.Global().Get("Uint8Array").New(len(msg))
	js.CopyBytesToJS(u8, msg)
	return jsCall(c.dc, "send", u8)
}

func (c jsChannel) BufferedAmount() uint64 { return uint64(c.dc.Get("bufferedAmount").Int()) }

func (c jsChannel) Closing() bool {
	st := c.dc.Get("readyState").String()
	return st == "closing" || st == "closed"
}
