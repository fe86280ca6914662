//go:build js && wasm

package main

import (
	"errors"
	"syscall/js"
)

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// jsCall calls v's method and returns the exception it throws (a data
// channel's or WebSocket's send throws InvalidStateError if it closes
// under it, and a data channel's OperationError if the browser's own send
// buffer is full) as an error instead of a panic, which would end the
// program.
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

// listeners are the event handlers a Go value added to one JavaScript
// event target (a data channel, a WebSocket), removed and released
// together when it is done with the target.
type listeners struct {
	target js.Value
	added  []listener
}

type listener struct {
	event string
	fn    js.Func
}

// on adds f as the handler of event; f gets the event object.
func (l *listeners) on(event string, f func(js.Value)) {
	fn := js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) > 0 {
			f(args[0])
		} else {
			f(js.Undefined())
		}
		return nil
	})
	l.added = append(l.added, listener{event, fn})
	l.target.Call("addEventListener", event, fn)
}

// release removes every handler added and frees its function.
func (l *listeners) release() {
	for _, h := range l.added {
		l.target.Call("removeEventListener", h.event, h.fn)
		h.fn.Release()
	}
	l.added = nil
}
