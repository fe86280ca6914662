//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// A port where nothing listens fails as soon as the kernel's ICMP port
// unreachable comes back to the connected socket, not at the handshake
// timeout.
func TestDialNothingListensFailsAtOnce(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := u.LocalAddr().String()
	u.Close()
	start := time.Now()
	_, err = Dial(testCtx(t), "udp", addr, pskConfigs("k", "id"))
	d := time.Since(start)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "nothing listens") {
		t.Fatalf("Dial: %v", err)
	}
	if d > 100*time.Millisecond {
		t.Fatalf("failed after %v", d)
	}
	t.Logf("%v: %v", d, err)
}

// A caller's cancelled context is reported as itself, not as a peer that
// does not answer.
func TestDialCancelledIsCanceled(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0") // open, silent
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = Dial(ctx, "udp", u.LocalAddr().String(), pskConfigs("k", "id"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("Dial: %v", err)
	}
}

// A wrong pre-shared key is refused with a bad_record_mac alert: both
// sides fail within a second, and each says the keys differ.
func TestWrongPSKFailsBothSidesAtOnce(t *testing.T) {
	ctx := testCtx(t)
	var mu sync.Mutex
	var refused []error
	srv := pskConfigs("s3cret-key", "node-a")
	srv.Refused = func(_ net.Addr, why error) {
		mu.Lock()
		refused = append(refused, why)
		mu.Unlock()
	}
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	a, err := Dial(ctx, "udp", l.Addr().String(), pskConfigs("other-key", "node-a"))
	if err == nil {
		a.Close()
		t.Fatal("connected with another key")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the client failed after %v: %v", d, err)
	}
	if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrPSKMismatch) || !strings.Contains(err.Error(), `"node-a"`) {
		t.Fatalf("client: %v", err)
	}
	waitfor.True(t, time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) > 0
	}, "the server did not report the refusal within a second")
	mu.Lock()
	defer mu.Unlock()
	if why := refused[0]; !errors.Is(why, ErrHandshake) || !errors.Is(why, ErrPSKMismatch) || !strings.Contains(why.Error(), `"node-a"`) {
		t.Fatalf("server: %v", why)
	}
	t.Logf("client: %v; server: %v", err, refused[0])
}

// A PSK identity the server does not know is refused at once too.
func TestWrongPSKIdentityFailsAtOnce(t *testing.T) {
	ctx := testCtx(t)
	srv := pskConfigs("s3cret-key", "node-a")
	var heard refusals
	srv.Refused = heard.hear
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	_, err = Dial(ctx, "udp", l.Addr().String(), pskConfigs("s3cret-key", "node-b"))
	if d := time.Since(start); d > time.Second || !errors.Is(err, ErrPSKIdentity) || !strings.Contains(err.Error(), `"node-b"`) {
		t.Fatalf("after %v: %v", d, err)
	}
	if why := heard.first(t); !errors.Is(why, ErrPSKIdentity) || !strings.Contains(why.Error(), `"node-b"`) {
		t.Fatalf("the listener heard %v", why)
	}
}

// first waits up to a second for the first refusal.
func (r *refusals) first(t *testing.T) error {
	t.Helper()
	waitfor.True(t, time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.why) > 0
	}, "the listener heard of no refusal within a second")
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.why[0]
}

// A server that pins another fingerprint refuses the client's certificate
// with an alert: the client fails at once and names its own fingerprint,
// the server names the one the client presented.
func TestUnpinnedClientFailsAtOnce(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := pinnedConfigs(t)
	_, other := mustCert(t)
	s := *srv
	s.PeerFingerprints = []Fingerprint{other}
	var heard refusals
	s.Refused = heard.hear
	l, err := Listen(ctx, "udp", "127.0.0.1:0", &s)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	_, err = Dial(ctx, "udp", l.Addr().String(), cli)
	fp := FingerprintOf(cli.Certificate.Certificate[0]).String()
	if d := time.Since(start); d > time.Second || !errors.Is(err, ErrPeerRefusedCertificate) || !strings.Contains(err.Error(), fp) {
		t.Fatalf("after %v: %v", d, err)
	}
	if why := heard.first(t); !errors.Is(why, ErrFingerprintMismatch) || !strings.Contains(why.Error(), fp) {
		t.Fatalf("the listener heard %v", why)
	}
}

// A client that pins another fingerprint refuses the server's certificate
// with an alert: the server hears at once that its certificate was
// refused.
func TestServerRefusedByClientHearsAtOnce(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := pinnedConfigs(t)
	_, other := mustCert(t)
	s := *srv
	var heard refusals
	s.Refused = heard.hear
	l, err := Listen(ctx, "udp", "127.0.0.1:0", &s)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := *cli
	c.PeerFingerprints = []Fingerprint{other}
	if _, err := Dial(ctx, "udp", l.Addr().String(), &c); !errors.Is(err, ErrFingerprintMismatch) {
		t.Fatalf("Dial: %v", err)
	}
	if why := heard.first(t); !errors.Is(why, ErrPeerRefusedCertificate) {
		t.Fatalf("the listener heard %v", why)
	}
}

// Every validation error wraps ErrConfig, and is given before any packet
// is sent.
func TestConfigErrorsWrapErrConfig(t *testing.T) {
	c, f := mustCert(t)
	ctx := testCtx(t)
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, tt := range []struct {
		name   string
		cfg    *Config
		listen bool
		want   error
	}{
		{"nil", nil, false, ErrNoPeerAuthentication},
		{"none", &Config{}, true, ErrNoPeerAuthentication},
		{"two", &Config{Certificate: &c, PeerFingerprints: []Fingerprint{f}, PSK: []byte("k"), PSKIdentity: []byte("i")}, false, ErrTwoAuthentications},
		{"listener without certificate", &Config{PeerFingerprints: []Fingerprint{f}}, true, ErrNoCertificate},
		{"any client without certificate", &Config{AcceptAnyClient: true}, true, ErrNoCertificate},
		{"any client dialing", &Config{Certificate: &c, AcceptAnyClient: true}, false, ErrAcceptAnyClientDial},
		{"PSK without identity", &Config{PSK: []byte("k")}, false, ErrNoPSKIdentity},
		{"MTU", &Config{PSK: []byte("k"), PSKIdentity: []byte("i"), MTU: MaxMTU + 4}, false, ErrConfig},
	} {
		var err error
		if tt.listen {
			var l *Listener
			if l, err = Listen(ctx, "udp", "127.0.0.1:0", tt.cfg); err == nil {
				l.Close()
			}
		} else {
			_, err = Dial(ctx, "udp", u.LocalAddr().String(), tt.cfg)
		}
		if !errors.Is(err, ErrConfig) || !errors.Is(err, tt.want) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	_ = u.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _, err := u.ReadFrom(make([]byte, 2048)); err == nil {
		t.Fatalf("a refused Config sent a %d-octet datagram", n)
	}
}

// AcceptAnyClient: the client pins the server's certificate and presents
// none; the server takes any client. A client pinning another certificate
// is refused by its own check.
func TestAcceptAnyClient(t *testing.T) {
	checkGoroutines(t)
	cert, fp := mustCert(t)
	srv := &Config{Certificate: &cert, AcceptAnyClient: true, MTU: LoopbackMTU}
	server, client := connect(t, srv, &Config{PeerFingerprints: []Fingerprint{fp}, MTU: LoopbackMTU})
	if client.PeerCertificate() == nil || !FingerprintOf(client.PeerCertificate().Raw).Equal(fp) {
		t.Fatal("the client did not see the server's certificate")
	}
	if server.PeerCertificate() != nil {
		t.Fatal("the server asked the client for a certificate")
	}
	exchange(t, server, client, 1)

	ctx := testCtx(t)
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, other := mustCert(t)
	if _, err := Dial(ctx, "udp", l.Addr().String(), &Config{PeerFingerprints: []Fingerprint{other}}); !errors.Is(err, ErrFingerprintMismatch) {
		t.Fatalf("a client pinning another certificate: %v", err)
	}
}
