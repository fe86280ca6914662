//go:build !js

package mpa

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// Requests that wait for Accept, in its queue (Backlog) or for a place in
// it, are rejected when their handshake time runs out even though nobody
// calls Accept: none keeps its TCP connection, or its place in the peer's
// count, until an initiator gives up on its own (RFC 5044 §7.1.2 rule
// 10's timeout "prevents certain denial-of-service attacks").
func TestListenerBacklogExpiresWithoutAccept(t *testing.T) {
	noLeaks(t)
	const (
		hs = 300 * time.Millisecond
		n  = 3
	)
	var refused atomic.Int32
	cfg := Config{Backlog: 1, MaxPerPeer: n, HandshakeTimeout: hs,
		Refused: func(_ net.Addr, why error) {
			if errors.Is(why, ErrBacklog) {
				refused.Add(1)
			}
		}}
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var dials []func() error
	for range n {
		p := newPeer(t, rdmap.QPConfig{})
		dials = append(dials, func() error {
			_, err := Dial(tctx(t), "tcp", l.Addr().String(), p.QP, &Config{HandshakeTimeout: 5 * time.Second})
			return err
		})
	}
	// A Request may wait two handshake timeouts from its TCP connection
	// (one to arrive, one for Accept); some slack for a loaded machine.
	rdmaptest.ExpectRejected(t, 2*hs+700*time.Millisecond, dials)
	if got := refused.Load(); got != n {
		t.Fatalf("%d refusals reported, want %d", got, n)
	}
	// The peer's places were given back: one more initiator, within
	// MaxPerPeer, is accepted.
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &Config{HandshakeTimeout: 5 * time.Second})
		if err == nil {
			defer c.Close()
		}
		dialed <- err
	}()
	r, err := l.Accept(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Accept(b.QP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
}
