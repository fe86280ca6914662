package mpa

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/fdlimit"
	"github.com/iwarpgo/iwarp/rdmap"
)

// The listening socket's Accept failing for want of a file descriptor
// (EMFILE) does not stop the Listener: once descriptors are free again, a
// genuine initiator is served. Not parallel: the limit is the process's.
func TestListenerSurvivesFDExhaustion(t *testing.T) {
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &Config{HandshakeTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fdlimit.FailAccept(t, l.Addr().(*net.TCPAddr), 200*time.Millisecond)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &Config{HandshakeTimeout: 3 * time.Second})
		if err == nil {
			defer c.Close()
		}
		dialed <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	r, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept after the descriptors came back: %v", err)
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
