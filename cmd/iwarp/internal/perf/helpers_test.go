package perf

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// testServer is a perf server over the iwarp package's listener, with its
// raw listener, until the test ends.
type testServer struct {
	srv  *Server
	url  string
	raw  net.Addr
	mu   sync.Mutex
	errs []error // what Handle returned
}

func startServer(t *testing.T, scheme string, lim Limits) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := &iwarp.Config{}
	var sctpCfg *sctpddp.Config
	if scheme == "sctp" {
		sctpCfg = testSCTPConfig(t)
		cfg.SCTP = sctpCfg
	}
	l, err := iwarp.Listen(ctx, scheme+"://127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: NewServer(lim), url: l.URL()}
	var wg sync.WaitGroup
	if scheme == "tcp" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ts.raw = ln.Addr()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.srv.ServeRawTCP(ctx, ln)
		}()
	} else {
		sl, err := sctpddp.Listen(ctx, "udp", "127.0.0.1:0", ts.srv.RawSCTPConfig(*sctpCfg))
		if err != nil {
			t.Fatal(err)
		}
		ts.raw = sl.Addr()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.srv.ServeRawSCTP(ctx, sl)
			sl.Close()
		}()
	}
	_, port, _ := net.SplitHostPort(ts.raw.String())
	p, _ := strconv.Atoi(port)
	ts.srv.SetRawPort(uint16(p))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := ts.srv.Handle(ctx, req.RemoteAddr().String(), func(qp *rdmap.QueuePair) (func(context.Context), error) {
					conn, err := req.Accept(ctx, qp, nil)
					if err != nil {
						return nil, err
					}
					return func(ctx context.Context) { conn.Shutdown(ctx) }, nil
				}, func() { req.Reject(nil) })
				ts.mu.Lock()
				ts.errs = append(ts.errs, err)
				ts.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		l.Close()
		wg.Wait()
	})
	return ts
}

// serveErrs returns the errors Serve returned so far.
func (ts *testServer) serveErrs() []error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]error(nil), ts.errs...)
}

// testSCTPConfig is a PSK-authenticated configuration at the loopback MTU.
func testSCTPConfig(t *testing.T) *sctpddp.Config {
	return &sctpddp.Config{PSK: []byte("perf test"), PSKIdentity: []byte("perf"), MTU: sctpddp.LoopbackMTU}
}

// connectCfg fills in how a test client connects to ts.
func (ts *testServer) connectCfg(t *testing.T, cfg ClientConfig) ClientConfig {
	scheme, _, _ := cutScheme(ts.url)
	var icfg *iwarp.Config
	if scheme == "sctp" {
		icfg = &iwarp.Config{SCTP: testSCTPConfig(t)}
	}
	cfg.Connect = func(ctx context.Context, qp *rdmap.QueuePair) (*Link, error) {
		c, err := iwarp.Dial(ctx, ts.url, qp, icfg)
		if err != nil {
			return nil, err
		}
		l := &Link{Transport: scheme, Info: ts.url, Close: func(ctx context.Context) { c.Shutdown(ctx) }}
		if m := c.MPA(); m != nil {
			l.CRC = m.Negotiated().CRC
		}
		return l, nil
	}
	cfg.DialRaw = func(ctx context.Context, port uint16) (*RawLink, error) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		if scheme == "tcp" {
			return DialRawTCP(ctx, addr)
		}
		return DialRawSCTP(ctx, addr, testSCTPConfig(t))
	}
	if cfg.Depth == 0 {
		cfg.Depth = 128
	}
	if cfg.CQMod == 0 {
		cfg.CQMod = 100
	}
	if cfg.Iters == 0 && cfg.Duration == 0 {
		cfg.Iters = 100
	}
	return cfg
}

func cutScheme(url string) (string, string, bool) {
	for i := 0; i+3 <= len(url); i++ {
		if url[i:i+3] == "://" {
			return url[:i], url[i+3:], true
		}
	}
	return "", url, false
}

// attacker is a hand-made client: a queue pair connected over MPA from a
// local address of its choice, that sends whatever control message it
// likes and reads the answer.
type attacker struct {
	qp   *rdmap.QueuePair
	conn *mpa.Conn
	cq   *rdmap.CompletionQueue
	ctl  *rdmap.MemoryRegion
	bufs *recvBuffers
}

// dialAttacker connects to ts's perf listener from the IP address from.
func dialAttacker(t *testing.T, ts *testServer, from string) (*attacker, error) {
	t.Helper()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	a := &attacker{cq: dev.NewCompletionQueue(64)}
	var err error
	if a.qp, err = pd.NewQueuePair(rdmap.QPConfig{SendCQ: a.cq, RecvCQ: a.cq, IRD: 8, ORD: 8}); err != nil {
		t.Fatal(err)
	}
	if a.ctl, err = pd.RegisterMemory(make([]byte, CtlLen), 0, 0); err != nil {
		t.Fatal(err)
	}
	if a.bufs, err = newRecvBuffers(pd, a.qp, 4, CtlLen, 1<<32); err != nil {
		t.Fatal(err)
	}
	_, addr, _ := cutScheme(ts.url)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if a.conn, err = mpa.Client(ctx, nc, a.qp, nil); err != nil {
		return nil, err
	}
	t.Cleanup(a.close)
	return a, nil
}

func (a *attacker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	a.qp.Close(ctx)
	cancel()
}

// ask sends m and returns the server's answer.
func (a *attacker) ask(t *testing.T, m Ctl) (Ctl, error) {
	t.Helper()
	if err := sendCtl(a.qp, a.ctl, ctlWRID+1, m); err != nil {
		return Ctl{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		cp, err := a.cq.Wait(ctx)
		if err != nil {
			return Ctl{}, err
		}
		if cp.Status != rdmap.StatusSuccess {
			return Ctl{}, errors.New(cp.Status.String())
		}
		if cp.Op != rdmap.WorkRecv {
			continue
		}
		msg, repost := a.bufs.take(cp)
		got, _, err := ParseCtl(msg)
		repost()
		return got, err
	}
}
