//go:build !js

package mpa

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
)

// connTrace is one connection's Tracer in TestTracePerConnection.
type connTrace struct {
	local, remote net.Addr
	mu            sync.Mutex
	sent, recvd   []byte
	closes        int
}

func (c *connTrace) Octets(fromLocal bool, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fromLocal {
		c.sent = append(c.sent, b...)
	} else {
		c.recvd = append(c.recvd, b...)
	}
}

func (c *connTrace) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
}

// A Listener's Config.Trace gets each connection's addresses and gives
// each its own Tracer: two clients with other private data are told
// apart, each stream starts with its own MPA Request (received) and
// Reply (sent), and each Tracer hears of its connection's close once.
// A startup that fails ends its trace too.
func TestTracePerConnection(t *testing.T) {
	var mu sync.Mutex
	traces := map[string]*connTrace{}
	lcfg := &Config{Trace: func(local, remote net.Addr) Tracer {
		mu.Lock()
		defer mu.Unlock()
		c := &connTrace{local: local, remote: remote}
		traces[remote.String()] = c
		return c
	}}
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", lcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var servers []*Conn
	accepted := make(chan error, 1)
	go func() {
		for range 2 {
			r, err := l.Accept(tctx(t))
			if err != nil {
				accepted <- err
				return
			}
			c, err := r.Accept(newPeer(t, rdmap.QPConfig{}).QP, nil)
			if err != nil {
				accepted <- err
				return
			}
			servers = append(servers, c)
		}
		accepted <- nil
	}()
	clients := map[string]*Conn{}
	for _, pd := range []string{"first", "second"} {
		c, err := Dial(tctx(t), "tcp", l.Addr().String(), newPeer(t, rdmap.QPConfig{}).QP, &Config{PrivateData: []byte(pd)})
		if err != nil {
			t.Fatal(err)
		}
		clients[c.LocalAddr().String()] = c
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		c.Close()
	}
	for _, c := range servers {
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(traces) != 2 {
		t.Fatalf("%d traces, want one a connection", len(traces))
	}
	seen := map[string]bool{}
	for remote, tr := range traces {
		tr.mu.Lock()
		if clients[remote] == nil {
			t.Errorf("a trace for %s, which dialed nothing", remote)
		}
		if tr.local.String() != l.Addr().String() {
			t.Errorf("trace of %s: local %s, want the listener's %s", remote, tr.local, l.Addr())
		}
		req, _, err := ParseFrame(tr.recvd)
		if err != nil || req.Reply {
			t.Errorf("trace of %s: received %d octets, not an MPA Request first: %v", remote, len(tr.recvd), err)
		}
		rep, _, err := ParseFrame(tr.sent)
		if err != nil || !rep.Reply {
			t.Errorf("trace of %s: sent %d octets, not an MPA Reply first: %v", remote, len(tr.sent), err)
		}
		_, ulp, _ := req.Enhancement()
		seen[string(ulp)] = true
		if tr.closes != 1 {
			t.Errorf("trace of %s: Close called %d times, want 1", remote, tr.closes)
		}
		tr.mu.Unlock()
	}
	if !seen["first"] || !seen["second"] {
		t.Errorf("private data traced %v, want first and second apart", seen)
	}
}

// A Dial whose peer is not MPA ends its trace with the failed startup.
func TestTraceEndsWithFailedStartup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	tr := &connTrace{}
	_, err = Dial(tctx(t), "tcp", ln.Addr().String(), newPeer(t, rdmap.QPConfig{}).QP, &Config{Trace: func(_, _ net.Addr) Tracer { return tr }})
	if err == nil {
		t.Fatal("Dial to a peer that is not MPA succeeded")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.closes != 1 || len(tr.sent) == 0 {
		t.Errorf("trace: %d octets sent, Close called %d times; want the MPA Request and one Close", len(tr.sent), tr.closes)
	}
}
