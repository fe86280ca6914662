//go:build !js

package sctpddp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pion/dtls/v3/pkg/protocol/alert"
	"github.com/pion/logging"

	"github.com/iwarpgo/iwarp/sctpddp/batchconn"
)

// Why a DTLS handshake failed, named so that each side can say what to fix.
var (
	// ErrPSKMismatch: the peers hold different pre-shared keys under the
	// same identity. The server finds out when the client's Finished does
	// not decrypt, and says so with a bad_record_mac alert.
	ErrPSKMismatch = errors.New("sctpddp: the peers' pre-shared keys differ")
	// ErrPeerRefusedCertificate: the peer's verification refused this
	// end's certificate (a bad_certificate or similar alert): the peer
	// does not pin its fingerprint, or it does not chain to the peer's CAs.
	ErrPeerRefusedCertificate = errors.New("sctpddp: the peer refused this end's certificate")
)

// dialConn is the connected UDP socket of a Dial, as the net.PacketConn
// pion/dtls takes. Connected, the socket hears the kernel's ICMP port
// unreachable as ECONNREFUSED, so that a Dial to a port where nothing
// listens fails at once. Once the handshake has completed, an
// ECONNREFUSED is a lost datagram: ICMP is not authenticated, and the
// association's own timers decide whether the peer is gone. Beneath
// pion/dtls its datagrams go through bc (batchConn), which batches them
// (batching.go).
type dialConn struct {
	*net.UDPConn
	bc          *batchconn.Conn
	raddr       *net.UDPAddr
	answered    atomic.Bool // a datagram came back
	refused     atomic.Bool // the kernel reported ECONNREFUSED during the handshake
	established atomic.Bool
}

// batchConn makes the batchconn.Conn that ReadFrom and WriteTo use.
func (c *dialConn) batchConn() error {
	bc, err := batchconn.New(c.UDPConn, nil)
	c.bc = bc
	return err
}

// Close closes the socket, through bc when there is one, so that its
// buffers go too.
func (c *dialConn) Close() error {
	if c.bc != nil {
		return c.bc.Close()
	}
	return c.UDPConn.Close()
}

// SetDeadline and SetReadDeadline go through bc when there is one, which
// holds the datagrams of a batch not yet read to the deadline too.
func (c *dialConn) SetDeadline(t time.Time) error {
	if c.bc != nil {
		return c.bc.SetDeadline(t)
	}
	return c.UDPConn.SetDeadline(t)
}

func (c *dialConn) SetReadDeadline(t time.Time) error {
	if c.bc != nil {
		return c.bc.SetReadDeadline(t)
	}
	return c.UDPConn.SetReadDeadline(t)
}

func (c *dialConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, _, err := c.bc.ReadFrom(p)
		if n > 0 {
			c.answered.Store(true)
		}
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			if c.established.Load() {
				continue
			}
			c.refused.Store(true)
		}
		return n, c.raddr, err
	}
}

func (c *dialConn) WriteTo(p []byte, _ net.Addr) (int, error) {
	n, err := c.bc.WriteTo(p, nil)
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		if c.established.Load() {
			return len(p), nil
		}
		c.refused.Store(true)
	}
	return n, err
}

// alertRecord is a DTLS 1.2 record carrying one alert in epoch 0 (RFC 6347
// §4.1): ContentType alert (21), version {254, 253}, epoch 0, a 48-bit
// sequence number, length 2, then the level and the description. seq is
// chosen above any this end has used in epoch 0, so that the peer's replay
// check takes it.
func alertRecord(level alert.Level, desc alert.Description, seq uint64) []byte {
	b := make([]byte, 13+2)
	b[0] = 21
	b[1], b[2] = 254, 253
	binary.BigEndian.PutUint64(b[3:11], seq&(1<<48-1)) // epoch 0 in b[3:5]
	binary.BigEndian.PutUint16(b[11:13], 2)
	b[13], b[14] = byte(level), byte(desc)
	return b
}

// wrongKeyGrace is how long a Listener waits, after a record of a
// handshake did not decrypt, for the handshake to complete before it
// answers with a bad_record_mac alert: a client holding the right key
// sends its Finished at once, and one holding another hears the alert
// well within a second.
const wrongKeyGrace = 250 * time.Millisecond

// alertSeq is the epoch-0 sequence number of the alerts sent beside
// pion/dtls: far above the handful of records a handshake sends.
const alertSeq = 1 << 40

// decryptWatch passes pion/dtls's log through and tells onFail of a record
// that did not decrypt. During a handshake in PSK mode that record is the
// client's Finished, encrypted under a key derived from a different PSK:
// pion discards it silently, as RFC 6347 §4.1.2.7 allows, and the client
// would wait out its handshake timeout.
type decryptWatch struct {
	logging.LeveledLogger
	onFail func()
}

func (w decryptWatch) Debugf(format string, args ...any) {
	if strings.Contains(format, "decrypt failed") {
		w.onFail()
	}
	w.LeveledLogger.Debugf(format, args...)
}

type decryptWatchFactory struct {
	base   logging.LoggerFactory
	onFail func()
}

func (f decryptWatchFactory) NewLogger(scope string) logging.LeveledLogger {
	return decryptWatch{LeveledLogger: f.base.NewLogger(scope), onFail: f.onFail}
}

// loggerFactory is the configured LoggerFactory or pion's default.
func (s *settings) loggerFactory() logging.LoggerFactory {
	if s.LoggerFactory != nil {
		return s.LoggerFactory
	}
	return logging.NewDefaultLoggerFactory()
}

// peerAlert returns the alert the peer sent if err is one.
func peerAlert(err error) (alert.Description, bool) {
	var a interface {
		IsFatalOrCloseNotify() bool
		String() string
	}
	if !errors.As(err, &a) || !a.IsFatalOrCloseNotify() {
		return 0, false
	}
	for _, d := range []alert.Description{alert.BadRecordMac, alert.DecryptError, alert.BadCertificate,
		alert.UnsupportedCertificate, alert.CertificateUnknown, alert.UnknownCA, alert.AccessDenied,
		alert.InternalError, alert.HandshakeFailure, alert.CloseNotify} {
		if a.String() == (&alert.Alert{Level: alert.Fatal, Description: d}).String() ||
			a.String() == (&alert.Alert{Level: alert.Warning, Description: d}).String() {
			return d, true
		}
	}
	return 0, false
}

// refusedByAlert names what a peer's alert refused, or returns nil when
// err is no alert.
func refusedByAlert(s *settings, addr string, err error) error {
	d, ok := peerAlert(err)
	if !ok {
		return nil
	}
	switch {
	case s.auth == authPSK && (d == alert.BadRecordMac || d == alert.DecryptError):
		return fmt.Errorf("%w: %w: %s could not decrypt our Finished (DTLS alert %v): the key of identity %q differs from its own; give both ends the same key",
			ErrHandshake, ErrPSKMismatch, addr, d, s.PSKIdentity)
	case s.auth == authPSK && d == alert.InternalError:
		// pion/dtls answers an identity its PSK callback refuses so.
		return fmt.Errorf("%w: %w: %s refused identity %q (DTLS alert %v): give both ends the same PSKIdentity",
			ErrHandshake, ErrPSKIdentity, addr, s.PSKIdentity, d)
	case d == alert.BadCertificate || d == alert.UnsupportedCertificate || d == alert.CertificateUnknown || d == alert.UnknownCA || d == alert.AccessDenied:
		fp := ""
		if s.Certificate != nil && len(s.Certificate.Certificate) > 0 {
			fp = " " + FingerprintOf(s.Certificate.Certificate[0]).String()
		}
		return fmt.Errorf("%w: %w: %s refused our certificate%s (DTLS alert %v): it pins another fingerprint or trusts other CAs",
			ErrHandshake, ErrPeerRefusedCertificate, addr, fp, d)
	}
	return fmt.Errorf("%w: %s refused the handshake (DTLS alert %v): %w", ErrHandshake, addr, d, err)
}
