//go:build js && wasm

// Command wasm is the demo's browser peer: package ddp and rdmap (through
// package peer) compiled with GOOS=js GOARCH=wasm, on a DDP Stream Session
// (RFC 5043, package sctpddp) over an RTCDataChannel that the page makes,
// or on MPA (RFC 5044, package mpa) over a WebSocket when the page falls
// back to a byte stream. On a data channel the browser's own SCTP carries
// the DDP Segments; each message keeps its DDP-SSN, and messages reach the
// session in the order the channel delivered them (see jsStream). On a
// WebSocket the page is the MPA Initiator (mpa.Client over the
// WebSocket as a net.Conn, wsConn), and a peer.Tap reports every FPDU
// and Marker that crosses it.
//
// It installs globalThis.iwarpPeer, a small API for the page (app.js).
// qp, last and optional everywhere, picks the queue pair (0, the default,
// or 1 for a second DDP stream on another data channel of the same
// association):
//
//	connect(dc, {mulpdu, passive, qp}, cb) start a session on dc; cb(error or null)
//	connectMPA(url, {mulpdu, markers}, cb) MPA over a WebSocket to url, queue pair 0
//	register(name, len, base, access, qp)  -> {stag} | {error}; access: "r", "w", "a", "l"
//	deregister(stag, qp), invalidate(stag, qp) -> {} | {error}
//	postRecv(len, qp)                      -> {stag, msn} | {error}
//	write(bytes, stag, to, qp)             -> {wrid} | {error}
//	read(len, stag, to, sink, offset, qp)  -> {wrid} | {error}
//	send(bytes, solicited, invalidateSTag, qp) -> {wrid} | {error}
//	atomic(op, stag, to, data, compare, qp) -> {wrid} | {error}; op "fetchadd" (adds data)
//	                                       or "cmpswap" (data if the word equals compare); the
//	                                       original value lands in the "atomic original value" region
//	drain()                                -> JSON {events, dropped, regions?, states, error?}
//	close()
//
// Events are queued by each queue pair's observer (and the Tap) and
// handed over in batches by drain, which the page calls once per
// animation frame; each event and region carries its queue pair's index.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"syscall/js"
	"time"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

type session struct {
	p      *peer.Peer
	st     *jsStream // the data channel, or nil
	ctx    context.Context
	cancel context.CancelFunc
	sess   *sctpddp.Session
	conn   *mpa.Conn
	ws     *wsConn
}

// The page's sessions, by queue pair; JS calls run on one thread.
var sessions []*session

func main() {
	api := map[string]any{
		"connect":    fn(connect),
		"connectMPA": fn(connectMPA),
		"register":   fn(register),
		"deregister": fn(func(a []js.Value) any { return result(nil, need(a, 1).p.Deregister(stag(a, 0))) }),
		"invalidate": fn(func(a []js.Value) any { return result(nil, need(a, 1).p.Invalidate(stag(a, 0))) }),
		"postRecv":   fn(postRecv),
		"write":      fn(write),
		"read":       fn(read),
		"send":       fn(send),
		"atomic":     fn(atomicOp),
		"drain":      fn(drain),
		"close":      fn(func([]js.Value) any { closeAll(); return nil }),
	}
	js.Global().Set("iwarpPeer", js.ValueOf(api))
	if cb := js.Global().Get("iwarpReady"); cb.Type() == js.TypeFunction {
		cb.Invoke()
	}
	select {}
}

// fn wraps f as a JavaScript function. A bad argument from the page (a
// value of the wrong JavaScript type, which syscall/js reports by
// panicking with a *js.ValueError, or a queue pair that is not connected)
// becomes an {error} result rather than the end of the program; any other
// panic is a bug and is not hidden.
func fn(f func([]js.Value) any) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			switch r := recover().(type) {
			case nil:
			case *js.ValueError:
				out = result(nil, r)
			case argError:
				out = result(nil, r)
			default:
				panic(r)
			}
		}()
		// An argument the page left out reads as undefined.
		for len(args) < maxArgs {
			args = append(args, js.Undefined())
		}
		return f(args)
	})
}

// maxArgs is the most arguments a function of the page's API takes.
const maxArgs = 6

// argError is a bad argument from the page, raised by the helpers that
// read arguments (need) and turned into an {error} result by fn.
type argError string

func (e argError) Error() string { return string(e) }

func result(v map[string]any, err error) any {
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	if v == nil {
		v = map[string]any{}
	}
	return v
}

// qpArg reads the optional queue pair index at a[i].
func qpArg(a []js.Value, i int) int {
	if len(a) > i && a[i].Type() == js.TypeNumber {
		return a[i].Int()
	}
	return 0
}

// need returns the session of the queue pair named at a[i].
func need(a []js.Value, i int) *session {
	q := qpArg(a, i)
	if q < 0 || q >= len(sessions) || sessions[q] == nil {
		panic(argError("not connected"))
	}
	return sessions[q]
}

func stag(a []js.Value, i int) uint32 { return uint32(a[i].Float()) }

func bytesOf(v js.Value) []byte {
	if v.Type() == js.TypeString {
		return []byte(v.String())
	}
	b := make([]byte, v.Length())
	js.CopyBytesToGo(b, v)
	return b
}

func closeAll() {
	ss := sessions
	sessions = nil
	for _, s := range ss {
		if s != nil {
			s.close()
		}
	}
}

func (s *session) close() {
	s.cancel()
	go func() {
		if s.sess != nil {
			_ = s.sess.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.p.QP.Close(ctx)
		if s.conn != nil {
			_ = s.conn.Close()
		}
		if s.ws != nil {
			_ = s.ws.Close()
		}
		if s.st != nil {
			s.st.release()
		}
	}()
}

// newSession makes queue pair qp's peer, replacing a session there.
func newSession(qp int) (*session, error) {
	if qp < 0 || qp > 3 {
		return nil, fmt.Errorf("no queue pair %d", qp)
	}
	for len(sessions) <= qp {
		sessions = append(sessions, nil)
	}
	if old := sessions[qp]; old != nil {
		old.close()
		sessions[qp] = nil
	}
	p, err := peer.New()
	if err != nil {
		return nil, err
	}
	p.Index = qp
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{p: p, ctx: ctx, cancel: cancel}
	sessions[qp] = s
	go p.Run(ctx)
	return s, nil
}

// connect(dc, {mulpdu, passive, qp}, cb): the active side sends the
// Initiate (sctpddp.ConnectStream), the passive side waits for it
// (ReadInitiate, Accept). The page makes its regions before or after.
func connect(a []js.Value) any {
	dc, opts, cb := a[0], a[1], a[2]
	qp := 0
	if v := opts.Get("qp"); v.Truthy() {
		qp = v.Int()
	}
	if qp == 0 {
		closeAll()
	}
	mulpdu := wire.MaxDataChannelMULPDU
	if v := opts.Get("mulpdu"); v.Truthy() {
		mulpdu = v.Int()
	}
	st, err := newJSStream(dc, mulpdu)
	if err != nil {
		return result(nil, err)
	}
	s, err := newSession(qp)
	if err != nil {
		st.release()
		return result(nil, err)
	}
	s.st = st
	passive := opts.Get("passive").Truthy()
	go func() {
		cfg := sctpddp.SessionConfig{Window: peer.Window}
		var sess *sctpddp.Session
		var err error
		if passive {
			var req *sctpddp.SessionRequest
			req, err = sctpddp.ReadInitiate(s.ctx, st, 15*time.Second)
			if err == nil {
				sess, err = req.Accept(s.p.QP, cfg)
			}
		} else {
			cctx, ccancel := context.WithTimeout(s.ctx, 15*time.Second)
			sess, err = sctpddp.ConnectStream(cctx, st, s.p.QP, cfg)
			ccancel()
		}
		if err != nil {
			cb.Invoke(err.Error())
			return
		}
		s.sess = sess
		cb.Invoke(js.Null())
	}()
	return result(nil, nil)
}

// connectMPA(url, {mulpdu, markers}, cb): MPA over a WebSocket. The page
// is the Initiator; markers asks for Markers in the FPDUs the Go peer
// sends (and the Go peer, told the same, asks for them back).
func connectMPA(a []js.Value) any {
	url, opts, cb := a[0].String(), a[1], a[2]
	closeAll()
	mulpdu := 0
	if v := opts.Get("mulpdu"); v.Truthy() {
		mulpdu = v.Int()
	}
	mulpdu = peer.MPAMULPDU(mulpdu)
	markers := opts.Get("markers").Truthy()
	s, err := newSession(0)
	if err != nil {
		return result(nil, err)
	}
	go func() {
		err := func() error {
			cctx, ccancel := context.WithTimeout(s.ctx, 10*time.Second)
			defer ccancel()
			ws, err := dialWS(cctx, url)
			if err != nil {
				return err
			}
			s.ws = ws
			tap := peer.NewTap(true, s.p.Add)
			conn, err := mpa.Client(cctx, ws, peer.CapMULPDU(s.p.QP, mulpdu), &mpa.Config{Markers: markers, Trace: func(_, _ net.Addr) mpa.Tracer { return mpa.TraceFunc(tap.Observe) }})
			if err != nil {
				return err
			}
			s.conn = conn
			return nil
		}()
		if err != nil {
			cb.Invoke(err.Error())
			return
		}
		cb.Invoke(js.Null())
	}()
	return result(map[string]any{"mulpdu": mulpdu}, nil)
}

func register(a []js.Value) any {
	t, err := need(a, 4).p.Register(a[0].String(), a[1].Int(), uint64(a[2].Float()), a[3].String())
	return result(map[string]any{"stag": t}, err)
}

func postRecv(a []js.Value) any {
	t, msn, err := need(a, 1).p.PostRecv(a[0].Int())
	return result(map[string]any{"stag": t, "msn": msn}, err)
}

func write(a []js.Value) any {
	id, err := need(a, 3).p.Write(bytesOf(a[0]), stag(a, 1), uint64(a[2].Float()))
	return result(map[string]any{"wrid": id}, err)
}

func read(a []js.Value) any {
	id, err := need(a, 5).p.Read(a[0].Int(), stag(a, 1), uint64(a[2].Float()), stag(a, 3), uint64(a[4].Float()))
	return result(map[string]any{"wrid": id}, err)
}

func send(a []js.Value) any {
	id, err := need(a, 3).p.Send(bytesOf(a[0]), a[1].Truthy(), stag(a, 2))
	return result(map[string]any{"wrid": id}, err)
}

// atomicOp posts an RFC 7306 Atomic Operation. The operands are
// JavaScript numbers: exact up to 2^53.
func atomicOp(a []js.Value) any {
	id, err := need(a, 5).p.Atomic(a[0].String(), stag(a, 1), uint64(a[2].Float()), uint64(a[3].Float()), uint64(a[4].Float()))
	return result(map[string]any{"wrid": id}, err)
}

type drained struct {
	Events  []peer.Event  `json:"events"`
	Dropped int           `json:"dropped"`
	Regions []peer.Region `json:"regions,omitempty"`
	States  []string      `json:"states"`
	Error   string        `json:"error,omitempty"`
}

// drain returns the events since the last call as JSON (one string
// crosses into JavaScript rather than an object per event), with every
// queue pair's regions when any changed.
func drain([]js.Value) any {
	d := drained{Events: []peer.Event{}, States: []string{}}
	changed := false
	for _, s := range sessions {
		if s == nil {
			d.States = append(d.States, "none")
			continue
		}
		ev, dropped, ch := s.p.Drain()
		d.Events = append(d.Events, ev...)
		d.Dropped += dropped
		changed = changed || ch
		d.States = append(d.States, s.p.QP.State().String())
		if err := s.p.QP.Err(); err != nil && d.Error == "" {
			d.Error = err.Error()
		}
	}
	if changed {
		d.Regions = []peer.Region{}
		for _, s := range sessions {
			if s != nil {
				d.Regions = append(d.Regions, s.p.Regions()...)
			}
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return result(nil, err)
	}
	return string(b)
}
