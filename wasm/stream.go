//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall/js"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/wasm/peer"
)

// jsStream is a DDP stream (sctpddp.MessageStream) over a browser
// RTCDataChannel, driven through syscall/js rather than pion/webrtc's
// wrapper: pion's OnMessage starts a goroutine per message in js/wasm, so
// messages could reach the session in another order than the channel
// delivered them (pion/webrtc#747). Here the channel's onmessage handler
// copies each message into a queue synchronously, in delivery order, and
// the session's read loop takes them from there.
//
// Framing is sctpddp.DataChannelStream's: each message is a DDP-SSN and a
// DDP Segment or a DDP Stream Session Control message (RFC 5043 §5.2), the
// PPID implied by the third octet (sctpddp.DataChannelPPID).
type jsStream struct {
	dc     js.Value
	id     uint16
	mulpdu int // largest DDP Segment, both ways (peer.MinMULPDU and up)
	limit  int // bufferedAmount cap, bytes

	mu     sync.Mutex // guards q and err
	q      []jsMsg
	err    error // set when the channel closed: returned once q is empty
	ready  chan struct{}
	intr   chan struct{}
	low    chan struct{}
	opened chan struct{}
	closed chan struct{}
	once   sync.Once
	open1  sync.Once
	funcs  []jsHandler

	wmu  sync.Mutex // serialises writes; guards next
	next sctpddp.SSN
}

type jsHandler struct {
	event string
	fn    js.Func
}

type jsMsg struct {
	data []byte
	text bool
}

var errChannelClosed = errors.New("data channel closed")

func newJSStream(dc js.Value, mulpdu int) (*jsStream, error) {
	id := dc.Get("id")
	if id.IsNull() || id.IsUndefined() {
		return nil, errors.New("the data channel has no stream identifier (create it negotiated, with an id)")
	}
	if dc.Get("protocol").String() != sctpddp.DataChannelProtocol {
		return nil, fmt.Errorf("the data channel's protocol is %q, want %q", dc.Get("protocol").String(), sctpddp.DataChannelProtocol)
	}
	if mulpdu < peer.MinMULPDU || mulpdu > sctpddp.MaxDataChannelMULPDU {
		return nil, fmt.Errorf("MULPDU %d outside [%d, %d]", mulpdu, peer.MinMULPDU, sctpddp.MaxDataChannelMULPDU)
	}
	s := &jsStream{
		dc: dc, id: uint16(id.Int()), mulpdu: mulpdu,
		limit:  sctpddp.DefaultDataChannelSendQueueLimit,
		ready:  make(chan struct{}, 1),
		intr:   make(chan struct{}, 1),
		low:    make(chan struct{}, 1),
		opened: make(chan struct{}),
		closed: make(chan struct{}),
	}
	dc.Set("binaryType", "arraybuffer")
	dc.Set("bufferedAmountLowThreshold", s.limit/2)
	s.on("message", func(ev js.Value) {
		data := ev.Get("data")
		var m jsMsg
		if data.Type() == js.TypeString {
			m = jsMsg{data: []byte(data.String()), text: true}
		} else {
			u8 := js.Global().Get("Uint8Array").New(data)
			m.data = make([]byte, u8.Length())
			js.CopyBytesToGo(m.data, u8)
		}
		s.mu.Lock()
		if s.err == nil {
			s.q = append(s.q, m)
		}
		s.mu.Unlock()
		signal(s.ready)
	})
	s.on("open", func(js.Value) { s.markOpen() })
	s.on("close", func(js.Value) { s.markClosed() })
	s.on("bufferedamountlow", func(js.Value) { signal(s.low) })
	switch dc.Get("readyState").String() {
	case "open":
		s.markOpen()
	case "closing", "closed":
		s.markClosed()
	}
	return s, nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (s *jsStream) on(event string, f func(js.Value)) {
	fn := js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) > 0 {
			f(args[0])
		} else {
			f(js.Undefined())
		}
		return nil
	})
	s.funcs = append(s.funcs, jsHandler{event, fn})
	s.dc.Call("addEventListener", event, fn)
}

func (s *jsStream) markOpen() { s.open1.Do(func() { close(s.opened) }) }

func (s *jsStream) markClosed() {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = errChannelClosed
		s.mu.Unlock()
		close(s.closed)
		signal(s.ready)
	})
}

// release removes the handlers; the channel is closed.
func (s *jsStream) release() {
	s.markClosed()
	if st := s.dc.Get("readyState").String(); st != "closed" && st != "closing" {
		s.dc.Call("close")
	}
	for _, h := range s.funcs {
		s.dc.Call("removeEventListener", h.event, h.fn)
		h.fn.Release()
	}
	s.funcs = nil
}

func (s *jsStream) ID() uint16  { return s.id }
func (s *jsStream) MULPDU() int { return s.mulpdu }

func (s *jsStream) InterruptRead() { signal(s.intr) }

func (s *jsStream) ReadMessage(ctx context.Context, buf []byte) (int, sctpddp.PPID, error) {
	for {
		s.mu.Lock()
		if len(s.q) > 0 {
			m := s.q[0]
			if m.text {
				s.q = s.q[1:]
				s.mu.Unlock()
				return 0, 0, fmt.Errorf("%w: a text message on data channel %d", sctpddp.ErrUnexpectedPPID, s.id)
			}
			ppid := sctpddp.DataChannelPPID(m.data)
			if len(buf) < len(m.data) {
				s.mu.Unlock()
				return len(m.data), ppid, io.ErrShortBuffer
			}
			s.q[0] = jsMsg{}
			s.q = s.q[1:]
			s.mu.Unlock()
			n := copy(buf, m.data)
			if ppid == sctpddp.PPIDSegment && n >= sctpddp.SSNLen {
				// RFC 5043 §9: "The SCTP adaptation layer MUST reject DDP
				// Segments that are larger than the maximum size specified."
				if err := sctpddp.CheckSegmentSize(n-sctpddp.SSNLen, s.mulpdu); err != nil {
					return n, ppid, err
				}
			}
			return n, ppid, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return 0, 0, err
		}
		select {
		case <-s.ready:
		case <-s.intr:
			return 0, 0, sctpddp.ErrReadInterrupted
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
}

func (s *jsStream) NewSession(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.waitOpen(ctx); err != nil {
		return err
	}
	s.next = 0
	select {
	case <-s.intr:
	default:
	}
	return nil
}

func (s *jsStream) WriteSegmentv(ctx context.Context, hdr []byte, payload [][]byte) (sctpddp.SSN, error) {
	n := len(hdr)
	for _, p := range payload {
		n += len(p)
	}
	if err := sctpddp.CheckSegmentSize(n, s.mulpdu); err != nil {
		return 0, err
	}
	// The DDP Control Field's DDP Version must be 01b, or the peer would
	// take the segment for session control (see sctpddp.DataChannelPPID).
	if len(hdr) == 0 || hdr[0]&0x03 != 0x01 {
		return 0, sctpddp.ErrDataChannelFraming
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ssn := s.next
	b := make([]byte, 0, sctpddp.SSNLen+n)
	b = append(b, byte(ssn>>8), byte(ssn))
	b = append(b, hdr...)
	for _, p := range payload {
		b = append(b, p...)
	}
	if err := s.send(ctx, b); err != nil {
		return 0, err
	}
	return ssn, nil
}

func (s *jsStream) WriteSessionControl(ctx context.Context, m sctpddp.SessionControl) (sctpddp.SSN, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m.SSN = s.next
	if err := m.Validate(); err != nil {
		return 0, err
	}
	if err := s.send(ctx, m.Append(nil)); err != nil {
		return 0, err
	}
	return m.SSN, nil
}

func (s *jsStream) waitOpen(ctx context.Context) error {
	select {
	case <-s.opened:
		return nil
	case <-s.closed:
		return errChannelClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send waits for the channel to open and for room under the cap, then
// hands msg to the browser. The caller holds wmu.
func (s *jsStream) send(ctx context.Context, msg []byte) error {
	if err := s.waitOpen(ctx); err != nil {
		return err
	}
	for s.dc.Get("bufferedAmount").Int()+len(msg) > s.limit {
		t := time.NewTimer(2 * time.Millisecond)
		select {
		case <-s.low:
		case <-t.C:
		case <-s.closed:
			t.Stop()
			return errChannelClosed
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
	if s.dc.Get("readyState").String() != "open" {
		return errChannelClosed
	}
	u8 := js.Global().Get("Uint8Array").New(len(msg))
	js.CopyBytesToJS(u8, msg)
	if err := jsCall(s.dc, "send", u8); err != nil {
		return fmt.Errorf("data channel %d: %w", s.id, err)
	}
	s.next = s.next.Next()
	return nil
}

// jsCall calls v's method and returns the exception it throws (send
// throws InvalidStateError if the channel closes under it, and
// OperationError if the browser's own send buffer is full) as an error
// instead of a panic, which would end the program.
func jsCall(v js.Value, method string, args ...any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = errors.New(je.Error())
				return
			}
			panic(r)
		}
	}()
	v.Call(method, args...)
	return nil
}
