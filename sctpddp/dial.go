//go:build !js

package sctpddp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/pion/dtls/v3"
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

// Dial opens a DTLS connection over UDP to addr ("host:port"), then an
// SCTP association over it. ctx bounds the whole set-up; once Dial has
// returned, cancelling ctx does nothing.
func Dial(ctx context.Context, network, addr string, cfg *Config) (*Association, error) {
	s, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, err
	}
	lc := s.listenConfig()
	local := ":0"
	if raddr.IP.To4() != nil && network != "udp6" {
		local = "0.0.0.0:0"
	}
	pc, err := lc.ListenPacket(ctx, network, local)
	if err != nil {
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
			return nil, fmt.Errorf("sctpddp: DTLS handshake with %s refused: %w", addr, a)
		}
		return nil, handshakeError(s, addr, err)
	}
	if err := s.checkPeer(conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	a, err := newAssociation(ctx, s, conn, false)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return a, nil
}

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
	return fmt.Errorf("sctpddp: DTLS handshake with %s failed%s: %w", addr, hint, err)
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

// Listener accepts DTLS/SCTP associations on one UDP socket. Handshakes
// run concurrently in the background, each bounded by
// Config.HandshakeTimeout; a peer that fails authentication is dropped and
// never returned by Accept.
type Listener struct {
	s     *settings
	inner net.Listener

	ready  chan *Association
	ctx    context.Context // cancelled by Close: aborts handshakes
	cancel context.CancelFunc
	once   sync.Once
	wg     sync.WaitGroup // the accept loop and the handshakes
}

// Listen opens a UDP socket on addr and accepts DTLS/SCTP associations on
// it. ctx bounds only the socket's creation; close the Listener to stop.
func Listen(ctx context.Context, network, addr string, cfg *Config) (*Listener, error) {
	s, err := cfg.settings()
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
	opts = append(opts, dtls.WithListenConfig(s.listenConfig()))
	inner, err := dtls.ListenWithOptions(network, laddr, opts...)
	if err != nil {
		return nil, err
	}
	l := &Listener{
		s:     s,
		inner: inner,
		ready: make(chan *Association),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			// Closed: pion's UDP listener fails Accept only then.
			return
		}
		if l.ctx.Err() != nil {
			_ = c.Close()
			return
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	conn, ok := c.(*dtls.Conn)
	if !ok {
		_ = c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.s.HandshakeTimeout)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return
	}
	if err := l.s.checkPeer(conn); err != nil {
		_ = conn.Close()
		return
	}
	a, err := newAssociation(ctx, l.s, conn, true)
	if err != nil {
		_ = conn.Close()
		return
	}
	select {
	case l.ready <- a:
	case <-l.ctx.Done():
		_ = a.Close()
	}
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
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close stops accepting, aborts handshakes in progress and waits for the
// Listener's goroutines. Associations already returned by Accept stay
// open; the UDP socket closes when the last of them does.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.cancel()
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}
