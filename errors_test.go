//go:build !js

package iwarp_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/internal/udprelay"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// silentUDP is a UDP socket that reads and never answers: a peer that
// drops everything. got counts the datagrams it read.
func silentUDP(t *testing.T) (addr string, got *atomic.Int64) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	got = new(atomic.Int64)
	go func() {
		b := make([]byte, 65536)
		for {
			if _, _, err := u.ReadFrom(b); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	return u.LocalAddr().String(), got
}

// deadAddr returns an address of network where nothing listens.
func deadAddr(t *testing.T, network string) string {
	if network == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	return u.LocalAddr().String()
}

// Every failure Dial and Listen document, with errors.Is on the value the
// package documentation names.
func TestDialListenFailures(t *testing.T) {
	silent, got := silentUDP(t)
	big := make([]byte, iwarp.MaxPrivateData+1)
	closedQP := newSide(t).qp
	closedQP.Close(context.Background())
	for _, tt := range []struct {
		name string
		url  string
		qp   *rdmap.QueuePair
		cfg  *iwarp.Config
		want []error
	}{
		{"no scheme", "127.0.0.1:1", nil, nil, []error{iwarp.ErrBadAddress}},
		{"udp scheme", "udp://127.0.0.1:1", nil, nil, []error{iwarp.ErrBadAddress}},
		{"no port", "tcp://127.0.0.1", nil, nil, []error{iwarp.ErrBadAddress}},
		{"a path", "sctp://127.0.0.1:1/x", nil, nil, []error{iwarp.ErrBadAddress}},
		{"tcp, no such host", "tcp://no-such-host.invalid:1", nil, nil, []error{iwarp.ErrBadAddress}},
		{"sctp, no such host", "sctp://no-such-host.invalid:1", nil, &iwarp.Config{SCTP: psk()}, []error{iwarp.ErrBadAddress}},
		{"sctp without Config.SCTP", "sctp://" + silent, nil, nil, []error{iwarp.ErrConfig, sctpddp.ErrNoPeerAuthentication}},
		{"PSK without identity", "sctp://" + silent, nil, &iwarp.Config{SCTP: &sctpddp.Config{PSK: []byte("k")}}, []error{iwarp.ErrConfig, sctpddp.ErrNoPSKIdentity}},
		{"two authentications", "sctp://" + silent, nil, &iwarp.Config{SCTP: &sctpddp.Config{PSK: []byte("k"), PSKIdentity: []byte("i"), InsecureSkipPeerVerification: true}}, []error{iwarp.ErrConfig, sctpddp.ErrTwoAuthentications}},
		{"AcceptAnyClient on Dial", "sctp://" + silent, nil, &iwarp.Config{SCTP: &sctpddp.Config{AcceptAnyClient: true}}, []error{iwarp.ErrConfig, sctpddp.ErrAcceptAnyClientDial}},
		{"private data over sctp", "sctp://" + silent, nil, &iwarp.Config{SCTP: psk(), PrivateData: big}, []error{iwarp.ErrConfig}},
		{"private data over tcp", "tcp://" + deadAddr(t, "tcp"), nil, &iwarp.Config{PrivateData: big}, []error{iwarp.ErrConfig}},
		{"a closed queue pair", "sctp://" + silent, closedQP, &iwarp.Config{SCTP: psk()}, []error{iwarp.ErrClosed, net.ErrClosed}},
		{"tcp, nothing listens", "tcp://" + deadAddr(t, "tcp"), nil, nil, []error{iwarp.ErrUnreachable}},
		{"sctp, nothing listens", "sctp://" + deadAddr(t, "udp"), nil, &iwarp.Config{SCTP: psk()}, []error{iwarp.ErrUnreachable}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			qp := tt.qp
			if qp == nil {
				qp = newSide(t).qp
			}
			start := time.Now()
			_, err := iwarp.Dial(ctxT(t), tt.url, qp, tt.cfg)
			var dns *net.DNSError
			if errors.As(err, &dns) {
				if !dns.IsNotFound {
					t.Skipf("no resolver that says NXDOMAIN here: %v", err)
				}
				start = time.Now() // the resolver's time is not Dial's
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Dial: %v, want %v", err, w)
				}
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("Dial failed after %v", d)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("more than one line: %q", err)
			}
			if tt.qp == nil && qp.State() != rdmap.StateIdle {
				t.Errorf("the queue pair is %v", qp.State())
			}
		})
	}
	// A datagram sent now arrives after any a Dial sent: once it is in,
	// it should be the only one.
	marker, err := net.Dial("udp", silent)
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	marker.Write([]byte("after every Dial"))
	waitfor.True(t, 5*time.Second, func() bool { return got.Load() > 0 }, "the marker datagram did not arrive")
	if n := got.Load() - 1; n != 0 {
		t.Fatalf("configuration errors sent %d datagrams", n)
	}
	// Listen refuses the same addresses and Configs.
	cert, err := sctpddp.GenerateCertificate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		url  string
		cfg  *iwarp.Config
		want []error
	}{
		{"127.0.0.1:0", nil, []error{iwarp.ErrBadAddress}},
		{"udp://127.0.0.1:0", nil, []error{iwarp.ErrBadAddress}},
		{"tcp://127.0.0.1", nil, []error{iwarp.ErrBadAddress}},
		{"sctp://127.0.0.1:0", nil, []error{iwarp.ErrConfig, sctpddp.ErrNoPeerAuthentication}},
		{"sctp://127.0.0.1:0", &iwarp.Config{SCTP: &sctpddp.Config{PSK: []byte("k")}}, []error{iwarp.ErrConfig, sctpddp.ErrNoPSKIdentity}},
		{"sctp://127.0.0.1:0", &iwarp.Config{SCTP: &sctpddp.Config{AcceptAnyClient: true}}, []error{iwarp.ErrConfig, sctpddp.ErrNoCertificate}},
		{"sctp://127.0.0.1:0", &iwarp.Config{SCTP: &sctpddp.Config{Certificate: &cert, AcceptAnyClient: true, PSK: []byte("k"), PSKIdentity: []byte("i")}}, []error{iwarp.ErrConfig, sctpddp.ErrTwoAuthentications}},
	} {
		l, err := iwarp.Listen(ctxT(t), tt.url, tt.cfg)
		if err == nil {
			l.Close()
		}
		for _, w := range tt.want {
			if !errors.Is(err, w) {
				t.Errorf("Listen(%s): %v, want %v", tt.url, err, w)
			}
		}
	}
	// An address in use is the operating system's error.
	l, err := iwarp.Listen(ctxT(t), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := iwarp.Listen(ctxT(t), l.URL(), nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second Listen on %s: %v", l.URL(), err)
	}
	if _, err := iwarp.DialFirst(ctxT(t), nil, newSide(t).qp, nil); !errors.Is(err, iwarp.ErrBadAddress) {
		t.Fatalf("DialFirst with no address: %v", err)
	}
}

// A cancelled context is reported as itself, an expired one as itself
// beside the reason.
func TestDialContextPassedThrough(t *testing.T) {
	silent, _ := silentUDP(t)
	for _, url := range []string{"sctp://" + silent} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := iwarp.Dial(ctx, url, newSide(t).qp, &iwarp.Config{SCTP: psk()})
		if !errors.Is(err, context.Canceled) || errors.Is(err, iwarp.ErrUnreachable) {
			t.Errorf("%s, cancelled: %v", url, err)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err = iwarp.Dial(dctx, url, newSide(t).qp, &iwarp.Config{SCTP: psk()})
		dcancel()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, iwarp.ErrUnreachable) {
			t.Errorf("%s, expired: %v", url, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := iwarp.Dial(ctx, "tcp://"+deadAddr(t, "tcp"), newSide(t).qp, nil); !errors.Is(err, context.Canceled) || errors.Is(err, iwarp.ErrUnreachable) {
		t.Errorf("tcp, cancelled: %v", err)
	}
}

// A wrong pre-shared key fails on both sides within a second, each naming
// the key's identity.
func TestWrongKeyFailsAtOnce(t *testing.T) {
	var mu sync.Mutex
	var refused []error
	srv := psk()
	srv.Refused = func(_ net.Addr, why error) {
		mu.Lock()
		refused = append(refused, why)
		mu.Unlock()
	}
	l, err := iwarp.Listen(ctxT(t), "sctp://127.0.0.1:0", &iwarp.Config{SCTP: srv})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bad := psk()
	bad.PSK = []byte("another key")
	start := time.Now()
	_, err = iwarp.Dial(ctxT(t), l.URL(), newSide(t).qp, &iwarp.Config{SCTP: bad})
	if d := time.Since(start); d > time.Second || !errors.Is(err, iwarp.ErrHandshake) || !errors.Is(err, sctpddp.ErrPSKMismatch) || !strings.Contains(err.Error(), `"iwarp"`) {
		t.Fatalf("after %v: %v", d, err)
	}
	waitfor.True(t, time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) > 0
	}, "the listener did not hear of the wrong key")
	mu.Lock()
	why := refused[0]
	mu.Unlock()
	if !errors.Is(why, sctpddp.ErrPSKMismatch) || !strings.Contains(why.Error(), `"iwarp"`) {
		t.Fatalf("the listener heard %v", why)
	}
}

// pair connects a client and a server queue pair at url and returns their
// connections.
func pair(t *testing.T, url string, cfg *iwarp.Config, dialCfg *iwarp.Config) (cli, srv *iwarp.Conn, cs, ss *side) {
	l, err := iwarp.Listen(ctxT(t), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cs, ss = newSide(t), newSide(t)
	accepted := make(chan *iwarp.Conn, 1)
	go func() {
		defer close(accepted)
		r, err := l.Accept(ctxT(t))
		if err != nil {
			t.Error(err)
			return
		}
		c, err := r.Accept(ctxT(t), ss.qp, nil)
		if err != nil {
			t.Error(err)
			return
		}
		accepted <- c
	}()
	if dialCfg == nil {
		dialCfg = cfg
	}
	cli, err = iwarp.Dial(ctxT(t), l.URL(), cs.qp, dialCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv = <-accepted
	if srv == nil {
		t.FailNow()
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv, cs, ss
}

// The lifecycle's errors: a local Close is ErrClosed, the peer's orderly
// close over sctp:// is a disconnect that reads as one, a Listener closed
// is ErrClosed, Close fits io.Closer.
func TestLifecycleErrors(t *testing.T) {
	for _, url := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) {
			cli, srv, _, _ := pair(t, url, &iwarp.Config{SCTP: psk()}, nil)
			var closer interface{ Close() error } = cli
			if err := closer.Close(); err != nil {
				t.Fatal(err)
			}
			if err := cli.Err(); !errors.Is(err, iwarp.ErrClosed) || !errors.Is(err, net.ErrClosed) {
				t.Fatalf("after Close: %v", err)
			}
			if err := cli.Close(); err != nil {
				t.Fatalf("a second Close: %v", err)
			}
			select {
			case <-srv.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not see the close")
			}
			err := srv.Err()
			if !errors.Is(err, rdmap.ErrDisconnected) {
				t.Fatalf("the server's stream ended with %v", err)
			}
			if strings.HasPrefix(url, "sctp") && (!strings.Contains(err.Error(), "in order") || !errors.Is(err, sctpddp.ErrSessionTerminated)) {
				t.Fatalf("the orderly close reads %q", err)
			}
		})
	}
	l, err := iwarp.Listen(ctxT(t), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Accept(ctxT(t)); !errors.Is(err, iwarp.ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// Shutdown whose context ends before the outstanding work completes says
// so; the work is flushed.
func TestShutdownExpiredContextReported(t *testing.T) {
	cli, _, cs, ss := pair(t, "tcp://127.0.0.1:0", nil, nil)
	const n = 64 << 20
	region, err := ss.pd.RegisterMemory(make([]byte, n), 0, rdmap.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := cs.pd.RegisterMemory(make([]byte, n), 0, rdmap.LocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := region.Remote().Read(1, sink, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.qp.PostRead(rr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cli.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with a done context and a 64 MiB Read outstanding: %v", err)
	}
	c, err := cs.cq.Wait(ctxT(t))
	if err != nil || c.Status != rdmap.StatusWRFlushErr {
		t.Fatalf("the Read: %+v, %v", c, err)
	}
}

// Request.Accept takes a context: a done one refuses the request, and
// Accept says why.
func TestRequestAcceptContext(t *testing.T) {
	l, err := iwarp.Listen(ctxT(t), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctxT(t))
		if err != nil {
			done <- err
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = r.Accept(ctx, newSide(t).qp, nil)
		done <- err
	}()
	_, err = iwarp.Dial(ctxT(t), l.URL(), newSide(t).qp, nil)
	if !errors.Is(err, iwarp.ErrRejected) {
		t.Fatalf("Dial to a refused request: %v", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept with a done context: %v", err)
	}
	// A request decided once cannot be decided again.
	go func() {
		r, err := l.Accept(ctxT(t))
		if err != nil {
			done <- err
			return
		}
		r.Reject(nil)
		if err := r.Reject(nil); !errors.Is(err, iwarp.ErrDecided) {
			done <- err
			return
		}
		_, err = r.Accept(ctxT(t), newSide(t).qp, nil)
		done <- err
	}()
	iwarp.Dial(ctxT(t), l.URL(), newSide(t).qp, nil)
	if err := <-done; !errors.Is(err, iwarp.ErrDecided) {
		t.Fatalf("a second decision: %v", err)
	}
	// Oversized private data is refused before anything is sent.
	go func() {
		r, err := l.Accept(ctxT(t))
		if err != nil {
			done <- err
			return
		}
		_, err = r.Accept(ctxT(t), newSide(t).qp, make([]byte, iwarp.MaxPrivateData+1))
		r.Reject(nil)
		done <- err
	}()
	iwarp.Dial(ctxT(t), l.URL(), newSide(t).qp, nil)
	if err := <-done; !errors.Is(err, iwarp.ErrConfig) {
		t.Fatalf("Accept with %d octets of private data: %v", iwarp.MaxPrivateData+1, err)
	}
}

// A peer that vanishes: both ends' streams end with ErrPeerDead within
// the dead-peer time, and the error says so.
func TestPeerDead(t *testing.T) {
	cfg := psk()
	cfg.DeadPeerTimeout = 600 * time.Millisecond
	l, err := iwarp.Listen(ctxT(t), "sctp://127.0.0.1:0", &iwarp.Config{SCTP: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := udprelay.New(t, l.Addr().String())
	ss := newSide(t)
	accepted := make(chan *iwarp.Conn, 1)
	go func() {
		req, err := l.Accept(ctxT(t))
		if err != nil {
			close(accepted)
			return
		}
		c, _ := req.Accept(ctxT(t), ss.qp, nil)
		accepted <- c
	}()
	cli, err := iwarp.Dial(ctxT(t), "sctp://"+r.Addr().String(), newSide(t).qp, &iwarp.Config{SCTP: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv := <-accepted
	if srv == nil {
		t.Fatal("not accepted")
	}
	defer srv.Close()
	r.Cut()
	start := time.Now()
	for _, c := range []*iwarp.Conn{cli, srv} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the stream outlived its silent peer")
		}
		if err := c.Err(); !errors.Is(err, iwarp.ErrPeerDead) || !strings.HasPrefix(err.Error(), "iwarp: peer dead") {
			t.Fatalf("%v", err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("ended after %v", d)
	}
	t.Logf("%v: %v", time.Since(start), cli.Err())
}

// A peer that answers but does not speak MPA fails the set-up: ErrHandshake.
func TestDialNotMPA(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	_, err = iwarp.Dial(ctxT(t), "tcp://"+l.Addr().String(), newSide(t).qp, nil)
	if !errors.Is(err, iwarp.ErrHandshake) || errors.Is(err, iwarp.ErrUnreachable) {
		t.Fatalf("Dial to a server that is not MPA: %v", err)
	}
	t.Log(err)
}
