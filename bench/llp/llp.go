// Package llp sets up one-way bulk transfers over the lower-layer
// protocols that iwarp's sctp:// is measured against, each as a Sender
// and a Receiver that can live in different processes: iwarp's sctp://
// and tcp:// RDMA Writes, quic-go, raw pion/dtls records, pion/sctp over
// pion/dtls, plain TCP and TLS over TCP.
//
// Every byte is checked at the receiver: the sender writes a pattern (a
// counter in each 8 octets, see Fill) and the receiver counts only the
// bytes that hold it where they belong (Counter), so a transport that
// loses, duplicates or misplaces data cannot look fast.
package llp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// MessageSize is the size of one message: the unit of every write.
const MessageSize = 64 << 10

// Batch is the most messages one Send moves: a slot of iwarp's target
// ring.
const Batch = 32

// Security holds what both ends need to authenticate each other: the
// server's certificate (TLS, QUIC), the pool the client verifies it with,
// and the pre-shared key of the DTLS transports.
type Security struct {
	Cert  tls.Certificate
	Roots *x509.CertPool
	PSK   []byte
}

// NewSecurity makes a self-signed ECDSA certificate for 127.0.0.1 and a
// random 32-octet PSK.
func NewSecurity() (*Security, error) {
	psk := make([]byte, 32)
	rand.Read(psk)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "llpbench"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return SecurityFrom(der, key, psk)
}

// SecurityFrom rebuilds a Security from a certificate, its key (nil for a
// client) and the PSK.
func SecurityFrom(der []byte, key any, psk []byte) (*Security, error) {
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return &Security{
		Cert:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Roots: roots,
		PSK:   psk,
	}, nil
}

func (s *Security) serverTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.Cert}, MinVersion: tls.VersionTLS13}
}

func (s *Security) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: s.Roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
}

// A Transport makes the two ends of a one-way transfer.
type Transport struct {
	Name string
	// Network is "udp" or "tcp": which kind of relay can carry it.
	Network string
	// About says in a few words what is measured.
	About string
	// Lossy says that the transport does not retransmit: what it loses
	// stays lost.
	Lossy  bool
	Listen func(ctx context.Context, addr string, sec *Security) (Listener, error)
	Dial   func(ctx context.Context, addr string, sec *Security) (Sender, error)
}

// A Listener accepts connections and returns their receiving ends.
type Listener interface {
	Addr() net.Addr
	Accept(ctx context.Context) (Receiver, error)
	Close() error
}

// A Receiver is the receiving end of one connection.
type Receiver interface {
	// Receive reads and checks until the connection ends or fails,
	// counting into c. Corrupt data ends it with an error.
	Receive(c *Counter) error
	Close() error
}

// A Sender is the sending end of one connection.
type Sender interface {
	// Send sends n more messages of MessageSize (1 <= n <= Batch),
	// continuing the pattern, and returns once it has handed them to the
	// transport.
	Send(ctx context.Context, n int) error
	// Sent returns the bytes sent so far: what the receiver is to verify.
	Sent() int64
	Close() error
}

// All returns every transport, in the order of the tables.
func All() []Transport {
	return []Transport{
		IwarpSCTP(1350), IwarpSCTP(8000), IwarpTCP(),
		QUIC(), DTLS(8000), PionSCTP(8000), TCP(), TLS(),
	}
}

// Extra returns transports not in All's default set that can be named.
func Extra() []Transport {
	return []Transport{DTLS(1350), PionSCTP(1350), DTLSGCM(8000), DTLSGCMBatched(8000), IwarpSCTPCert(1350), IwarpSCTPCert(8000), IwarpSCTPOnPion(1350), IwarpSCTPOnPion(8000)}
}

// ByName returns the transports named, in that order.
func ByName(names []string) ([]Transport, error) {
	all := append(All(), Extra()...)
	var out []Transport
	for _, n := range names {
		i := slices.IndexFunc(all, func(t Transport) bool { return t.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("llp: no transport %q", n)
		}
		out = append(out, all[i])
	}
	return out, nil
}
