//go:build !js

package sctpddp

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/pion/dtls/v3"
	"github.com/pion/logging"
)

// Defaults of Config. They are tuned for throughput on a 1500-byte path;
// see the package benchmarks (BenchmarkThroughput, BenchmarkRDMAWrite).
const (
	// DefaultMTU is the SCTP packet size handed to DTLS. A 1500-byte path
	// leaves 1500 - 40 (IPv6) - 8 (UDP) = 1452 bytes for a DTLS record,
	// whose overhead is at most 77 bytes with pion's cipher suites (13
	// header + 16 IV + 32 MAC + 16 padding for AES-CBC-SHA256; 37 for
	// AES-GCM), so 1375; 1350 leaves room for tunnels and IP options.
	DefaultMTU = 1350
	// LoopbackMTU suits loopback and jumbo-frame paths: below pion/dtls's
	// 8192-byte datagram read buffer with room for the record overhead.
	LoopbackMTU = 8000
	// MaxMTU is the largest MTU accepted: 8192 - 77 rounded down to 4.
	MaxMTU = 8112

	// DefaultUDPBufferSize is the socket receive and send buffer. The
	// Linux default (208 KiB) drops datagrams at a few hundred MB/s.
	DefaultUDPBufferSize = 4 << 20
	// DefaultMaxReceiveBufferSize is the SCTP receive window.
	DefaultMaxReceiveBufferSize = 1 << 20
	// DefaultMaxWindow bounds the auto-tuned windows of an association
	// (Config.MaxWindow): 8 MiB each way, 40 MB/s over a 200 ms round
	// trip, and 1 GiB for a Listener's DefaultMaxAssociations at most.
	DefaultMaxWindow = 8 << 20
	// DefaultMaxMessageSize is the largest SCTP message.
	DefaultMaxMessageSize = 64 << 10
	// DefaultSendQueueLimit is the per-stream cap on bytes queued or in
	// flight, well below the peer's receive window so that the receiver
	// never has to drop DATA.
	DefaultSendQueueLimit = 256 << 10
	// DefaultHandshakeTimeout bounds a Listener's DTLS and SCTP handshake.
	DefaultHandshakeTimeout = 10 * time.Second
)

// Config configures Listen and Dial. Exactly one way to authenticate the
// peer must be chosen: PeerFingerprints, CAs, PSK, on a Listener
// AcceptAnyClient, or, explicitly and only for tests,
// InsecureSkipPeerVerification; or InsecurePlainUDP, which replaces DTLS
// and so authenticates nothing. A Config with none of them (or with two) is
// rejected before any packet is sent (ErrConfig); peer verification is
// never skipped silently.
type Config struct {
	// Certificate is this endpoint's certificate, for the certificate
	// modes (PeerFingerprints, CAs, AcceptAnyClient,
	// InsecureSkipPeerVerification): a Listener needs one, a Dial only
	// when the server asks for it (the server's PeerFingerprints or CAs).
	// Make a self-signed one with GenerateCertificate.
	Certificate *tls.Certificate

	// PeerFingerprints pins the peer's certificate: the handshake succeeds
	// only if the SHA-256 of the peer's leaf certificate is one of these,
	// as in WebRTC. Both sides present a certificate.
	PeerFingerprints []Fingerprint

	// CAs verifies the peer's certificate chain, both ways: the client
	// checks the server against CAs and ServerName, the server requires a
	// client certificate that chains to CAs.
	CAs *x509.CertPool
	// ServerName is the name the client expects in the server's
	// certificate (CAs mode only).
	ServerName string

	// PSK is a pre-shared key; PSKIdentity names it. The client sends
	// PSKIdentity and the server accepts only that identity.
	PSK         []byte
	PSKIdentity []byte

	// AcceptAnyClient, on a Listener, authenticates the server only, as a
	// TLS server without client certificates does: the Listener presents
	// Certificate and asks clients for none, and clients verify it by
	// PeerFingerprints (the fingerprint the server prints) or CAs. The
	// application authenticates its clients itself if it must. Dial
	// refuses it: a client always verifies its server.
	AcceptAnyClient bool

	// InsecureSkipPeerVerification accepts any peer: no fingerprint, no
	// CA, no PSK. The traffic is encrypted but the peer is unknown. For
	// tests only.
	InsecureSkipPeerVerification bool

	// InsecurePlainUDP runs SCTP straight over UDP (RFC 6951's
	// encapsulation) instead of over DTLS: no DTLS, so neither
	// authentication nor encryption; any host on the path can read,
	// inject and forge the traffic, and tear the association down. It is
	// for interoperating with the Linux kernel's SCTP and usrsctp, in labs
	// and tests. It replaces the other ways to authenticate (setting it
	// with one of them is an ErrConfig error) and needs no Certificate.
	// The SCTP checksum is then always the CRC32c (RFC 9260 §6.8; RFC
	// 9653's zero checksum is for DTLS only). RFC 6951's registered port
	// is 9899 (SCTPTunnelingPort). A Listener keeps nothing for a peer
	// before its COOKIE ECHO (see docs/security.md); PionSCTP applies to
	// Dial only, since pion/sctp's server keeps state from the INIT on.
	InsecurePlainUDP bool

	// MTU is the SCTP MTU (DefaultMTU if 0, at most MaxMTU, at least
	// MinMTU). Use LoopbackMTU on loopback.
	MTU uint32
	// UDPBufferSize sets SO_RCVBUF and SO_SNDBUF (DefaultUDPBufferSize if
	// 0; negative leaves the OS default).
	UDPBufferSize int
	// MaxReceiveBufferSize is the SCTP receive window
	// (DefaultMaxReceiveBufferSize if 0): the one package sctp's
	// association starts from (MaxWindow), pion/sctp's throughout.
	MaxReceiveBufferSize uint32
	// MaxMessageSize is the largest SCTP message sent or received
	// (DefaultMaxMessageSize if 0, at least MULPDU + 2).
	MaxMessageSize uint32
	// SendQueueLimit caps the bytes each Stream has queued or in flight
	// (DefaultSendQueueLimit if 0). Writes block while the cap is reached.
	// It is raised to 2 * MaxMessageSize and lowered to keep RFC 5043 §10's
	// limit of 32767 unacknowledged chunks per stream.
	SendQueueLimit int
	// HandshakeTimeout bounds each handshake a Listener runs
	// (DefaultHandshakeTimeout if 0).
	HandshakeTimeout time.Duration

	// Limits on what remote peers can make a Listener hold (see
	// docs/security.md). A limit of 0 takes its default.
	//
	// MaxHandshakes bounds the DTLS handshakes a Listener runs at once
	// (DefaultMaxHandshakes), MaxHandshakesPerPeer those of one peer, an
	// IPv4 address or an IPv6 /64 (DefaultMaxHandshakesPerPeer). A
	// handshake is counted from the first datagram of a new address that
	// is a DTLS ClientHello (anything else from an unknown address is
	// dropped and costs nothing) until it ends. It has answered once its
	// peer has echoed the cookie of the HelloVerifyRequest (the DTLS
	// cookie exchange, which a spoofed source address cannot complete).
	// At MaxHandshakesPerPeer, a new ClientHello of the peer evicts
	// (closes) the peer's oldest unanswered handshake, or is dropped if
	// all have answered. At MaxHandshakes, a ClientHello of a peer holding
	// fewer handshakes than the peer holding the most evicts one of the
	// latter's: the oldest unanswered, or if all have answered, the
	// oldest (Refused hears of it, ErrTooManyHandshakes); one of a peer
	// holding as many as any is dropped. A dropped client retransmits.
	// So a peer holds at most MaxHandshakesPerPeer handshakes, and keeps
	// them at MaxHandshakes only while no peer holding fewer asks for
	// one: MaxHandshakes / MaxHandshakesPerPeer addresses (8 by default)
	// that answer and then stall fill the Listener but keep nobody out.
	// A client whose peer holds no other handshake is admitted at once
	// (unless MaxHandshakes evicted handshakes are still winding down),
	// and its handshake is evicted only if every handshake in progress
	// is its peer's only one (MaxHandshakes distinct peers, spoofed or
	// not), the oldest unanswered first.
	MaxHandshakes        int
	MaxHandshakesPerPeer int
	// MaxAssociations bounds a Listener's associations
	// (DefaultMaxAssociations), MaxAssociationsPerPeer those of one peer, an
	// IPv4 address or an IPv6 /64 (DefaultMaxAssociationsPerPeer), from the
	// end of the DTLS handshake until the association ends. At
	// MaxAssociations a new peer's association takes the place of the
	// oldest idle one (no DDP Stream Session or request, no stream the
	// application uses itself) of the peer holding the most, if that peer
	// holds two more than the new one's (ErrAssociationEvicted), so that
	// MaxAssociations / MaxAssociationsPerPeer addresses holding idle
	// associations cannot keep every other peer out. A peer beyond them
	// otherwise is refused (ErrTooManyAssociations): its DTLS connection is
	// closed before the SCTP handshake.
	MaxAssociations        int
	MaxAssociationsPerPeer int
	// AcceptTimeout is how long an association waits for Listener.Accept,
	// and a DDP Stream Session request for SessionAcceptor.Accept, before
	// it is closed or answered with a Terminate (ErrAcceptTimeout;
	// DefaultAcceptTimeout).
	AcceptTimeout time.Duration
	// MaxSessions bounds the DDP Stream Sessions a SessionAcceptor holds on
	// one association (DefaultMaxSessions): requests waiting for or under the
	// ULP's decision, and sessions accepted and not yet closed.
	// MaxPeerSessions bounds them over a Listener's associations of one peer
	// (IPv4 address or IPv6 /64) (DefaultMaxPeerSessions), MaxListenerSessions
	// over all of them (DefaultMaxListenerSessions). An Initiate beyond a
	// limit is answered with a DDP Stream Session Terminate
	// (ErrTooManySessions). MaxPendingSessions is the limit on requests
	// pending a decision that Association.Sessions(0) uses
	// (DefaultPendingSessions).
	MaxSessions         int
	MaxPeerSessions     int
	MaxListenerSessions int
	MaxPendingSessions  int
	// MaxStreams bounds the SCTP streams the peer starts on one
	// association over its life, each the first message on a new Stream
	// Identifier (DefaultMaxStreams): pion/sctp keeps each until the peer
	// resets it. A peer that starts more has its association closed
	// (ErrTooManyStreams). Each DDP Stream Session the peer starts takes
	// a stream of its own (stream ids are not reused, RFC 5043 §6.6), so
	// this also bounds the sessions it starts over the association's
	// life. Applies to Dial's associations too.
	MaxStreams int
	// MaxRetiredStreams bounds the retired DDP streams of one association
	// that are still read (DefaultMaxRetiredStreams; either end's
	// sessions count). A stream is retired when its session, or the
	// session request on it, ends; "A DDP Stream Identifier MUST NOT be
	// reused for another DDP Stream Session while any Data Chunk from a
	// prior session might be outstanding." (RFC 5043 §6.6), so a reader
	// (a goroutine, pion's read-deadline timer and a buffer, about 8-10
	// KiB) discards the late
	// chunks of the ended session and answers a new Initiate there with a
	// Terminate, until nothing has come on the stream for
	// RetiredStreamTimeout. At the limit the reader of the stream quiet
	// longest stops early, so that a peer may run sessions one after the
	// other as fast as it likes; what a peer still sends on a stream
	// nobody reads stays in pion's receive buffer and counts against that
	// association's receive window only.
	MaxRetiredStreams int
	// RetiredStreamTimeout is how long a retired stream is read after the
	// last message on it (2 * HeartbeatInterval if 0, which is 10 s by
	// default, or DefaultRetiredStreamTimeout without heartbeats;
	// negative: until the association ends, MaxRetiredStreams still
	// applying). A live peer is heard at least every HeartbeatInterval,
	// and a Data Chunk it sent before the session ended has been
	// retransmitted several times over by then (every retransmission
	// timeout, from 1 s, doubling), so none is outstanding any more
	// (§6.6) unless the path drops them all. A chunk that comes after
	// the reader has stopped is kept by pion/sctp unread, counted against
	// the association's receive window (MaxReceiveBufferSize).
	RetiredStreamTimeout time.Duration
	// DeadPeerTimeout closes an association that has received nothing from
	// its peer for this long (ErrPeerDead; DefaultDeadPeerTimeout;
	// negative: never). An association that has sent nothing for
	// HeartbeatInterval sends an SCTP HEARTBEAT (DeadPeerTimeout/6 if 0,
	// at most DeadPeerTimeout/2; DefaultDeadPeerTimeout/6 when
	// DeadPeerTimeout is negative; negative: never), so that its peer
	// hears from it however idle it is: a healthy association, idle or
	// not, stays open. Both apply to Dial's associations as well as a
	// Listener's; the two ends should use the same HeartbeatInterval, or
	// one below the other's DeadPeerTimeout.
	DeadPeerTimeout   time.Duration
	HeartbeatInterval time.Duration
	// LingerTimeout is how long an association whose DDP Stream
	// Sessions have all ended (each closed, or ended by an error and then
	// closed) waits for another session before this end shuts it down
	// (ErrSessionsEnded; DefaultLingerTimeout): "For a specific LLP
	// connection, when all Streams are either gracefully torn down or are
	// labeled as erroneous Streams, the LLP connection MUST be torn down."
	// (RFC 5040 §7) An association that has carried no session yet is
	// its owner's to close. Negative: never, which departs from the RFC,
	// for a program that keeps an association for sessions to come.
	LingerTimeout time.Duration
	// Refused, if set, hears of each association or DDP Stream Session
	// refused or closed by these limits and why: ErrTooManyAssociations,
	// ErrAssociationEvicted, ErrTooManySessions, ErrTooManyPendingSessions, ErrAcceptTimeout,
	// ErrTooManyStreams; and of each DTLS handshake whose peer answered
	// the cookie exchange but that was evicted to make room
	// (ErrTooManyHandshakes) or failed (ErrHandshake).
	// Handshakes dropped or evicted before the cookie exchange are not
	// reported: their source addresses may be spoofed. It must be quick
	// and safe for concurrent use.
	Refused func(remote net.Addr, why error)

	// MaxWindow bounds, per association, the windows that package sctp's
	// association tunes to the path: what may be queued or unacknowledged
	// each way (DefaultMaxWindow if 0). The receive window starts at
	// MaxReceiveBufferSize and doubles, up to MaxWindow, while the
	// application reads half of it within two round trips; the send
	// window is twice the congestion window, at least 256 KiB. Under
	// PionSCTP the windows are fixed: MaxReceiveBufferSize, and
	// SendQueueLimit per stream.
	MaxWindow uint32

	// PionSCTP runs the associations on pion/sctp instead of package
	// sctp, the default. Both ends must agree: package sctp refuses a peer
	// without DDP's Adaptation Layer Indication (RFC 5043 §11.1), which
	// pion/sctp does not send. For comparing the two, and as a fallback.
	PionSCTP bool

	// KeyLogWriter, if set, receives NSS key-log lines for Wireshark.
	KeyLogWriter io.Writer
	// LoggerFactory is passed to pion (pion's default if nil).
	LoggerFactory logging.LoggerFactory

	// Trace, if set, receives every SCTP packet of the association in
	// the clear, SCTP common header first: those this end sends
	// (outbound) before DTLS encrypts them, and those it receives after
	// DTLS decrypts them. One call is one packet; packet is valid only
	// during the call; peer is the association's remote UDP address,
	// which tells a Listener's associations apart. It is called from
	// the association's read and write loops, so it must be quick and
	// safe for concurrent use. For recording sessions as captures.
	Trace func(peer net.Addr, outbound bool, packet []byte)

	// connHook, for tests, wraps the DTLS connection that SCTP runs on,
	// to see the SCTP packets in the clear.
	connHook func(net.Conn) net.Conn
	// localAddr, for tests, is the UDP address Dial binds ("" for any).
	localAddr string
}

// Errors of Config validation and authentication. Every error of a
// Config's validation wraps ErrConfig too.
var (
	// ErrConfig: the Config cannot work; Dial and Listen refuse it
	// before any packet is sent.
	ErrConfig               = errors.New("sctpddp: bad configuration")
	ErrNoPeerAuthentication = errors.New("sctpddp: no peer authentication configured: set PeerFingerprints, CAs or PSK (a Listener: or AcceptAnyClient; for tests: InsecureSkipPeerVerification)")
	ErrTwoAuthentications   = errors.New("sctpddp: more than one peer authentication mode configured")
	// ErrPlainUDPWithAuth: InsecurePlainUDP has no DTLS, so no peer
	// authentication to combine it with.
	ErrPlainUDPWithAuth = errors.New("sctpddp: InsecurePlainUDP has no DTLS and so no peer authentication: set it alone, without PeerFingerprints, CAs, PSK, AcceptAnyClient or InsecureSkipPeerVerification")
	// ErrPlainUDPPionListener: a Listener over plain UDP answers INITs
	// statelessly with package sctp, which pion/sctp's server cannot.
	ErrPlainUDPPionListener = errors.New("sctpddp: a Listener with InsecurePlainUDP runs package sctp's association: PionSCTP applies to Dial only")
	ErrNoCertificate        = errors.New("sctpddp: a Listener in a certificate mode needs Config.Certificate")
	ErrNoPSKIdentity        = errors.New("sctpddp: PSK needs a PSKIdentity")
	// ErrAcceptAnyClientDial: AcceptAnyClient is a Listener's; a client
	// verifies its server (PeerFingerprints, CAs or PSK).
	ErrAcceptAnyClientDial = errors.New("sctpddp: AcceptAnyClient is for a Listener: a client verifies its server (PeerFingerprints, CAs or PSK)")
	ErrFingerprintMismatch = errors.New("sctpddp: peer certificate fingerprint does not match any pinned fingerprint")
	ErrPSKIdentity         = errors.New("sctpddp: unknown PSK identity")
	// ErrUnreachable: Dial's handshake timed out and nothing came back
	// from the address: nothing listens there, or the path drops UDP.
	ErrUnreachable = errors.New("sctpddp: no answer")
	// ErrHandshake: the peer answered but the DTLS handshake failed or
	// did not complete: a wrong pre-shared key or identity, an unpinned
	// certificate, or a refusal.
	ErrHandshake = errors.New("sctpddp: DTLS handshake failed")
)

type authMode int

const (
	authFingerprint authMode = iota + 1
	authCA
	authPSK
	authAnyClient
	authInsecure
	authPlainUDP // no DTLS: InsecurePlainUDP
)

// settings is a Config with defaults applied and checked.
type settings struct {
	Config
	auth           authMode
	mulpdu         int
	sendQueueLimit uint64
}

func (c *Config) settings() (*settings, error) {
	if c == nil {
		// There is no default authentication to fall back on.
		return nil, ErrNoPeerAuthentication
	}
	s := &settings{Config: *c}
	n := 0
	if len(c.PeerFingerprints) > 0 {
		n++
		s.auth = authFingerprint
	}
	if c.CAs != nil {
		n++
		s.auth = authCA
	}
	if c.PSK != nil {
		n++
		s.auth = authPSK
	}
	if c.AcceptAnyClient {
		n++
		s.auth = authAnyClient
	}
	if c.InsecureSkipPeerVerification {
		n++
		s.auth = authInsecure
	}
	if c.InsecurePlainUDP {
		if n > 0 {
			return nil, ErrPlainUDPWithAuth
		}
		n++
		s.auth = authPlainUDP
	}
	switch {
	case n == 0:
		return nil, ErrNoPeerAuthentication
	case n > 1:
		return nil, ErrTwoAuthentications
	}
	if s.auth == authPSK && len(c.PSKIdentity) == 0 {
		return nil, ErrNoPSKIdentity
	}
	if s.MTU == 0 {
		s.MTU = DefaultMTU
	}
	if s.MTU < wire.MinMTU || s.MTU > MaxMTU {
		return nil, fmt.Errorf("sctpddp: MTU %d outside [%d, %d]", s.MTU, wire.MinMTU, MaxMTU)
	}
	s.mulpdu = wire.MULPDUForMTU(s.MTU)
	if s.UDPBufferSize == 0 {
		s.UDPBufferSize = DefaultUDPBufferSize
	}
	if s.MaxReceiveBufferSize == 0 {
		s.MaxReceiveBufferSize = DefaultMaxReceiveBufferSize
	}
	if s.MaxMessageSize == 0 {
		s.MaxMessageSize = DefaultMaxMessageSize
	}
	if s.MaxWindow == 0 {
		s.MaxWindow = DefaultMaxWindow
	}
	s.MaxWindow = max(s.MaxWindow, s.MaxReceiveBufferSize)
	if int(s.MaxMessageSize) < s.mulpdu+wire.SSNLen {
		s.MaxMessageSize = uint32(s.mulpdu + wire.SSNLen)
	}
	limit := s.SendQueueLimit
	if limit <= 0 {
		limit = DefaultSendQueueLimit
	}
	limit = max(limit, 2*int(s.MaxMessageSize))
	limit = min(limit, MaxSendQueueLimit)
	s.sendQueueLimit = uint64(limit)
	if s.HandshakeTimeout <= 0 {
		s.HandshakeTimeout = DefaultHandshakeTimeout
	}
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&s.MaxHandshakes, DefaultMaxHandshakes},
		{&s.MaxHandshakesPerPeer, DefaultMaxHandshakesPerPeer},
		{&s.MaxAssociations, DefaultMaxAssociations},
		{&s.MaxAssociationsPerPeer, DefaultMaxAssociationsPerPeer},
		{&s.MaxSessions, DefaultMaxSessions},
		{&s.MaxPeerSessions, DefaultMaxPeerSessions},
		{&s.MaxListenerSessions, DefaultMaxListenerSessions},
		{&s.MaxPendingSessions, DefaultPendingSessions},
		{&s.MaxStreams, DefaultMaxStreams},
		{&s.MaxRetiredStreams, DefaultMaxRetiredStreams},
	} {
		if *f.v <= 0 {
			*f.v = f.def // 0 (or less) takes the default
		}
	}
	if s.AcceptTimeout <= 0 {
		s.AcceptTimeout = DefaultAcceptTimeout
	}
	if s.LingerTimeout == 0 {
		s.LingerTimeout = DefaultLingerTimeout
	}
	if s.DeadPeerTimeout == 0 {
		s.DeadPeerTimeout = DefaultDeadPeerTimeout
	}
	switch {
	case s.HeartbeatInterval < 0:
		s.HeartbeatInterval = 0 // none
	case s.DeadPeerTimeout < 0:
		if s.HeartbeatInterval == 0 {
			s.HeartbeatInterval = DefaultDeadPeerTimeout / deadPeerHeartbeats
		}
	default:
		if s.HeartbeatInterval == 0 {
			s.HeartbeatInterval = s.DeadPeerTimeout / deadPeerHeartbeats
		}
		s.HeartbeatInterval = min(s.HeartbeatInterval, s.DeadPeerTimeout/2)
	}
	switch {
	case s.RetiredStreamTimeout < 0:
		s.RetiredStreamTimeout = 0 // read until the association ends
	case s.RetiredStreamTimeout > 0:
	case s.HeartbeatInterval > 0:
		s.RetiredStreamTimeout = 2 * s.HeartbeatInterval
	default:
		s.RetiredStreamTimeout = DefaultRetiredStreamTimeout
	}
	return s, nil
}

// verifyPinned checks a peer's leaf certificate against the pins.
func (s *settings) verifyPinned(rawCerts [][]byte) error {
	if len(rawCerts) == 0 {
		return fmt.Errorf("%w: peer sent no certificate", ErrFingerprintMismatch)
	}
	got := FingerprintOf(rawCerts[0])
	for _, want := range s.PeerFingerprints {
		if got.Equal(want) {
			return nil
		}
	}
	return fmt.Errorf("%w: peer presented %s", ErrFingerprintMismatch, got)
}

// authFailure records why our own verification refused the peer, so that
// Dial can report it instead of pion's generic alert. pion calls the
// verification callbacks on its handshake goroutine.
type authFailure struct {
	mu  sync.Mutex
	err error
}

func (a *authFailure) set(err error) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
}

func (a *authFailure) get() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// dtlsOptions returns the pion/dtls options for a server or a client.
// authErr (nil on the server, where one option set serves every
// connection) receives the reason our verification refused the peer.
func (s *settings) dtlsOptions(server bool, authErr *authFailure) ([]dtls.ServerOption, []dtls.ClientOption) {
	var shared []dtls.Option
	var srv []dtls.ServerOption
	if s.Certificate != nil && s.auth != authPSK {
		shared = append(shared, dtls.WithCertificates(*s.Certificate))
	}
	switch s.auth {
	case authFingerprint:
		// Self-signed certificates: no chain to verify, the pin is the
		// check (and it runs on both sides).
		shared = append(shared,
			dtls.WithInsecureSkipVerify(true),
			dtls.WithVerifyPeerCertificate(func(raw [][]byte, _ [][]*x509.Certificate) error {
				err := s.verifyPinned(raw)
				if err != nil {
					authErr.set(err)
				}
				return err
			}))
		srv = append(srv, dtls.WithClientAuth(dtls.RequireAnyClientCert))
	case authCA:
		shared = append(shared, dtls.WithRootCAs(s.CAs), dtls.WithServerName(s.ServerName))
		srv = append(srv, dtls.WithClientCAs(s.CAs), dtls.WithClientAuth(dtls.RequireAndVerifyClientCert))
	case authPSK:
		id := s.PSKIdentity
		key := s.PSK
		// ECDHE-PSK first for forward secrecy; pion enables no PSK suite
		// by default.
		shared = append(shared, dtls.WithPSKIdentityHint(id), dtls.WithCipherSuites(
			dtls.TLS_ECDHE_PSK_WITH_AES_128_CBC_SHA256,
			dtls.TLS_PSK_WITH_AES_128_GCM_SHA256))
		if server {
			shared = append(shared, dtls.WithPSK(func(clientIdentity []byte) ([]byte, error) {
				if !bytes.Equal(clientIdentity, id) {
					err := fmt.Errorf("%w %q", ErrPSKIdentity, clientIdentity)
					authErr.set(err)
					return nil, err
				}
				return key, nil
			}))
		} else {
			shared = append(shared, dtls.WithPSK(func([]byte) ([]byte, error) { return key, nil }))
		}
	case authAnyClient:
		srv = append(srv, dtls.WithClientAuth(dtls.NoClientCert))
	case authInsecure:
		shared = append(shared, dtls.WithInsecureSkipVerify(true))
		srv = append(srv, dtls.WithClientAuth(dtls.RequestClientCert))
	}
	shared = append(shared, dtls.WithExtendedMasterSecret(dtls.RequireExtendedMasterSecret))
	if s.KeyLogWriter != nil {
		shared = append(shared, dtls.WithKeyLogWriter(s.KeyLogWriter))
	}
	if s.LoggerFactory != nil {
		shared = append(shared, dtls.WithLoggerFactory(s.LoggerFactory))
	}
	if server {
		out := make([]dtls.ServerOption, 0, len(shared)+len(srv))
		for _, o := range shared {
			out = append(out, o)
		}
		return append(out, srv...), nil
	}
	out := make([]dtls.ClientOption, 0, len(shared))
	for _, o := range shared {
		out = append(out, o)
	}
	return nil, out
}
