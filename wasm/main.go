//go:build js && wasm

// Command wasm is the demo's browser peer: package ddp and rdmap (through
// package peer) compiled with GOOS=js GOARCH=wasm, on a DDP Stream Session
// (RFC 5043, package sctpddp) over an RTCDataChannel that the page makes.
// The browser's own SCTP carries the DDP Segments; each message keeps its
// DDP-SSN, and messages reach the session in the order the channel
// delivered them (see jsStream).
//
// It installs globalThis.iwarpPeer, a small API for the page (app.js):
//
//	connect(dc, {mulpdu, passive}, cb)   start a session on dc; cb(error or null)
//	register(name, len, base, access)    -> {stag} | {error}; access: "r", "w", "l"
//	deregister(stag), invalidate(stag)   -> {} | {error}
//	postRecv(len)                        -> {stag, msn} | {error}
//	write(bytes, stag, to)               -> {wrid} | {error}
//	read(len, stag, to, sink, offset)    -> {wrid} | {error}
//	send(bytes, solicited, invalidateSTag) -> {wrid} | {error}
//	drain()                              -> JSON {events, dropped, regions?, state, error?}
//	close()
//
// Events are queued by the queue pair's observer and handed over in
// batches by drain, which the page calls once per animation frame.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall/js"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/wasm/peer"
)

type session struct {
	p      *peer.Peer
	st     *jsStream
	ctx    context.Context
	cancel context.CancelFunc
	sess   *sctpddp.Session
}

var cur *session // the page's one session; JS calls run on one thread

func main() {
	api := map[string]any{
		"connect":    fn(connect),
		"register":   fn(register),
		"deregister": fn(func(a []js.Value) any { return result(nil, need().p.Deregister(stag(a, 0))) }),
		"invalidate": fn(func(a []js.Value) any { return result(nil, need().p.Invalidate(stag(a, 0))) }),
		"postRecv":   fn(postRecv),
		"write":      fn(write),
		"read":       fn(read),
		"send":       fn(send),
		"drain":      fn(drain),
		"close":      fn(func([]js.Value) any { closeSession(); return nil }),
	}
	js.Global().Set("iwarpPeer", js.ValueOf(api))
	if cb := js.Global().Get("iwarpReady"); cb.Type() == js.TypeFunction {
		cb.Invoke()
	}
	select {}
}

// fn wraps f as a JavaScript function; a Go panic (a bad argument) becomes
// an {error} result rather than the end of the program.
func fn(f func([]js.Value) any) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			if r := recover(); r != nil {
				out = result(nil, fmt.Errorf("%v", r))
			}
		}()
		return f(args)
	})
}

func result(v map[string]any, err error) any {
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	if v == nil {
		v = map[string]any{}
	}
	return v
}

func need() *session {
	if cur == nil {
		panic("not connected")
	}
	return cur
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

func closeSession() {
	s := cur
	cur = nil
	if s == nil {
		return
	}
	s.cancel()
	go func() {
		if s.sess != nil {
			_ = s.sess.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.p.QP.Close(ctx)
		s.st.release()
	}()
}

// connect(dc, {mulpdu, passive}, cb): the active side sends the
// Initiate (sctpddp.ConnectStream), the passive side waits for it
// (ReadInitiate, Accept). The page makes its regions before or after.
func connect(a []js.Value) any {
	dc, opts, cb := a[0], a[1], a[2]
	closeSession()
	mulpdu := sctpddp.MaxDataChannelMULPDU
	if v := opts.Get("mulpdu"); v.Truthy() {
		mulpdu = v.Int()
	}
	st, err := newJSStream(dc, mulpdu)
	if err != nil {
		return result(nil, err)
	}
	p, err := peer.New()
	if err != nil {
		return result(nil, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{p: p, st: st, ctx: ctx, cancel: cancel}
	cur = s
	passive := opts.Get("passive").Truthy()
	go p.Run(ctx)
	go func() {
		cfg := sctpddp.SessionConfig{Window: peer.Window}
		var sess *sctpddp.Session
		var err error
		if passive {
			var req *sctpddp.SessionRequest
			req, err = sctpddp.ReadInitiate(ctx, st, 15*time.Second)
			if err == nil {
				sess, err = req.Accept(p.QP, cfg)
			}
		} else {
			cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
			sess, err = sctpddp.ConnectStream(cctx, st, p.QP, cfg)
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

func register(a []js.Value) any {
	t, err := need().p.Register(a[0].String(), a[1].Int(), uint64(a[2].Float()), a[3].String())
	return result(map[string]any{"stag": t}, err)
}

func postRecv(a []js.Value) any {
	t, msn, err := need().p.PostRecv(a[0].Int())
	return result(map[string]any{"stag": t, "msn": msn}, err)
}

func write(a []js.Value) any {
	id, err := need().p.Write(bytesOf(a[0]), stag(a, 1), uint64(a[2].Float()))
	return result(map[string]any{"wrid": id}, err)
}

func read(a []js.Value) any {
	id, err := need().p.Read(a[0].Int(), stag(a, 1), uint64(a[2].Float()), stag(a, 3), uint64(a[4].Float()))
	return result(map[string]any{"wrid": id}, err)
}

func send(a []js.Value) any {
	id, err := need().p.Send(bytesOf(a[0]), a[1].Truthy(), stag(a, 2))
	return result(map[string]any{"wrid": id}, err)
}

type drained struct {
	Events  []peer.Event  `json:"events"`
	Dropped int           `json:"dropped"`
	Regions []peer.Region `json:"regions,omitempty"`
	State   string        `json:"state"`
	Error   string        `json:"error,omitempty"`
}

// drain returns the events since the last call as JSON (one string
// crosses into JavaScript rather than an object per event), with the
// regions when they changed.
func drain([]js.Value) any {
	s := cur
	if s == nil {
		return `{"events":[],"dropped":0,"state":"none"}`
	}
	var d drained
	var changed bool
	d.Events, d.Dropped, changed = s.p.Drain()
	if d.Events == nil {
		d.Events = []peer.Event{}
	}
	if changed {
		d.Regions = s.p.Regions()
	}
	d.State = s.p.QP.State().String()
	if err := s.p.QP.Err(); err != nil {
		d.Error = err.Error()
	}
	b, err := json.Marshal(d)
	if err != nil {
		return result(nil, err)
	}
	return string(b)
}
