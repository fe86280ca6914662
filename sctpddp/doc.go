// Package sctpddp runs DDP (RFC 5041) and with it RDMAP queue pairs over
// SCTP, as RFC 5043 adapts it: each DDP stream is a pair of like-numbered
// SCTP streams, each DDP Segment an unordered DATA chunk numbered with a
// DDP-SSN, and a DDP Stream Session starts and ends with session control
// messages. Natively the SCTP association is package sctpddp/sctp's, over
// DTLS over UDP (RFC 8261, github.com/pion/dtls/v3), or pion/sctp's under
// Config.PionSCTP; the same sessions run over WebRTC data channels
// (package sctpddp/datachannel natively, the browser's in js/wasm).
//
// One end listens and accepts sessions, the other dials and connects a
// queue pair (an rdmap.QueuePair is a ddp.Endpoint):
//
//	l, err := sctpddp.Listen(ctx, "udp", ":4791", &sctpddp.Config{Certificate: cert, PeerFingerprints: pins})
//	a, err := l.Accept(ctx)
//	req, err := a.Sessions(0).Accept(ctx)
//	sess, err := req.Accept(qp, sctpddp.SessionConfig{})
//
//	a, err := sctpddp.Dial(ctx, "udp", "server:4791", &sctpddp.Config{Certificate: cert, PeerFingerprints: pins})
//	sess, err := a.Connect(ctx, qp, sctpddp.SessionConfig{})
//
// The wire format (PPIDs, DDP-SSN arithmetic, the DDP Segment Chunk,
// session control, the MULPDU) is package sctpddp/wire's. This package
// has the rest: sessions over any MessageStream, the Chunker that numbers
// and frames every stream's messages, the ChannelStream that carries them
// over a data channel, and, natively, the DTLS/SCTP association.
//
// # Associations
//
// Listen and Dial set up DTLS over UDP and an SCTP association over it:
// Listener, Association and Stream. The association (package
// sctpddp/sctp) announces DDP's Adaptation Layer Indication in its INIT
// and INIT ACK and refuses a peer without it (§11.1), agrees on zero
// checksums over DTLS (RFC 9653), recovers losses with RACK-TLP (RFC
// 8985), and tunes its windows to the path up to Config.MaxWindow. One
// file, sctpassoc.go, is the seam between this package and either SCTP
// association. Every Stream sends unordered, reliable
// DATA chunks, as §10 requires ("The adaptation layer MUST use the
// Unordered option on all Data Chunks"), and assigns DDP-SSNs in
// submission order. The peer is authenticated by exactly one of pinned
// certificate fingerprints (GenerateCertificate, CertificateFingerprint,
// ParseFingerprint), certificate authorities or a pre-shared key (Config).
// None of this is built for js/wasm, which has no UDP sockets.
//
// # Over plain UDP
//
// Config.InsecurePlainUDP, an explicit insecure choice for labs and tests,
// runs the same associations without DTLS, SCTP straight over UDP as RFC
// 6951 encapsulates it, so that the Linux kernel's SCTP and usrsctp can be
// the peer: nothing is authenticated or encrypted. Every packet carries
// the CRC32c (RFC 9260 §6.8). Dial runs package sctp's Client on a
// connected UDP socket. A Listener keeps nothing for a peer before its
// COOKIE ECHO: its demultiplexer answers an INIT from an unknown address
// itself with an INIT ACK whose State Cookie carries the association
// (sctp.HandleInit, keys bound to the address), creates the peer's conn
// only for a COOKIE ECHO whose cookie authenticates, and starts package
// sctp's Server on it, which takes that COOKIE ECHO as its first packet;
// any other packet from an unknown address gets RFC 9260 §8.4's answer
// (plainudp.go).
//
// # Sessions
//
// Session binds a ULP endpoint (ddp.Endpoint: an rdmap.QueuePair) to a DDP
// stream for one DDP Stream Session (§6): Connect, Association.Connect or
// ConnectStream on the active side, Association.Sessions or ReadInitiate
// and then SessionRequest.Accept or Reject on the passive side. IRD and
// ORD are negotiated with RFC 6581's enhanced function codes unless
// SessionConfig.Basic. Each DDP Segment's 16-bit DDP-SSN is widened to the
// DDP stream's 32-bit sequence: the segment is placed on arrival and its
// message delivered in DDP-SSN order. A message outside the legal
// sequences (a second Initiate, a forged or out-of-window DDP-SSN, an
// unknown PPID, oversized Private Data) terminates the session with a DDP
// Stream Session Terminate and flushes the endpoint; nothing more is
// placed. A DDP stream carries one session per association: "A DDP
// Stream Identifier MUST NOT be reused for another DDP Stream Session
// while any Data Chunk from a prior session might be outstanding." (§6.6)
// Once its session has ended, the stream is read until it has been quiet
// for Config.RetiredStreamTimeout (or the association ends), its late
// chunks dropped and an Initiate on it answered with a Terminate, and
// Association.Connect never chooses it again. When the last session an
// association carried has ended, the association shuts itself down
// Config.LingerTimeout later unless another starts (RFC 5040 §7: "when
// all Streams are either gracefully torn down or are labeled as erroneous
// Streams, the LLP connection MUST be torn down").
//
// # Known deviations from RFC 5043
//
//   - Under Config.PionSCTP, §5.1 and §11.1 ("We define an Adaptation
//     Indication that MUST appear in the INIT or INIT-ACK") are not met:
//     pion/sctp neither sends the RFC 5061 Adaptation Layer Indication
//     (type 0xC006) nor reports one. The default association meets them.
//   - §7.2 (multihoming): SCTP runs over one DTLS/UDP path, so there is a
//     single address per endpoint, which §7.2 allows.
//   - §13 (IPsec): the association is protected by DTLS (RFC 8261, as in
//     WebRTC) rather than IPsec; under Config.InsecurePlainUDP by
//     nothing.
//   - Over plain UDP an association is the flow of one remote UDP
//     address: a peer whose address or port changes (a NAT rebinding) is
//     a new, unknown peer, not the same association with a new
//     encapsulation port (RFC 6951 §5.4).
//   - pion/sctp negotiates I-DATA (RFC 8260) by default; under PionSCTP
//     this package turns it off so that segments travel in the DATA chunks
//     RFC 5043 describes. The default association sends no I-DATA.
//   - The default association does not reset streams (RFC 6525):
//     Stream.Close returns an error there.
//   - On a WebRTC data channel (ChannelStream) the PPID is implied by
//     content: the browser sends every binary message with PPID 53, so a
//     message whose third octet is 0x00 (the high octet of a Function Code,
//     1-7) is DDP Stream Session Control and any other a DDP Segment Chunk
//     (its DDP Control Field has DV = 01b); segments of another DDP version
//     are not sent (see package sctpddp/wire).
//
// # Limits
//
// Every resource a remote peer can make this package hold has a limit, a
// deadline and a fair refusal (the project's security notes list them
// with their defaults): a Listener demultiplexes its UDP socket itself, creates state
// only for a datagram that is a DTLS ClientHello, and caps the DTLS
// handshakes in progress in all and per peer, sharing them out among
// peers: at the cap, a peer holding fewer than the peer holding the most
// makes room by evicting one of the latter's, first those whose peer has
// not answered the cookie exchange (which a spoofed source cannot), so
// that a few addresses that answer and stall lock nobody out
// (Config.MaxHandshakes, MaxHandshakesPerPeer, ErrTooManyHandshakes); it caps
// associations per peer (an IPv4 address or an IPv6 /64, as everywhere
// here) and in all (MaxAssociations, MaxAssociationsPerPeer,
// ErrTooManyAssociations) and the time they wait
// for Accept (AcceptTimeout); a SessionAcceptor caps the DDP Stream
// Sessions it holds per association, per peer and per Listener and the
// requests pending a decision (MaxSessions, MaxPeerSessions,
// MaxListenerSessions, MaxPendingSessions), answering any more Initiates
// with a Terminate (RFC 5043 §6.4); an association whose peer starts too
// many SCTP streams is closed (MaxStreams), the streams of ended sessions
// are read until quiet for RetiredStreamTimeout, at most
// MaxRetiredStreams at once, and one whose peer has sent
// nothing for DeadPeerTimeout is closed with ErrPeerDead, each end sending
// a HEARTBEAT whenever it has sent nothing for HeartbeatInterval.
// Association.Err says why an association ended; Config.Refused hears
// every refusal. Every stream keeps what it has in flight under a cap
// that also keeps §10's 32767 unacknowledged chunks (Chunker).
package sctpddp
