//go:build !js

package sctpddp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the limits and timeouts on what remote peers can make this
// package hold (docs/security.md, "Limits on what a peer can make
// sctp:// hold"). They hold on a small machine: every limit counts
// something whose memory is bounded, and their product is what a Listener
// can be made to hold at worst.
const (
	// DefaultMaxHandshakes bounds the DTLS handshakes a Listener runs at
	// once, from the first ClientHello of a new address until the
	// handshake ends (Config.MaxHandshakes).
	DefaultMaxHandshakes = 64
	// DefaultMaxHandshakesPerPeer bounds them per peer (IPv4 address or IPv6
	// /64) (Config.MaxHandshakesPerPeer).
	DefaultMaxHandshakesPerPeer = 8
	// DefaultMaxAssociations bounds a Listener's associations, from the
	// end of their DTLS handshake until they end (Config.MaxAssociations).
	DefaultMaxAssociations = 128
	// DefaultMaxAssociationsPerPeer bounds them per peer (IPv4 address or IPv6
	// /64) (Config.MaxAssociationsPerPeer).
	DefaultMaxAssociationsPerPeer = 16
	// DefaultAcceptTimeout is how long an association waits for
	// Listener.Accept, and a DDP Stream Session request for
	// SessionAcceptor.Accept, before it is refused (Config.AcceptTimeout).
	DefaultAcceptTimeout = 10 * time.Second
	// DefaultMaxSessions bounds the DDP Stream Sessions a SessionAcceptor
	// holds on one association: requests waiting for or under the ULP's
	// decision and sessions accepted and not yet closed
	// (Config.MaxSessions).
	DefaultMaxSessions = 16
	// DefaultMaxPeerSessions and DefaultMaxListenerSessions bound them over
	// all the associations of a Listener, per peer (IPv4 address or IPv6 /64)
	// and in all (Config.MaxPeerSessions, Config.MaxListenerSessions). A
	// session costs its queue pair's memory: about 1.5 MiB today, most of it
	// the DDP reassembly window of 32768 segments (ddp.Stream.SetWindow).
	DefaultMaxPeerSessions     = 64
	DefaultMaxListenerSessions = 256
	// DefaultMaxStreams bounds the SCTP streams a peer starts on one
	// association over its life (Config.MaxStreams): pion/sctp keeps
	// about 1.3 KiB for each stream until the peer resets it, and a peer
	// may use every one of the 65536 stream identifiers.
	DefaultMaxStreams = 1024
	// DefaultMaxRetiredStreams bounds the retired streams of one
	// association that are still read (Config.MaxRetiredStreams): each
	// costs a goroutine and its buffer, about 8-10 KiB.
	DefaultMaxRetiredStreams = 64
	// DefaultRetiredStreamTimeout is how long a retired stream is read
	// after the last message on it when the association sends no
	// heartbeats (Config.RetiredStreamTimeout); otherwise it is twice
	// Config.HeartbeatInterval (10 s by default too).
	DefaultRetiredStreamTimeout = 2 * DefaultDeadPeerTimeout / deadPeerHeartbeats
	// DefaultDeadPeerTimeout is how long an association may hear nothing
	// from its peer before it is closed with ErrPeerDead
	// (Config.DeadPeerTimeout).
	DefaultDeadPeerTimeout = 30 * time.Second
	// deadPeerHeartbeats is how many heartbeats a quiet peer is sent within
	// DeadPeerTimeout by default (Config.HeartbeatInterval).
	deadPeerHeartbeats = 6
)

// Why an association or a session ended or was refused. Association.Err
// and the errors of its streams and sessions wrap them (errors.Is), and
// Config.Refused hears them.
var (
	// ErrPeerDead: nothing came from the peer, not even the answer to a
	// heartbeat, for Config.DeadPeerTimeout.
	ErrPeerDead = errors.New("sctpddp: peer dead: nothing received for longer than the dead-peer timeout")
	// ErrPeerClosed: the peer ended the association (SCTP SHUTDOWN or
	// ABORT, a DTLS close_notify) or its DTLS connection failed.
	ErrPeerClosed = errors.New("sctpddp: the peer ended the association")
	// ErrTooManyHandshakes: the Listener was running Config.MaxHandshakes
	// DTLS handshakes and closed this one, which its peer had answered
	// (past the cookie exchange), to make room for a ClientHello of a
	// peer holding fewer handshakes than this one's, which held the most
	// (the unanswered handshakes of such peers go first, then the
	// oldest). The client's Dial fails (ErrHandshake) and may be retried.
	ErrTooManyHandshakes = errors.New("sctpddp: DTLS handshake limit reached")
	// ErrTooManyAssociations: the Listener already holds
	// Config.MaxAssociationsPerPeer associations of the peer's IP address,
	// or Config.MaxAssociations in all. The DTLS connection is closed
	// right after its handshake, before the SCTP association starts.
	ErrTooManyAssociations = errors.New("sctpddp: association limit reached")
	// ErrTooManySessions: the association already holds
	// Config.MaxSessions DDP Stream Sessions, or the Listener
	// Config.MaxPeerSessions of the peer's IP address or
	// Config.MaxListenerSessions in all. The Initiate is answered with a
	// DDP Stream Session Terminate.
	ErrTooManySessions = errors.New("sctpddp: DDP Stream Session limit of the association reached")
	// ErrTooManyPendingSessions: as many session requests as
	// SessionAcceptor allows are waiting for the ULP's decision (RFC 5043
	// §6.4). The Initiate is answered with a DDP Stream Session Terminate.
	ErrTooManyPendingSessions = errors.New("sctpddp: too many DDP Stream Session requests pending a decision")
	// ErrTooManyStreams: the peer started more than Config.MaxStreams
	// SCTP streams on the association, which is closed.
	ErrTooManyStreams = errors.New("sctpddp: the peer started too many SCTP streams")
	// ErrAcceptTimeout: an association waited Config.AcceptTimeout for
	// Listener.Accept, or a session request for SessionAcceptor.Accept.
	ErrAcceptTimeout = errors.New("sctpddp: the application did not accept in time")
)

// endError is why an association ended: it wraps the cause, and is
// ErrClosed too, so that operations on the association's streams return
// an error that both errors.Is ErrClosed and names the cause.
type endError struct{ cause error }

func (e *endError) Error() string        { return "sctpddp: association closed: " + e.cause.Error() }
func (e *endError) Unwrap() error        { return e.cause }
func (e *endError) Is(target error) bool { return target == ErrClosed }

// closedBy returns the error an association ended by cause reports.
func closedBy(cause error) error {
	if cause == nil || cause == ErrClosed {
		return ErrClosed
	}
	return &endError{cause}
}

// peerCounter counts what peers hold, per IP address and in all, under
// two limits; what refuses is err.
type peerCounter struct {
	mu       sync.Mutex
	perPeer  map[netip.Addr]int
	total    int
	maxPeer  int
	maxTotal int
	err      error
}

func newPeerCounter(maxPeer, maxTotal int, err error) *peerCounter {
	return &peerCounter{perPeer: make(map[netip.Addr]int), maxPeer: maxPeer, maxTotal: maxTotal, err: err}
}

// take counts one more for ip, or reports which limit refuses it.
func (c *peerCounter) take(ip netip.Addr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perPeer[ip] >= c.maxPeer {
		return fmt.Errorf("%w (%d for %v)", c.err, c.maxPeer, ip)
	}
	if c.total >= c.maxTotal {
		return fmt.Errorf("%w (%d in the Listener)", c.err, c.maxTotal)
	}
	c.perPeer[ip]++
	c.total++
	return nil
}

// give counts one less for ip.
func (c *peerCounter) give(ip netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.perPeer[ip]; n > 1 {
		c.perPeer[ip] = n - 1
	} else {
		delete(c.perPeer, ip)
	}
	c.total--
}

// refused tells Config.Refused.
func (s *settings) refused(remote net.Addr, why error) {
	if s.Refused != nil {
		s.Refused(remote, why)
	}
}
