package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/term"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestRpingFill checks rping's fill pattern (rping_test_client): the header,
// the letters from 65 + ping%58 cycling through 65..122, a NUL at the end.
func TestRpingFill(t *testing.T) {
	for _, c := range []struct {
		ping, size int
		want       string
	}{
		{0, 26, "rdma-ping-0: ABCDEFGHIJKL\x00"},
		{1, 26, "rdma-ping-1: BCDEFGHIJKLM\x00"},
		{57, 26, "rdma-ping-57: zABCDEFGHIJ\x00"},
		{58, 26, "rdma-ping-58: ABCDEFGHIJK\x00"},
		{0, 80, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzABCDEFGH\x00"},
		{2147483647, 26, "rdma-ping-2147483647: HIJ\x00"},
	} {
		b := make([]byte, c.size)
		for i := range b {
			b[i] = 0xee
		}
		Fill(b, c.ping)
		if string(b) != c.want {
			t.Errorf("Fill(%d, %d) = %q, want %q", c.ping, c.size, b, c.want)
		}
		if got := CString(b); len(got) != c.size-1 {
			t.Errorf("Fill(%d, %d): C string of %d octets, want %d", c.ping, c.size, len(got), c.size-1)
		}
	}
}

func TestRpingInfo(t *testing.T) {
	i := Info{Buf: 0x0102030405060708, RKey: 0x11223344, Size: 64}
	b := i.Append(nil)
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64}
	if !bytes.Equal(b, want) {
		t.Fatalf("Append = % x, want % x", b, want)
	}
	got, err := ParseInfo(b)
	if err != nil || got != i {
		t.Fatalf("ParseInfo = %+v, %v", got, err)
	}
	if _, err := ParseInfo(append(b, 0)); err == nil || !strings.Contains(err.Error(), "bogus data, size 17") {
		t.Errorf("ParseInfo of 17 octets: %v", err)
	}
}

func TestRpingCheckSize(t *testing.T) {
	for _, c := range []struct {
		size int
		ok   bool
	}{{25, false}, {26, true}, {64, true}, {65535, true}, {65536, false}} {
		if err := CheckSize(c.size); (err == nil) != c.ok {
			t.Errorf("CheckSize(%d) = %v", c.size, err)
		}
	}
}

// pair runs a client against a server over a transport that connect
// sets up, and returns both sides' outputs and errors.
type result struct {
	clientErr, serverErr error
	clientOut, serverOut string
	pings, served        int
}

// syncBuf is a bytes.Buffer safe for concurrent writers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// connector connects a client's and a server's queue pairs.
type connector func(t *testing.T, ctx context.Context, client, server *rdmap.QueuePair) error

func runPair(t *testing.T, connect connector, ccfg, scfg Config) result {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	cep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
	if err != nil {
		t.Fatal(err)
	}
	sep, err := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), DefaultIRD, DefaultORD)
	if err != nil {
		t.Fatal(err)
	}
	var cout, sout syncBuf
	if ccfg.Verbose == nil {
		ccfg.Verbose = &cout
	}
	if scfg.Verbose == nil {
		scfg.Verbose = &sout
	}
	c, err := NewClient(cep, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(sep, scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := connect(t, ctx, cep.QP, sep.QP); err != nil {
		t.Fatal(err)
	}
	var r result
	done := make(chan struct{})
	go func() {
		r.serverErr = s.Run(ctx)
		close(done)
	}()
	r.clientErr = c.Run(ctx)
	<-done
	r.clientOut, r.serverOut = cout.String(), sout.String()
	r.pings, r.served = c.Pings(), s.Pings()
	return r
}

// mpaConnect connects over loopback TCP with MPA.
func mpaConnect(ccfg, scfg *mpa.Config) connector {
	return func(t *testing.T, ctx context.Context, client, server *rdmap.QueuePair) error {
		l, err := mpa.Listen(context.Background(), "tcp", "127.0.0.1:0", scfg)
		if err != nil {
			return err
		}
		defer l.Close()
		accepted := make(chan error, 1)
		go func() {
			req, err := l.Accept(ctx)
			if err == nil {
				_, err = req.Accept(server, nil)
			}
			accepted <- err
		}()
		if _, err := mpa.Dial(ctx, "tcp", l.Addr().String(), client, ccfg); err != nil {
			return err
		}
		return <-accepted
	}
}

// sctpConnect connects over DDP over SCTP over DTLS on loopback.
func sctpConnect(t *testing.T, ctx context.Context, client, server *rdmap.QueuePair) error {
	cfg := &sctpddp.Config{PSK: []byte("rping"), PSKIdentity: []byte("rping"), MTU: sctpddp.LoopbackMTU}
	l, err := sctpddp.Listen(ctx, "udp", "127.0.0.1:0", cfg)
	if err != nil {
		return err
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan error, 1)
	go func() {
		a, err := l.Accept(ctx)
		if err != nil {
			accepted <- err
			return
		}
		t.Cleanup(func() { a.Close() })
		req, err := a.Sessions(0).Accept(ctx)
		if err == nil {
			_, err = req.Accept(server, sctpddp.SessionConfig{})
		}
		accepted <- err
	}()
	a, err := sctpddp.Dial(ctx, "udp", l.Addr().String(), cfg)
	if err != nil {
		return err
	}
	t.Cleanup(func() { a.Close() })
	if _, err := sctpddp.Connect(ctx, a, 1, client, sctpddp.SessionConfig{}); err != nil {
		return err
	}
	return <-accepted
}

// wantPings checks the -v lines of both sides for n pings of size octets.
func wantPings(t *testing.T, r result, n, size int) {
	t.Helper()
	if r.clientErr != nil || r.serverErr != nil {
		t.Fatalf("client: %v; server: %v", r.clientErr, r.serverErr)
	}
	if r.pings != n || r.served != n {
		t.Errorf("%d pings, %d served; want %d", r.pings, r.served, n)
	}
	var cw, sw strings.Builder
	b := make([]byte, size)
	for i := range n {
		Fill(b, i)
		fmt.Fprintf(&cw, "ping data: %s\n", CString(b))
		fmt.Fprintf(&sw, "server ping data: %s\n", CString(b))
	}
	if r.clientOut != cw.String() {
		t.Errorf("client printed:\n%s\nwant:\n%s", r.clientOut, cw.String())
	}
	if r.serverOut != sw.String() {
		t.Errorf("server printed:\n%s\nwant:\n%s", r.serverOut, sw.String())
	}
}

// TestRpingClientServer pings between the Go client and server over MPA in
// each mode the command offers, and over SCTP.
func TestRpingClientServer(t *testing.T) {
	for _, c := range []struct {
		name       string
		connect    connector
		size, pngs int
	}{
		{"tcp rev2 client-server", mpaConnect(&mpa.Config{ClientServer: true}, &mpa.Config{}), 0, 10},
		{"tcp rev2 p2p write", mpaConnect(&mpa.Config{RTR: []ddp.RTR{ddp.RTRWrite}}, &mpa.Config{}), 0, 3},
		{"tcp rev2 p2p read", mpaConnect(&mpa.Config{RTR: []ddp.RTR{ddp.RTRRead}}, &mpa.Config{}), 0, 3},
		{"tcp rev1", mpaConnect(&mpa.Config{Revision: 1}, &mpa.Config{}), 0, 3},
		{"tcp no CRC", mpaConnect(&mpa.Config{NoCRC: true, ClientServer: true}, &mpa.Config{NoCRC: true}), 0, 3},
		{"tcp markers", mpaConnect(&mpa.Config{Markers: true, ClientServer: true}, &mpa.Config{Markers: true}), 1000, 3},
		{"tcp smallest", mpaConnect(&mpa.Config{ClientServer: true}, nil), MinSize, 3},
		{"tcp largest", mpaConnect(&mpa.Config{ClientServer: true}, nil), MaxSize, 3},
		{"sctp", sctpConnect, 0, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Size: c.size, Count: c.pngs, Validate: true}
			r := runPair(t, c.connect, cfg, cfg)
			wantPings(t, r, c.pngs, cfg.size())
		})
	}
}

// TestRpingServerBufferTooSmall: a client that advertises more than the
// server's -S fails the server (rping's RDMA Read would fail) and the
// client sees the connection end.
func TestRpingServerBufferTooSmall(t *testing.T) {
	r := runPair(t, mpaConnect(&mpa.Config{ClientServer: true}, nil), Config{Size: 100, Count: 1}, Config{Size: 64})
	if r.serverErr == nil || !strings.Contains(r.serverErr.Error(), "100 octets, larger than this server's 64") {
		t.Errorf("server: %v", r.serverErr)
	}
	if r.clientErr == nil || r.pings != 0 {
		t.Errorf("client: %d pings, %v", r.pings, r.clientErr)
	}
}

// TestRpingClientUntilCancelled: Count 0 pings until the context ends.
func TestRpingClientUntilCancelled(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	cep, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	sep, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	var cout syncBuf
	c, err := NewClient(cep, Config{Verbose: &cout})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(sep, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mpaConnect(&mpa.Config{ClientServer: true}, nil)(t, ctx, cep.QP, sep.QP); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Run(ctx) }()
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		// Stop after the 20th ping was printed.
		waitfor.Until(time.Minute, func() bool { return strings.Contains(cout.String(), "rdma-ping-19: ") })
		cancel()
	}()
	err = c.Run(cctx)
	if !errors.Is(err, context.Canceled) || c.Pings() < 20 {
		t.Errorf("Run: %d pings, %v; want at least 20 and context.Canceled", c.Pings(), err)
	}
	if err := <-served; err != nil {
		t.Errorf("server: %v", err)
	}
}

// TestRpingClientDetectsMismatch: a server that echoes altered data makes a
// validating client fail with ErrMismatch, and a validating server
// detects a client whose data is not rping's pattern.
func TestRpingClientDetectsMismatch(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	cep, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	sep, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	c, err := NewClient(cep, Config{Count: 1, Validate: true})
	if err != nil {
		t.Fatal(err)
	}
	// A hand-made server: reads, changes one octet, writes back.
	s, err := NewServer(sep, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mpaConnect(&mpa.Config{ClientServer: true}, nil)(t, ctx, cep.QP, sep.QP); err != nil {
		t.Fatal(err)
	}
	bad := make(chan struct{})
	go func() {
		defer close(bad)
		src, err := s.recv(ctx)
		if err != nil {
			return
		}
		sep.QP.PostRead(rdmap.ReadWR{ID: wrRDMA, Local: rdmap.SGE{MR: s.rdmaMR, Length: src.Size}, RemoteSTag: src.RKey, RemoteTO: src.Buf})
		if _, err := s.wait(ctx, rdmap.WorkRead); err != nil {
			return
		}
		s.rdmaMR.Bytes()[20] ^= 1
		s.send()
		sink, err := s.recv(ctx)
		if err != nil {
			return
		}
		sep.QP.PostWrite(rdmap.WriteWR{ID: wrRDMA, SGL: []rdmap.SGE{{MR: s.rdmaMR, Length: sink.Size}}, RemoteSTag: sink.RKey, RemoteTO: sink.Buf})
		s.wait(ctx, rdmap.WorkWrite)
		s.send()
		s.recv(ctx)
		sep.QP.Close(ctx)
	}()
	if err := c.Run(ctx); !errors.Is(err, ErrMismatch) {
		t.Errorf("client: %v, want ErrMismatch", err)
	}
	<-bad

	// The other way: a client whose source is not rping's pattern.
	cep2, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	sep2, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	c2, _ := NewClient(cep2, Config{})
	s2, _ := NewServer(sep2, Config{Validate: true})
	if err := mpaConnect(&mpa.Config{ClientServer: true}, nil)(t, ctx, cep2.QP, sep2.QP); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s2.Run(ctx) }()
	copy(c2.startMR.Bytes(), "not rping's data")
	c2.advertise(c2.Source())
	if err := <-served; !errors.Is(err, ErrMismatch) {
		t.Errorf("server: %v, want ErrMismatch", err)
	}
	cep2.QP.Close(ctx)
}

// TestRpingServerSeesTerminate: a peer that sends a Send longer than rping's
// 16-octet receive buffer is terminated (DDP "message too long"), and the
// server's Run reports it as an error, not as a disconnect.
func TestRpingServerSeesTerminate(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	cep, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	sep, _ := NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), 1, 1)
	s, err := NewServer(sep, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mpaConnect(&mpa.Config{ClientServer: true}, nil)(t, ctx, cep.QP, sep.QP); err != nil {
		t.Fatal(err)
	}
	long, _ := cep.PD.RegisterMemory(make([]byte, 17), 0, 0)
	if err := cep.QP.PostSend(rdmap.SendWR{SGL: []rdmap.SGE{{MR: long, Length: 17}}}); err != nil {
		t.Fatal(err)
	}
	err = s.Run(ctx)
	if !errors.Is(err, term.DDPMessageTooLong) {
		t.Errorf("server: %v, want DDP message too long", err)
	}
	var te *term.Error
	if !errors.As(err, &te) || te.Remote {
		t.Errorf("server: %v, want a locally detected *term.Error", err)
	}
	cep.QP.Close(ctx)
}
