//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall/js"
	"time"
)

// wsConn is a net.Conn over the browser's WebSocket, binary messages
// carrying the octets of a byte stream: what mpa.Client runs over on the
// MPA path. It drives the WebSocket through syscall/js rather than
// github.com/coder/websocket, whose js build brings net/http and would
// take the browser peer past its 8 MB limit.
type wsConn struct {
	ws  js.Value
	url string
	listeners

	mu     sync.Mutex // guards q, rest, err and deadline
	q      [][]byte
	rest   []byte
	err    error
	rdl    time.Time
	ready  chan struct{} // 1-buffered: something to read, an error, or a new deadline
	opened chan struct{}
	once   sync.Once
	open1  sync.Once
}

// wsSendLimit caps the octets the browser may hold unsent for the
// WebSocket: Write waits beyond it.
const wsSendLimit = 1 << 20

func dialWS(ctx context.Context, url string) (*wsConn, error) {
	c := &wsConn{url: url, ready: make(chan struct{}, 1), opened: make(chan struct{})}
	ws, err := jsNew("WebSocket", url)
	if err != nil {
		return nil, err
	}
	c.ws, c.listeners.target = ws, ws
	ws.Set("binaryType", "arraybuffer")
	c.on("open", func(js.Value) { c.open1.Do(func() { close(c.opened) }) })
	c.on("message", func(ev js.Value) {
		u8 := js.Global().Get("Uint8Array").New(ev.Get("data"))
		b := make([]byte, u8.Length())
		js.CopyBytesToGo(b, u8)
		c.mu.Lock()
		c.q = append(c.q, b)
		c.mu.Unlock()
		signal(c.ready)
	})
	c.on("close", func(ev js.Value) {
		c.fail(fmt.Errorf("websocket closed (code %d)", ev.Get("code").Int()))
	})
	c.on("error", func(js.Value) { c.fail(errors.New("websocket error")) })
	select {
	case <-c.opened:
		return c, nil
	case <-c.ready:
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = errors.New("websocket closed before it opened")
		}
		c.Close()
		return nil, err
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
}

// jsNew calls a JavaScript constructor, returning what it throws as an
// error.
func jsNew(class string, args ...any) (v js.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", class, r)
		}
	}()
	return js.Global().Get(class).New(args...), nil
}

func (c *wsConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	signal(c.ready)
}

func (c *wsConn) Read(b []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.rest) == 0 && len(c.q) > 0 {
			c.rest, c.q[0] = c.q[0], nil
			c.q = c.q[1:]
		}
		if len(c.rest) > 0 {
			n := copy(b, c.rest)
			c.rest = c.rest[n:]
			c.mu.Unlock()
			return n, nil
		}
		err, dl := c.err, c.rdl
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			timeout = t.C
			select {
			case <-c.ready:
			case <-timeout:
			}
			t.Stop()
			continue
		}
		<-c.ready
	}
}

func (c *wsConn) Write(b []byte) (int, error) {
	for {
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if c.ws.Get("bufferedAmount").Int()+len(b) <= wsSendLimit || c.ws.Get("bufferedAmount").Int() == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	u8 := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u8, b)
	if err := jsCall(c.ws, "send", u8); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *wsConn) Close() error {
	c.once.Do(func() {
		c.fail(net.ErrClosed)
		_ = jsCall(c.ws, "close")
		c.listeners.release()
	})
	return nil
}

type wsAddr string

func (a wsAddr) Network() string { return "websocket" }
func (a wsAddr) String() string  { return string(a) }

func (c *wsConn) LocalAddr() net.Addr  { return wsAddr("page") }
func (c *wsConn) RemoteAddr() net.Addr { return wsAddr(c.url) }

func (c *wsConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *wsConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.mu.Unlock()
	signal(c.ready)
	return nil
}

// SetWriteDeadline does nothing: the browser takes every write at once
// (Write waits only while a megabyte is unsent).
func (c *wsConn) SetWriteDeadline(time.Time) error { return nil }
