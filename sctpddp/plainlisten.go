//go:build !js

package sctpddp

import (
	"context"
	"crypto/rand"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/internal/netpeer"
	"github.com/iwarpgo/iwarp/sctpddp/sctp"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// A Listener under Config.InsecurePlainUDP: its demultiplexer (udpMux)
// hands every datagram from an address without a conn to a plainListener,
// which answers it as RFC 9260 §8.4 says and keeps nothing, until a COOKIE
// ECHO authenticates and the peer's conn and association start.

// plainConn is the UDP flow of one peer address of a plain-UDP Listener,
// under the association that its COOKIE ECHO started, with the cookie
// keys bound to that address (sctp.CookieKeys.Bound), with which the
// association opens the COOKIE ECHO again as its first packet.
type plainConn struct {
	*muxConn
	keys sctp.CookieKeys
}

// Read and Write make a muxConn a net.Conn of one SCTP packet a datagram.
func (c *muxConn) Read(p []byte) (int, error) {
	n, _, err := c.ReadFrom(p)
	return n, err
}

func (c *muxConn) Write(p []byte) (int, error) { return c.WriteTo(p, nil) }

// adopt creates the conn of raddr once its COOKIE ECHO d has been
// authenticated: established from the start, outside the DTLS handshake
// limits (the association limits were taken by the caller), with d as its
// first datagram. start runs under mu, as onNew does, so that no
// association starts once close has begun. It returns nil once the mux is
// closing.
func (m *udpMux) adopt(raddr netip.AddrPort, d []byte, start func(*muxConn)) *muxConn {
	m.mu.Lock()
	if !m.accepting || m.conns[raddr] != nil {
		m.mu.Unlock()
		return nil
	}
	c := m.newConnLocked(raddr, m.establishedQueue, connEstablished)
	c.progressed.Store(true)
	m.conns[raddr] = c
	m.refs++
	m.created.Add(1)
	c.push(d)
	start(c)
	m.mu.Unlock()
	return c
}

// plainReplies bounds the answers a plain-UDP Listener sends to packets
// that authenticate nothing (RFC 9260 §8.4's ABORT and SHUTDOWN COMPLETE):
// plainRepliesPerSecond on average, plainRepliesBurst at once. Their
// source address may be spoofed, so an unbounded answer would let a flood
// aim the Listener's packets at a third party.
const (
	plainRepliesPerSecond = 100
	plainRepliesBurst     = 20
)

// plainListener is what a plain-UDP Listener's read loop runs for a
// datagram from an address that has no association: RFC 9260 §8.4's
// handling of out-of-the-blue packets, with the handshake of §5.1 done
// statelessly. It keeps nothing per peer: an INIT is answered with an
// INIT ACK whose State Cookie holds the association (sctp.HandleInit),
// and only a COOKIE ECHO whose cookie authenticates, under keys bound to
// its source address, creates the peer's conn and association. All of it
// runs on the read loop's goroutine: no lock.
type plainListener struct {
	l       *Listener
	conn    *net.UDPConn // the Listener's socket
	hs      sctp.HandshakeConfig
	keys    sctp.CookieKeys
	rotated time.Time
	buf     []byte // the reply being built

	tokens   float64 // plainReplies' bucket
	refilled time.Time

	// Counters, for tests: datagrams that failed the CRC32c or whose
	// chunks are malformed, INITs answered, COOKIE ECHOs that did not authenticate, and
	// §8.4 replies sent and withheld by plainReplies.
	badChecksum, initAcks, forged, replies, withheld atomic.Uint64
}

// cookieKeyLife is how long a plain-UDP Listener makes cookies with one
// key (RFC 9260 §5.1.3: "The secret key SHOULD be changed reasonably
// frequently (e.g., hourly)"); the previous key still opens the cookies
// made just before a rotation.
const cookieKeyLife = time.Hour

// listenPlain opens the socket of a plain-UDP Listener.
func (l *Listener) listenPlain(network string, laddr *net.UDPAddr) error {
	keys, err := sctp.NewCookieKeys(rand.Reader)
	if err != nil {
		return err
	}
	p := &plainListener{
		l: l,
		hs: sctp.HandshakeConfig{
			// Any SCTP port: the UDP address is the endpoint.
			ARwnd:           l.s.MaxReceiveBufferSize,
			OutboundStreams: maxStreams,
			InboundStreams:  maxStreams,
			RequireDDP:      true,
		},
		keys:     keys,
		rotated:  time.Now(),
		buf:      make([]byte, 0, 1500),
		tokens:   plainRepliesBurst,
		refilled: time.Now(),
	}
	uc, err := listenUDP(network, laddr, l.s)
	if err != nil {
		return err
	}
	p.conn = uc
	l.plain = p
	l.mux = newUDPMuxWith(uc, l.s, nil, p.handle)
	return nil
}

// handle answers a datagram d from raddr, which has no conn on m, as RFC
// 9260 §8.4 says, keeping nothing.
func (p *plainListener) handle(m *udpMux, raddr netip.AddrPort, d []byte) {
	// §8.4: "An SCTP packet is called an "Out of the Blue" (OOTB) packet
	// if it is correctly formed (i.e., passed the receiver's CRC32c
	// check ...)". §6.8: the CRC32c is checked first; over plain UDP no
	// zero checksum is accepted (RFC 9653 is for DTLS).
	if len(d) <= chunk.HeaderLen || chunk.VerifyChecksum(d) != nil {
		p.badChecksum.Add(1)
		return
	}
	// §8.4 1): "If the OOTB packet is to or from a non-unicast address, a
	// receiver SHOULD silently discard the packet."
	if a := raddr.Addr(); !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || raddr.Port() == 0 {
		return
	}
	var k ootbKinds
	it := chunk.Chunks(d)
	for it.Next() {
		k.add(it.Chunk())
	}
	if !k.seen || it.Err() != nil {
		// Not "correctly formed": no OOTB packet, nothing to answer.
		p.badChecksum.Add(1)
		return
	}
	// §8.4 2): "If the OOTB packet contains an ABORT chunk, the receiver
	// MUST silently discard the OOTB packet and take no further action."
	if k.abort {
		return
	}
	now := time.Now()
	if now.Sub(p.rotated) >= cookieKeyLife {
		if keys, err := p.keys.Rotate(rand.Reader); err == nil {
			p.keys, p.rotated = keys, now
		}
	}
	h := chunk.Header(d)
	switch k.first {
	case chunk.TypeInit:
		// §8.4 3): "If the packet contains an INIT chunk with a
		// Verification Tag set to 0, it SHOULD be processed as described
		// in Section 5.1"; HandleInit discards any other INIT (§8.5.1 A).
		keys := p.bound(raddr)
		res, _ := sctp.HandleInit(p.buf[:0], d, &p.hs, &keys, rand.Reader, now)
		if res.Packet != nil {
			p.initAcks.Add(1)
			p.send(res.Packet, raddr)
		}
		return
	case chunk.TypeCookieEcho:
		// §8.4 4): "If the packet contains a COOKIE ECHO chunk as the
		// first chunk, it MUST be processed as described in Section
		// 5.1."
		keys := p.bound(raddr)
		c, err := sctp.OpenCookieEcho(d, &keys, now)
		stale, isStale := err.(*sctp.StaleCookieError)
		switch {
		case isStale:
			// §5.1.5 step 4: the cookie is authentic, so its address
			// is the one its INIT ACK went to, and the ERROR is
			// smaller than the COOKIE ECHO.
			p.send(c.AppendStaleCookieError(p.buf[:0], stale.Staleness), raddr)
		case err != nil:
			// Steps 1 to 3: "the packet MUST be silently discarded".
			p.forged.Add(1)
		default:
			p.l.associatePlain(m, raddr, d, keys, &c, p)
		}
		return
	}
	switch {
	case k.shutdownAck:
		// §8.4 5): "the receiver SHOULD respond to the sender of the
		// OOTB packet with a SHUTDOWN COMPLETE chunk ... fill in the
		// Verification Tag field of the outbound packet with the
		// Verification Tag received in the SHUTDOWN ACK chunk and set
		// the T bit".
		if p.allow(now) {
			var b chunk.Builder
			b.Start(p.buf[:0], h.DestinationPort(), h.SourcePort(), h.VerificationTag())
			b.Buf = chunk.ShutdownComplete{T: true}.Append(b.Buf)
			p.send(b.Finish(), raddr)
		}
	case k.shutdownComplete, k.cookieAck, k.staleCookie:
		// §8.4 6) and 7): "SHOULD be silently discarded".
	default:
		// §8.4 8): "The receiver SHOULD respond to the sender of the
		// OOTB packet with an ABORT chunk. When sending the ABORT chunk,
		// the receiver of the OOTB packet MUST fill in the Verification
		// Tag field of the outbound packet with the value found in the
		// Verification Tag field of the OOTB packet and set the T bit in
		// the Chunk Flags to indicate that the Verification Tag is
		// reflected." The ABORT is no larger than the packet.
		if p.allow(now) {
			var b chunk.Builder
			b.Start(p.buf[:0], h.DestinationPort(), h.SourcePort(), h.VerificationTag())
			b.Buf = chunk.Abort{T: true}.Append(b.Buf)
			p.send(b.Finish(), raddr)
		}
	}
}

// ootbKinds is what §8.4's rules look for in a packet's chunks.
type ootbKinds struct {
	first                                                        chunk.Type
	seen                                                         bool
	abort, shutdownAck, shutdownComplete, cookieAck, staleCookie bool
}

func (k *ootbKinds) add(c chunk.Raw) {
	t := c.Type()
	if !k.seen {
		k.first, k.seen = t, true
	}
	switch t {
	case chunk.TypeAbort:
		k.abort = true
	case chunk.TypeShutdownAck:
		k.shutdownAck = true
	case chunk.TypeShutdownComplete:
		k.shutdownComplete = true
	case chunk.TypeCookieAck:
		k.cookieAck = true
	case chunk.TypeError:
		cs := chunk.Causes(c.Value())
		for cs.Next() {
			if cs.Cause().Code() == chunk.CauseStaleCookie {
				k.staleCookie = true
			}
		}
	}
}

// bound returns the cookie keys of raddr.
func (p *plainListener) bound(raddr netip.AddrPort) sctp.CookieKeys {
	var b [64]byte
	return p.keys.Bound(raddr.AppendTo(b[:0]))
}

// allow takes a token of plainReplies' bucket, if one is left.
func (p *plainListener) allow(now time.Time) bool {
	p.tokens = min(plainRepliesBurst, p.tokens+now.Sub(p.refilled).Seconds()*plainRepliesPerSecond)
	p.refilled = now
	if p.tokens < 1 {
		p.withheld.Add(1)
		return false
	}
	p.tokens--
	return true
}

func (p *plainListener) send(pkt []byte, raddr netip.AddrPort) {
	p.replies.Add(1)
	_, _ = p.conn.WriteToUDPAddrPort(pkt, raddr)
}

// associatePlain starts the association that the authenticated COOKIE
// ECHO d of raddr describes, within the Listener's association limits,
// which a peer beyond them hears of as an ABORT with an Out of Resource
// cause (RFC 9260 §3.3.10.4: the peer proved its address by echoing the
// cookie, so the answer goes nowhere else).
func (l *Listener) associatePlain(m *udpMux, raddr netip.AddrPort, d []byte, keys sctp.CookieKeys, c *sctp.StateCookie, p *plainListener) {
	ip := netpeer.Of(raddr.Addr())
	remote := net.UDPAddrFromAddrPort(raddr)
	if err := l.peers.take(ip); err != nil && (!l.evictIdle(ip) || l.peers.take(ip) != nil) {
		l.s.refused(remote, err)
		var b chunk.Builder
		b.Start(p.buf[:0], c.LocalPort, c.PeerPort, c.PeerVerificationTag)
		b.Buf = chunk.Abort{Causes: chunk.RawCause{Code: chunk.CauseOutOfResource}.Append(nil)}.Append(b.Buf)
		p.send(b.Finish(), raddr)
		return
	}
	started := m.adopt(raddr, d, func(mc *muxConn) {
		l.wg.Add(1)
		go l.handshakePlain(&plainConn{muxConn: mc, keys: keys}, ip)
	})
	if started == nil {
		l.peers.give(ip)
	}
}

// handshakePlain runs the association of a plain-UDP peer from its COOKIE
// ECHO, queued as the conn's first packet, and hands it to Accept.
func (l *Listener) handshakePlain(c *plainConn, ip netip.Addr) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.s.HandshakeTimeout)
	defer cancel()
	slot := new(assocSlot)
	a, err := newAssociation(ctx, l.s, c, true, func() {
		l.assocs.forget(ip, slot)
		l.peers.give(ip)
	})
	if err != nil {
		l.peers.give(ip)
		_ = c.Close()
		return
	}
	l.offer(ip, slot, a)
}
