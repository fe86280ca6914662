//go:build !js

package mpa

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

// dialFrom connects to addr from the local IP address from (127.0.0.x:
// another peer as the Listener counts them).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acceptAll accepts every Request on l with a fresh queue pair until the
// test ends.
func acceptAll(t *testing.T, l *Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			p := newPeer(t, rdmap.QPConfig{})
			r.Accept(p.QP, nil)
		}
	}()
}

// A peer that holds MaxPerPeer silent connections (no Request) is refused
// further ones at once, while another peer still connects; the silent
// ones are closed after the handshake timeout.
func TestListenerPeerLimit(t *testing.T) {
	noLeaks(t)
	var refused atomic.Int32
	cfg := Config{MaxPerPeer: 4, HandshakeTimeout: 2 * time.Second,
		Refused: func(_ net.Addr, why error) {
			if errors.Is(why, ErrPeerLimit) {
				refused.Add(1)
			}
		}}
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, l)
	var silent []net.Conn
	for range 4 {
		silent = append(silent, dialFrom(t, "127.0.0.1", l.Addr().String()))
	}
	extra := dialFrom(t, "127.0.0.1", l.Addr().String())
	extra.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the fifth connection of a peer at its limit was not closed: %v", err)
	}
	if refused.Load() != 1 {
		t.Fatalf("%d refusals reported, want 1", refused.Load())
	}
	// Another peer is served meanwhile.
	a := newPeer(t, rdmap.QPConfig{})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	nc, err := d.DialContext(tctx(t), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := initiate(tctx(t), nc, a.QP, &Config{})
	if err != nil {
		t.Fatalf("a second peer could not connect beside one at its limit: %v", err)
	}
	c.Close()
	// The silent connections are closed when their handshake time is up.
	for _, s := range silent {
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := s.Read(make([]byte, 1)); isTimeout(err) {
			t.Fatal("a silent connection outlived the handshake timeout")
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A Request that the application does not accept in time is rejected (an
// MPA Reply with the R bit): the initiator hears it, and the Listener
// reports it.
func TestListenerBacklog(t *testing.T) {
	noLeaks(t)
	var refused atomic.Int32
	cfg := Config{Backlog: 1, HandshakeTimeout: 300 * time.Millisecond,
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
	// Nobody accepts: one Request waits in the queue, the second waits for
	// a place in it; both are rejected when their time is up.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			p := newPeer(t, rdmap.QPConfig{})
			_, err := Dial(tctx(t), "tcp", l.Addr().String(), p.QP, &Config{HandshakeTimeout: 5 * time.Second})
			errs <- err
		}()
	}
	// A Request may wait two handshake timeouts from its TCP connection
	// (one to arrive, one to be accepted); then its initiator hears of
	// the rejection.
	for range 2 {
		var re *ddp.RejectedError
		if err := <-errs; !errors.As(err, &re) {
			t.Fatalf("an initiator left waiting got %v, want a rejection", err)
		}
	}
	// Accept finds the first one expired and skips it.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if r, err := l.Accept(ctx); err == nil {
		t.Fatalf("Accept returned a Request whose initiator gave up: %v", r.RemoteAddr())
	}
	if refused.Load() != 2 {
		t.Fatalf("%d refusals reported, want 2", refused.Load())
	}
}

// A burst of genuine Requests, many more than MaxStartups and Backlog, is
// served in full when the application keeps accepting.
func TestListenerBurst(t *testing.T) {
	noLeaks(t)
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &Config{MaxStartups: 8, Backlog: 4, MaxPerPeer: 500})
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, l)
	const n = 200
	var wg sync.WaitGroup
	var failed atomic.Int32
	conns := make(chan *Conn, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newPeer(t, rdmap.QPConfig{})
			c, err := Dial(tctx(t), "tcp", l.Addr().String(), p.QP, nil)
			if err != nil {
				failed.Add(1)
				return
			}
			conns <- c
		}()
	}
	wg.Wait()
	close(conns)
	for c := range conns {
		c.Close()
	}
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d genuine connections failed", f, n)
	}
}

// A peer-to-peer initiator that sends its Request and then no RTR
// indication is cut off after the handshake timeout: the startup lasts
// until the first FPDU.
func TestResponderRTRTimeout(t *testing.T) {
	noLeaks(t)
	l, ch, b := listenFor(t, Config{HandshakeTimeout: 300 * time.Millisecond})
	c := rawDial(t, l.Addr().String())
	offer := ddp.Offer(8, 8, []ddp.RTR{ddp.RTRWrite})
	c.Write((&Frame{Rev: 2, CRC: true, Enhanced: true, PrivateData: offer.Append(nil)}).Append(nil))
	if _, err := ReadFrame(c); err != nil {
		t.Fatal(err)
	}
	<-ch
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
		t.Fatal("the responder kept a connection with no RTR indication")
	}
	waitUntil(t, func() bool { return b.QP.State() != rdmap.StateRunning })
	if !errors.Is(b.QP.Err(), rdmap.ErrLLPLost) {
		t.Fatalf("the queue pair ended with %v", b.QP.Err())
	}
}

// Client and Server run the startup over connections the caller made
// (here a plain TCP listener's), and the queue pairs then move data.
func TestClientServer(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	served := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		r, err := Server(tctx(t), nc, nil)
		if err != nil {
			nc.Close()
			served <- err
			return
		}
		if string(r.PrivateData) != "hello" {
			served <- fmt.Errorf("private data %q", r.PrivateData)
			return
		}
		_, err = r.Accept(b.QP, []byte("welcome"))
		served <- err
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Client(tctx(t), nc, a.QP, &Config{PrivateData: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if string(c.Negotiated().PeerData) != "welcome" {
		t.Fatalf("reply private data %q", c.Negotiated().PeerData)
	}
	rdmaptest.Exercise(t, a, b)
}

// A responder with NoCRC answers a Request whose C bit is 1 with a Reply
// whose C bit is 1 too: CRCs are used either way ("When this bit is '1'
// in either the MPA Request Frame or MPA Reply Frame, CRCs MUST be
// generated and checked by both endpoints", RFC 5044 §7.1.2), and the
// Reply declares it. A Request with C 0 gets C 0.
func TestReplyRepeatsRequestCRC(t *testing.T) {
	noLeaks(t)
	for _, crc := range []bool{true, false} {
		l, ch, _ := listenFor(t, Config{NoCRC: true, ClientServer: true})
		c := rawDial(t, l.Addr().String())
		offer := ddp.Offer(8, 8, nil)
		c.Write((&Frame{Rev: 2, CRC: crc, Enhanced: true, PrivateData: offer.Append(nil)}).Append(nil))
		rep, err := ReadFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		if rep.CRC != crc {
			t.Errorf("Request C %v: Reply C %v", crc, rep.CRC)
		}
		conn := <-ch
		if conn == nil || conn.Negotiated().CRC != crc {
			t.Fatalf("Request C %v: the connection negotiated %+v", crc, conn)
		}
		c.Close()
	}
}
