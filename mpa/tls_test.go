//go:build !js

package mpa

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
)

func testTLS(t *testing.T) (server, client *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "iwarp test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	client = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return server, client
}

// MPA inside TLS (RFC 5044 §5 leaves securing the LLP to the transport; see docs/security.md on RFC 5042 §5.4.2): every operation
// works, and a client that does not trust the server never connects.
func TestConnTLS(t *testing.T) {
	noLeaks(t)
	srv, cli := testTLS(t)
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	connectPair(t, Config{TLS: srv}, Config{TLS: cli}, a, b)
	rdmaptest.Exercise(t, a, b)

	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &Config{TLS: srv})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := newPeer(t, rdmap.QPConfig{})
	if _, err := Dial(tctx(t), "tcp", l.Addr().String(), c.QP, &Config{TLS: &tls.Config{ServerName: "127.0.0.1"}}); err == nil {
		t.Fatal("connected to an untrusted server")
	}
}

// The partial-FPDU timeout over TLS, whose reads go on after a read
// deadline has passed (TestReaderPartialTimeoutStream).
func TestReaderPartialTimeoutStreamTLS(t *testing.T) {
	server, client := testTLS(t)
	a, b := net.Pipe()
	defer a.Close() // not the TLS ends: their close_notify would wait for a reader
	defer b.Close()
	testPartialTimeoutStream(t, tls.Client(a, client), tls.Server(b, server), 300)
}
