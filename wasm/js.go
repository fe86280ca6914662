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
