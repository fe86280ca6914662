//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pion/dtls/v3"
	"github.com/pion/dtls/v3/pkg/protocol/alert"
	"github.com/pion/sctp"

	"github.com/iwarpgo/iwarp/internal/netpeer"
)

// listenConfig returns a net.ListenConfig that sizes the UDP socket's
// buffers.
func (s *settings) listenConfig() net.ListenConfig {
	var lc net.ListenConfig
	if s.UDPBufferSize > 0 {
		lc.Control = setSocketBuffers(s.UDPBufferSize)
	}
	return lc
}

// Dial opens a DTLS connection over a connected UDP socket to addr
// ("host:port"), then an SCTP association over it. ctx bounds the whole
// set-up, and so does Config.HandshakeTimeout (10 s by default); once Dial
// has returned, cancelling ctx does nothing. Its failures:
//
//   - nothing listens at addr: the kernel's ICMP port unreachable ends the
//     handshake at once; a handshake that times out with nothing received
//     ends the same way: ErrUnreachable;
//   - the peer refused this end's key or certificate with an alert (a
//     wrong pre-shared key: ErrPSKMismatch; an unknown identity:
//     ErrPSKIdentity; an unpinned certificate: ErrPeerRefusedCertificate),
//     or this end refused the peer's (ErrFingerprintMismatch), or the
//     handshake did not complete: ErrHandshake;
//   - ctx cancelled: an error wrapping context.Canceled;
//   - a Config that cannot work: its own error (ErrNoPeerAuthentication
//     and the like), before any packet is sent.
func Dial(ctx context.Context, network, addr string, cfg *Config) (*Association, error) {
	s, err := cfg.check(false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.HandshakeTimeout)
	defer cancel()
	raddr, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, err
	}
	if s.auth == authPlainUDP {
		return s.dialPlain(ctx, network, addr, raddr)
	}
	pc, err := s.dialUDP(ctx, network, raddr)
	if err != nil {
		return nil, err
	}
	if err := pc.batchConn(); err != nil {
		_ = pc.Close()
		return nil, err
	}
	var authErr authFailure
	_, opts := s.dtlsOptions(false, &authErr)
	conn, err := dtls.ClientWithOptions(pc, raddr, opts...)
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		_ = pc.Close()
		if a := authErr.get(); a != nil {
			return nil, fmt.Errorf("%w: %s refused: %w", ErrHandshake, addr, a)
		}
		if pc.refused.Load() {
			return nil, fmt.Errorf("%w: nothing listens at %s (ICMP port unreachable): start the listener, or check the port: %w", ErrUnreachable, addr, syscall.ECONNREFUSED)
		}
		if e := refusedByAlert(s, addr, err); e != nil {
			return nil, e
		}
		if cerr := ctx.Err(); errors.Is(cerr, context.Canceled) {
			return nil, fmt.Errorf("sctpddp: dialing %s: %w", addr, cerr) // the caller's: said as such
		}
		if !pc.answered.Load() {
			return nil, fmt.Errorf("%w from %s within %v: nothing listens there, or the path drops UDP: %w", ErrUnreachable, addr, s.HandshakeTimeout.Round(time.Millisecond), err)
		}
		return nil, handshakeError(s, addr, err)
	}
	pc.established.Store(true)
	if err := s.checkPeer(conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	a, err := newAssociation(withBatcher(ctx, pc.bc), s, conn, false, nil)
	if err != nil {
		_ = conn.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, sctp.ErrAssociationClosedBeforeConn) {
			// The server closed the DTLS connection right after its
			// handshake: that is how a Listener refuses an association.
			return nil, fmt.Errorf("sctpddp: %s closed the connection before the SCTP handshake (at its association limit for this address?): %w", addr, err)
		}
		return nil, err
	}
	return a, nil
}

// check validates cfg for a Listener or a Dial; its errors wrap ErrConfig.
func (c *Config) check(listening bool) (*settings, error) {
	s, err := c.settings()
	switch {
	case err != nil:
	case listening && s.auth == authPlainUDP && c.PionSCTP:
		err = ErrPlainUDPPionListener
	case listening && s.auth != authPSK && s.auth != authPlainUDP && (c.Certificate == nil || len(c.Certificate.Certificate) == 0):
		err = ErrNoCertificate
	case !listening && s.auth == authAnyClient:
		err = ErrAcceptAnyClientDial
	}
	if err != nil {
		return nil, configError{err}
	}
	return s, nil
}

// configError is a Config's validation error: it wraps ErrConfig beside
// the error itself, and reads as the latter.
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{ErrConfig, e.err} }

// handshakeError names the likely cause of a failed DTLS handshake.
func handshakeError(s *settings, addr string, err error) error {
	var hint string
	switch s.auth {
	case authPSK:
		hint = " (wrong pre-shared key or identity?)"
	case authFingerprint:
		hint = " (did the peer pin our fingerprint?)"
	case authCA:
		hint = " (certificate not trusted by the peer or by CAs?)"
	}
	return fmt.Errorf("%w: %s answered, but the handshake did not complete%s: %w", ErrHandshake, addr, hint, err)
}

// dialUDP opens the connected UDP socket of a Dial to raddr.
func (s *settings) dialUDP(ctx context.Context, network string, raddr *net.UDPAddr) (*dialConn, error) {
	c, err := s.connectUDP(ctx, network, raddr)
	if err != nil {
		return nil, err
	}
	return &dialConn{UDPConn: c, raddr: raddr}, nil
}

// connectUDP opens a UDP socket connected to raddr, from Config's local
// address if it names one, with the socket options of listenConfig.
func (s *settings) connectUDP(ctx context.Context, network string, raddr *net.UDPAddr) (*net.UDPConn, error) {
	d := net.Dialer{Control: s.listenConfig().Control}
	if s.localAddr != "" {
		la, err := net.ResolveUDPAddr(network, s.localAddr)
		if err != nil {
			return nil, err
		}
		d.LocalAddr = la
	}
	c, err := d.DialContext(ctx, network, raddr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// checkPeer re-checks a finished handshake's peer certificate, so that a
// pinned fingerprint holds whatever path pion's handshake took.
func (s *settings) checkPeer(conn *dtls.Conn) error {
	if s.auth != authFingerprint {
		return nil
	}
	st, ok := conn.ConnectionState()
	if !ok {
		return errors.New("sctpddp: DTLS connection has no state after the handshake")
	}
	return s.verifyPinned(st.PeerCertificates)
}

// Listener accepts DTLS/SCTP associations on one UDP socket. Handshakes run
// concurrently in the background, each bounded by Config.HandshakeTimeout; a
// peer that fails authentication is dropped and never returned by Accept.
//
// What peers can make a Listener hold is bounded (see Config and
// docs/security.md): DTLS handshakes at once, in all and per peer IP address,
// with no state for a datagram from an unknown address that is not a
// ClientHello, and room made for a peer holding fewer by evicting a handshake
// of the peer holding the most, first those whose peer has not answered the
// cookie exchange (udpMux); associations, in all and per peer (IPv4
// address or IPv6 /64), until they end; the time an association waits for
// Accept.
type Listener struct {
	s        *settings
	mux      *udpMux
	plain    *plainListener // under InsecurePlainUDP: the stateless handshake
	opts     []dtls.ServerOption
	peers    *peerCounter // associations
	assocs   liveAssocs   // the same, to evict an idle one at MaxAssociations
	sessions *peerCounter // sessions of all its associations

	ready  chan *Association
	ctx    context.Context // cancelled by Close: aborts handshakes
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup // the handshakes
}

// Listen opens a UDP socket on addr and accepts DTLS/SCTP associations on
// it. ctx bounds only the socket's creation; close the Listener to stop.
func Listen(ctx context.Context, network, addr string, cfg *Config) (*Listener, error) {
	s, err := cfg.check(true)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	laddr, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, err
	}
	opts, _ := s.dtlsOptions(true, nil)
	l := &Listener{
		s:        s,
		opts:     opts,
		peers:    newPeerCounter(s.MaxAssociationsPerPeer, s.MaxAssociations, ErrTooManyAssociations),
		sessions: newPeerCounter(s.MaxPeerSessions, s.MaxListenerSessions, ErrTooManySessions),
		ready:    make(chan *Association),
	}
	l.assocs.byPeer = make(map[netip.Addr][]liveAssoc)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if s.auth == authPlainUDP {
		err = l.listenPlain(network, laddr)
	} else {
		// onNew runs under the mux's lock, which close takes too: no
		// handshake starts once Close has begun waiting for them.
		l.mux, err = listenMux(network, laddr, s, func(c *muxConn) {
			l.wg.Add(1)
			go l.handshake(c)
		})
	}
	if err != nil {
		l.cancel()
		return nil, err
	}
	return l, nil
}

// handshake runs the DTLS and SCTP handshakes of a new peer address and
// hands the association to Accept.
func (l *Listener) handshake(c *muxConn) {
	defer l.wg.Done()
	select {
	case <-c.done:
		_ = c.Close() // evicted before it started
		return
	default:
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.s.HandshakeTimeout)
	defer cancel()
	opts := l.opts[:len(l.opts):len(l.opts)]
	authErr := new(authFailure)
	if l.s.auth == authFingerprint {
		// This connection's own check, so that Refused can say which
		// certificate the peer presented.
		opts = append(opts, dtls.WithVerifyPeerCertificate(func(raw [][]byte, _ [][]*x509.Certificate) error {
			err := l.s.verifyPinned(raw)
			authErr.set(err)
			return err
		}))
	}
	var wrongKey, handshook atomic.Bool
	if l.s.auth == authPSK {
		// This connection's own key callback, so that Refused can name
		// an identity it does not know.
		opts = append(opts, dtls.WithPSK(func(id []byte) ([]byte, error) {
			if !bytes.Equal(id, l.s.PSKIdentity) {
				err := fmt.Errorf("%w %q", ErrPSKIdentity, id)
				authErr.set(err)
				return nil, err
			}
			return l.s.PSK, nil
		}))
		// A client's Finished that does not decrypt was sent under
		// another key: refuse it with a fatal bad_record_mac, as RFC
		// 6347 §4.1.2.7 lets an implementation that alerts on an
		// invalid MAC, so that the client fails now rather than at its
		// handshake timeout. A record that fails for another reason (a
		// late one of an earlier connection from the same port, one
		// damaged on the way) is followed by the real Finished, which
		// completes the handshake: the alert waits wrongKeyGrace for
		// that, and only during the handshake.
		opts = append(opts, dtls.WithLoggerFactory(decryptWatchFactory{base: l.s.loggerFactory(), onFail: func() {
			if handshook.Load() || !wrongKey.CompareAndSwap(false, true) {
				return
			}
			time.AfterFunc(wrongKeyGrace, func() {
				if handshook.Load() || ctx.Err() != nil {
					wrongKey.Store(false)
					return
				}
				_, _ = c.WriteTo(alertRecord(alert.Fatal, alert.BadRecordMac, alertSeq), c.RemoteAddr())
				cancel()
			})
		}}))
	}
	conn, err := dtls.ServerWithOptions(c, c.RemoteAddr(), opts...)
	if err != nil {
		_ = c.Close()
		return
	}
	err = conn.HandshakeContext(ctx)
	handshook.Store(err == nil)
	if err != nil {
		_ = conn.Close()
		if wrongKey.Load() && l.ctx.Err() == nil {
			l.s.refused(c.RemoteAddr(), fmt.Errorf("%w: %w: the Finished of %s did not decrypt with the key of identity %q: the client holds another key",
				ErrHandshake, ErrPSKMismatch, c.RemoteAddr(), l.s.PSKIdentity))
			return
		}
		if c.progressed.Load() && l.ctx.Err() == nil {
			// The peer answered the cookie exchange (the address is
			// its own): say why it did not get in.
			switch a, e := authErr.get(), refusedByAlert(l.s, c.RemoteAddr().String(), err); {
			case c.evictedOut.Load():
				l.s.refused(c.RemoteAddr(), errEvicted)
			case a != nil:
				l.s.refused(c.RemoteAddr(), fmt.Errorf("%w: %s refused: %w", ErrHandshake, c.RemoteAddr(), a))
			case e != nil:
				l.s.refused(c.RemoteAddr(), e)
			default:
				l.s.refused(c.RemoteAddr(), fmt.Errorf("%w (a wrong pre-shared key or identity, or an untrusted certificate?): %w", ErrHandshake, err))
			}
		}
		return
	}
	if err := l.s.checkPeer(conn); err != nil {
		_ = conn.Close()
		return
	}
	ip := netpeer.Of(c.raddr.Addr())
	if err := l.peers.take(ip); err != nil && (!l.evictIdle(ip) || l.peers.take(ip) != nil) {
		l.s.refused(c.RemoteAddr(), err)
		refuse(ctx, conn)
		return
	}
	if !c.m.established(c) {
		// Evicted as its handshake completed: its connection no
		// longer reads.
		l.peers.give(ip)
		_ = conn.Close()
		if l.ctx.Err() == nil {
			l.s.refused(c.RemoteAddr(), errEvicted)
		}
		return
	}
	slot := new(assocSlot)
	a, err := newAssociation(withBatcher(ctx, c.m.batcher()), l.s, conn, true, func() {
		l.assocs.forget(ip, slot)
		l.peers.give(ip)
	})
	if err != nil {
		l.peers.give(ip)
		_ = conn.Close()
		return
	}
	l.offer(ip, slot, a)
}

// offer hands a new association to Accept, within Config.AcceptTimeout.
func (l *Listener) offer(ip netip.Addr, slot *assocSlot, a *Association) {
	l.assocs.add(ip, slot, a)
	a.sessions = l.sessions
	t := time.NewTimer(l.s.AcceptTimeout)
	defer t.Stop()
	select {
	case l.ready <- a:
	case <-t.C:
		l.s.refused(a.RemoteAddr(), ErrAcceptTimeout)
		_ = a.closeWith(ErrAcceptTimeout)
	case <-a.Done(): // evicted, or its peer ended it
		_ = a.Close()
	case <-l.ctx.Done():
		_ = a.Close()
	}
}

// errEvicted is what Config.Refused hears of a handshake evicted after its
// peer answered the cookie exchange.
var errEvicted = fmt.Errorf("%w: evicted to make room for a peer holding fewer", ErrTooManyHandshakes)

// refuseWait bounds how long a refused peer's connection is kept open for
// its handshake to end.
const refuseWait = time.Second

// refuse closes a DTLS connection whose handshake has just completed here,
// once the peer has completed it too: its first record (the SCTP INIT)
// shows that, or refuseWait, or the end of ctx. Closed earlier, the peer
// could take the close_notify for a failed handshake rather than a
// refusal. The connection still counts among the Listener's handshakes
// meanwhile.
func refuse(ctx context.Context, conn *dtls.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(refuseWait))
	defer context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })()
	var b [1]byte
	_, _ = conn.Read(b[:])
	_ = conn.Close()
}

// Accept returns the next association whose handshakes have completed.
func (l *Listener) Accept(ctx context.Context) (*Association, error) {
	select {
	case a := <-l.ready:
		return a, nil
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Addr returns the UDP address the Listener is bound to.
func (l *Listener) Addr() net.Addr { return l.mux.conn.LocalAddr() }

// Close stops accepting, aborts handshakes in progress and waits for the
// Listener's goroutines. Associations already returned by Accept stay
// open; the UDP socket closes when the last of them does.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.cancel()
		err = l.mux.close()
		l.wg.Wait()
	})
	return err
}
