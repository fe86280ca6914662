//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/leaktest"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// checkGoroutines fails the test if a goroutine it started outlives it
// (leaktest.Check). pion's timers and loops end shortly after Close. A
// pion read-deadline timer (one goroutine per stream, ending at its
// deadline, at most RetiredStreamTimeout away) is not counted: one has
// been seen to outlive its association's close.
func checkGoroutines(t *testing.T) {
	t.Helper()
	leaktest.Check(t, pionDeadlineTimer)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCert(t testing.TB) (tls.Certificate, Fingerprint) {
	t.Helper()
	c, err := GenerateCertificate()
	if err != nil {
		t.Fatal(err)
	}
	f, err := CertificateFingerprint(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

// pinnedConfigs returns a server and a client Config that pin each other.
func pinnedConfigs(t testing.TB) (srv, cli *Config) {
	sc, sf := mustCert(t)
	cc, cf := mustCert(t)
	srv = &Config{Certificate: &sc, PeerFingerprints: []Fingerprint{cf}, MTU: LoopbackMTU}
	cli = &Config{Certificate: &cc, PeerFingerprints: []Fingerprint{sf}, MTU: LoopbackMTU}
	return srv, cli
}

// connect listens with srv, dials with cli and returns both ends. All is
// closed at the end of the test.
func connect(t *testing.T, srv, cli *Config) (server, client *Association) {
	t.Helper()
	ctx := testCtx(t)
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	type res struct {
		a   *Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		a, err := l.Accept(ctx)
		ch <- res{a, err}
	}()
	client, err = Dial(ctx, "udp", l.Addr().String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { _ = r.a.Close() })
	return r.a, client
}

func TestConfigNeedsExactlyOneAuthentication(t *testing.T) {
	c, f := mustCert(t)
	ctx := testCtx(t)
	tests := []struct {
		cfg  Config
		want error
	}{
		{Config{}, ErrNoPeerAuthentication},
		{Config{Certificate: &c}, ErrNoPeerAuthentication},
		{Config{Certificate: &c, PeerFingerprints: []Fingerprint{f}, PSK: []byte("k"), PSKIdentity: []byte("i")}, ErrTwoAuthentications},
		{Config{Certificate: &c, PeerFingerprints: []Fingerprint{f}, InsecureSkipPeerVerification: true}, ErrTwoAuthentications},
	}
	for i, tt := range tests {
		if _, err := Dial(ctx, "udp", "127.0.0.1:9", &tt.cfg); !errors.Is(err, tt.want) {
			t.Errorf("%d: Dial err = %v, want %v", i, err, tt.want)
		}
		if _, err := Listen(ctx, "udp", "127.0.0.1:0", &tt.cfg); !errors.Is(err, tt.want) {
			t.Errorf("%d: Listen err = %v, want %v", i, err, tt.want)
		}
	}
	if _, err := Dial(ctx, "udp", "127.0.0.1:9", &Config{Certificate: &c, PeerFingerprints: []Fingerprint{f}, MTU: MaxMTU + 4}); err == nil {
		t.Error("MTU above MaxMTU accepted")
	}
}

func TestPinnedFingerprintConnects(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	// Each side sees the certificate it pinned.
	if f := FingerprintOf(server.PeerCertificate().Raw); !f.Equal(srv.PeerFingerprints[0]) {
		t.Fatal("server sees another client certificate")
	}
	if f := FingerprintOf(client.PeerCertificate().Raw); !f.Equal(cli.PeerFingerprints[0]) {
		t.Fatal("client sees another server certificate")
	}
	if client.MULPDU() != wire.MULPDUForMTU(LoopbackMTU) {
		t.Fatalf("MULPDU = %d", client.MULPDU())
	}
	exchange(t, server, client, 7)
}

// exchange runs an RFC 5043 §6.2 session on stream sid: Initiate, Accept,
// segments both ways, Terminate.
func exchange(t *testing.T, server, client *Association, sid uint16) {
	t.Helper()
	ctx := testCtx(t)
	cs, err := client.OpenStream(sid)
	if err != nil {
		t.Fatal(err)
	}
	ssn, err := cs.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionInitiate, PrivateData: []byte("hello")})
	if err != nil || ssn != 0 {
		t.Fatalf("Initiate: ssn %d, %v", ssn, err)
	}
	ss, err := server.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ss.ID() != sid {
		t.Fatalf("accepted stream %d, want %d", ss.ID(), sid)
	}
	buf := make([]byte, 9000)
	n, ppid, err := ss.ReadMessage(ctx, buf)
	if err != nil || ppid != wire.PPIDSessionControl {
		t.Fatalf("read: %v %v", ppid, err)
	}
	m, _, err := wire.ParseSessionControl(buf[:n])
	if err != nil || m.Function != wire.FunctionInitiate || string(m.PrivateData) != "hello" || m.SSN != 0 {
		t.Fatalf("got %+v %v", m, err)
	}
	if _, err := ss.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionAccept}); err != nil {
		t.Fatal(err)
	}
	n, ppid, err = cs.ReadMessage(ctx, buf)
	if err != nil || ppid != wire.PPIDSessionControl {
		t.Fatalf("read accept: %v %v", ppid, err)
	}
	if m, _, err := wire.ParseSessionControl(buf[:n]); err != nil || m.Function != wire.FunctionAccept {
		t.Fatalf("got %+v %v", m, err)
	}
	seg := taggedSegment(100)
	for i := 1; i <= 3; i++ {
		ssn, err := cs.WriteSegment(ctx, seg)
		if err != nil || ssn != wire.SSN(i) {
			t.Fatalf("segment %d: ssn %d, %v", i, ssn, err)
		}
	}
	for i := 1; i <= 3; i++ {
		n, ppid, err := ss.ReadMessage(ctx, buf)
		if err != nil || ppid != wire.PPIDSegment {
			t.Fatalf("read segment: %v %v", ppid, err)
		}
		c, _, err := wire.ParseSegmentChunk(buf[:n])
		if err != nil || !bytes.Equal(c.Segment, seg) {
			t.Fatalf("segment: %v", err)
		}
	}
	if _, err := cs.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate}); err != nil {
		t.Fatal(err)
	}
	n, ppid, err = ss.ReadMessage(ctx, buf)
	if err != nil || ppid != wire.PPIDSessionControl {
		t.Fatal(err)
	}
	if m, _, err := wire.ParseSessionControl(buf[:n]); err != nil || m.Function != wire.FunctionTerminate || m.SSN != 4 {
		t.Fatalf("terminate: %+v %v", m, err)
	}
}

// taggedSegment returns a tagged DDP Segment with n payload bytes.
func taggedSegment(n int) []byte {
	seg := make([]byte, ddp.TaggedHeaderLen+n)
	seg[0] = 0xC1 // T=1 L=1 DV=1
	for i := range n {
		seg[ddp.TaggedHeaderLen+i] = byte(i)
	}
	return seg
}

func TestWrongFingerprintNeverConnects(t *testing.T) {
	checkGoroutines(t)
	ctx := testCtx(t)
	srv, cli := pinnedConfigs(t)
	_, other := mustCert(t)

	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// The client pins a fingerprint the server does not have.
	bad := *cli
	bad.PeerFingerprints = []Fingerprint{other}
	_, err = Dial(ctx, "udp", l.Addr().String(), &bad)
	if !errors.Is(err, ErrFingerprintMismatch) {
		t.Fatalf("Dial err = %v, want ErrFingerprintMismatch", err)
	}
	if !strings.Contains(err.Error(), FingerprintOf(srv.Certificate.Certificate[0]).String()) {
		t.Errorf("error does not name the presented fingerprint: %v", err)
	}

	// The server pins another client: the client is refused.
	srv2 := *srv
	srv2.PeerFingerprints = []Fingerprint{other}
	l2, err := Listen(ctx, "udp", "127.0.0.1:0", &srv2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if a, err := Dial(dctx, "udp", l2.Addr().String(), cli); err == nil {
		a.Close()
		t.Fatal("client connected to a server that pins another certificate")
	}
	// Neither listener ever produces an association.
	actx, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if a, err := l.Accept(actx); err == nil {
		a.Close()
		t.Fatal("listener accepted a peer with a wrong fingerprint")
	}
	if a, err := l2.Accept(actx); err == nil {
		a.Close()
		t.Fatal("listener accepted an unpinned client")
	}
}

func pskConfigs(key, id string) *Config {
	return &Config{PSK: []byte(key), PSKIdentity: []byte(id), MTU: LoopbackMTU}
}

func TestPSK(t *testing.T) {
	checkGoroutines(t)
	t.Run("right", func(t *testing.T) {
		server, client := connect(t, pskConfigs("s3cret-key", "node-a"), pskConfigs("s3cret-key", "node-a"))
		if client.PeerCertificate() != nil {
			t.Fatal("PSK mode has a certificate")
		}
		exchange(t, server, client, 1)
	})
	for _, tt := range []struct{ name, key, id string }{
		{"wrong key", "other-key", "node-a"},
		{"wrong identity", "s3cret-key", "node-b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			l, err := Listen(ctx, "udp", "127.0.0.1:0", pskConfigs("s3cret-key", "node-a"))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			// The listener answers a Finished that does not decrypt with
			// a bad_record_mac alert (TestWrongPSKFailsBothSidesAtOnce).
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			a, err := Dial(dctx, "udp", l.Addr().String(), pskConfigs(tt.key, tt.id))
			if err == nil {
				a.Close()
				t.Fatal("connected")
			}
			t.Logf("Dial: %v", err)
			actx, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel2()
			if a, err := l.Accept(actx); err == nil {
				a.Close()
				t.Fatal("listener accepted")
			}
		})
	}
}

// testCA makes a CA and a certificate for each name signed by it.
func testCA(t *testing.T, names ...string) (*x509.CertPool, []tls.Certificate) {
	t.Helper()
	ca, err := issueCertificate(&x509.Certificate{
		Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	var certs []tls.Certificate
	for _, name := range names {
		c, err := issueCertificate(&x509.Certificate{
			Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}, &ca)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	return pool, certs
}

func TestCAVerified(t *testing.T) {
	checkGoroutines(t)
	pool, certs := testCA(t, "server.test", "client.test")
	srv := &Config{Certificate: &certs[0], CAs: pool, MTU: LoopbackMTU}
	cli := &Config{Certificate: &certs[1], CAs: pool, ServerName: "server.test", MTU: LoopbackMTU}
	server, client := connect(t, srv, cli)
	if client.PeerCertificate().Subject.CommonName != "server.test" {
		t.Fatal("wrong server certificate")
	}
	exchange(t, server, client, 3)

	// A client expecting another name, and a client from another CA, fail.
	ctx := testCtx(t)
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wrongName := *cli
	wrongName.ServerName = "other.test"
	if a, err := Dial(ctx, "udp", l.Addr().String(), &wrongName); err == nil {
		a.Close()
		t.Fatal("connected despite a wrong server name")
	}
	_, strangers := testCA(t, "client.test")
	stranger := &Config{Certificate: &strangers[0], CAs: pool, ServerName: "server.test", MTU: LoopbackMTU}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if a, err := Dial(dctx, "udp", l.Addr().String(), stranger); err == nil {
		a.Close()
		t.Fatal("server accepted a client certificate from another CA")
	}
}

func TestInsecureSkipPeerVerificationIsExplicit(t *testing.T) {
	checkGoroutines(t)
	c1, _ := mustCert(t)
	c2, _ := mustCert(t)
	server, client := connect(t,
		&Config{Certificate: &c1, InsecureSkipPeerVerification: true},
		&Config{Certificate: &c2, InsecureSkipPeerVerification: true})
	exchange(t, server, client, 0)
}

// sniffConn passes SCTP packets through and records the DATA chunks it
// sees going out.
type sniffConn struct {
	net.Conn
	mu     sync.Mutex
	chunks []dataChunk
}

type dataChunk struct {
	flags byte
	sid   uint16
	ppid  uint32
	data  []byte
}

func (c *sniffConn) Write(p []byte) (int, error) {
	// RFC 4960 §3: 12-byte common header, then chunks padded to 4 bytes.
	for off := 12; off+4 <= len(p); {
		typ, flags := p[off], p[off+1]
		l := int(binary.BigEndian.Uint16(p[off+2:]))
		if l < 4 || off+l > len(p) {
			break
		}
		if typ == 0 && l >= 16 { // DATA
			c.mu.Lock()
			c.chunks = append(c.chunks, dataChunk{
				flags: flags,
				sid:   binary.BigEndian.Uint16(p[off+8:]),
				ppid:  binary.BigEndian.Uint32(p[off+12:]),
				data:  append([]byte(nil), p[off+16:off+l]...),
			})
			c.mu.Unlock()
		}
		off += (l + 3) &^ 3
	}
	return c.Conn.Write(p)
}

// TestUnorderedPPIDsOnTheWire: messages with PPID 16 and 17 cross in both
// directions on several streams; every DATA chunk sent has the U flag, PPID
// 16 or 17, and the DDP-SSN the sender assigned, unfragmented (B and E
// set).
func TestUnorderedPPIDsOnTheWire(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	var sniffers []*sniffConn
	var mu sync.Mutex
	hook := func(c net.Conn) net.Conn {
		s := &sniffConn{Conn: c}
		mu.Lock()
		sniffers = append(sniffers, s)
		mu.Unlock()
		return s
	}
	srv.connHook, cli.connHook = hook, hook
	server, client := connect(t, srv, cli)
	ctx := testCtx(t)

	const perStream = 50
	streams := []uint16{2, 4, 9}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	send := func(s *Stream) {
		defer wg.Done()
		var err error
		for i := range perStream {
			if i%5 == 0 {
				_, err = s.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionReject, PrivateData: []byte{byte(i)}})
			} else {
				_, err = s.WriteSegment(ctx, taggedSegment(i))
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}
	recv := func(s *Stream) {
		defer wg.Done()
		buf := make([]byte, 9000)
		seen := make(map[wire.SSN]bool)
		for range perStream {
			n, ppid, err := s.ReadMessage(ctx, buf)
			if err != nil {
				errs <- err
				return
			}
			var ssn wire.SSN
			switch ppid {
			case wire.PPIDSegment:
				c, _, err := wire.ParseSegmentChunk(buf[:n])
				if err != nil || int(c.SSN)%5 == 0 || !bytes.Equal(c.Segment, taggedSegment(int(c.SSN))) {
					errs <- errors.New("bad segment")
					return
				}
				ssn = c.SSN
			case wire.PPIDSessionControl:
				m, _, err := wire.ParseSessionControl(buf[:n])
				if err != nil || int(m.SSN)%5 != 0 || m.PrivateData[0] != byte(m.SSN) {
					errs <- errors.New("bad control message")
					return
				}
				ssn = m.SSN
			}
			if seen[ssn] {
				errs <- errors.New("duplicate DDP-SSN")
				return
			}
			seen[ssn] = true
		}
	}
	// The client opens the streams; the server accepts each and answers on
	// it while the client is still sending: both directions cross.
	for _, sid := range streams {
		s, err := client.OpenStream(sid)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go send(s)
		go recv(s)
	}
	for range streams {
		s, err := server.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go send(s)
		go recv(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, s := range sniffers {
		s.mu.Lock()
		for _, c := range s.chunks {
			total++
			if c.flags&0x07 != 0x07 { // U, B, E
				t.Fatalf("DATA chunk flags %#x: want U=1, B=1, E=1", c.flags)
			}
			switch wire.PPID(c.ppid) {
			case wire.PPIDSegment:
				if _, _, err := wire.ParseSegmentChunk(c.data); err != nil {
					t.Fatal(err)
				}
			case wire.PPIDSessionControl:
				if _, _, err := wire.ParseSessionControl(c.data); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("DATA chunk with PPID %d", c.ppid)
			}
		}
		s.mu.Unlock()
	}
	if total < 2*len(streams)*perStream {
		t.Fatalf("saw %d DATA chunks, want at least %d", total, 2*len(streams)*perStream)
	}
}

func TestStreamChecks(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	_, client := connect(t, srv, cli)
	ctx := testCtx(t)
	s, err := client.OpenStream(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteSegment(ctx, taggedSegment(client.MULPDU()-ddp.TaggedHeaderLen+1)); !errors.Is(err, wire.ErrSegmentTooLarge) {
		t.Fatalf("oversize segment: %v", err)
	}
	if _, err := s.WriteSegment(ctx, []byte{0x80, 0}); !errors.Is(err, wire.ErrTruncated) {
		t.Fatalf("short segment: %v", err)
	}
	if _, err := s.WriteSessionControl(ctx, wire.SessionControl{Function: 0x42}); !errors.Is(err, wire.ErrUnknownFunctionCode) {
		t.Fatalf("bad function: %v", err)
	}
	if err := s.WriteMessage(ctx, 53, []byte{0, 0, 0, 1}); !errors.Is(err, wire.ErrUnexpectedPPID) {
		t.Fatalf("PPID 53: %v", err)
	}
	wrong := wire.SegmentChunk{SSN: 5, Segment: taggedSegment(0)}
	if err := s.WriteMessage(ctx, wire.PPIDSegment, wrong.Append(nil)); !errors.Is(err, ErrSSNOutOfOrder) {
		t.Fatalf("wrong DDP-SSN: %v", err)
	}
	if s.NextSSN() != 0 {
		t.Fatal("a refused write advanced the DDP-SSN")
	}
	ok := wire.SegmentChunk{SSN: 0, Segment: taggedSegment(0)}
	if err := s.WriteMessage(ctx, wire.PPIDSegment, ok.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if s.NextSSN() != 1 {
		t.Fatal("DDP-SSN did not advance")
	}
	if err := s.NewSession(ctx); err != nil || s.NextSSN() != 0 {
		t.Fatalf("NewSession: %v, next %d", err, s.NextSSN())
	}
}

func TestReadMessageContext(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	ctx := testCtx(t)
	cs, _ := client.OpenStream(3)
	if _, err := cs.WriteSegment(ctx, taggedSegment(1)); err != nil {
		t.Fatal(err)
	}
	ss, err := server.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, _, err := ss.ReadMessage(ctx, buf); err != nil {
		t.Fatal(err)
	}
	// Nothing more is coming: a short context ends the read.
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := ss.ReadMessage(rctx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// The stream still works afterwards.
	if _, err := cs.WriteSegment(ctx, taggedSegment(2)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := ss.ReadMessage(ctx, buf); err != nil || n != wire.SSNLen+ddp.TaggedHeaderLen+2 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	// A short buffer keeps the message.
	if _, err := cs.WriteSegment(ctx, taggedSegment(50)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ss.ReadMessage(ctx, buf[:10]); err == nil {
		t.Fatal("short buffer accepted")
	}
	if n, _, err := ss.ReadMessage(ctx, buf); err != nil || n != wire.SSNLen+ddp.TaggedHeaderLen+50 {
		t.Fatalf("after short buffer: n=%d err=%v", n, err)
	}
	// AcceptStream honours its context too.
	actx, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := server.AcceptStream(actx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcceptStream err = %v", err)
	}
}

// TestCloseEndsPeer: closing one side ends reads on the other side and
// every goroutine of both.
func TestCloseEndsPeer(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	ctx := testCtx(t)
	cs, _ := client.OpenStream(1)
	if _, err := cs.WriteSegment(ctx, taggedSegment(1)); err != nil {
		t.Fatal(err)
	}
	ss, err := server.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, _, err := ss.ReadMessage(ctx, buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := ss.ReadMessage(ctx, buf)
		done <- err
	}()
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read succeeded after the peer closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read did not end after the peer closed")
	}
	if _, err := cs.WriteSegment(ctx, taggedSegment(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	if _, err := client.OpenStream(2); !errors.Is(err, ErrClosed) {
		t.Fatalf("OpenStream after Close: %v", err)
	}
}

// TestShutdownDelivers: data queued before Shutdown arrives.
func TestShutdownDelivers(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	ctx := testCtx(t)
	cs, _ := client.OpenStream(1)
	const count = 200
	for range count {
		if _, err := cs.WriteSegment(ctx, taggedSegment(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ss, err := server.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2000)
	for i := range count {
		if _, _, err := ss.ReadMessage(ctx, buf); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// pionDeadlineTimer is the function of pion/sctp's read-deadline timer
// goroutine.
const pionDeadlineTimer = "sctp.(*Stream).SetReadDeadline.func1"
