// Package sctpddp is the SCTP adaptation of DDP (RFC 5043): the lower
// layer protocol (LLP) that carries DDP Segments (RFC 5041) in SCTP DATA
// chunks, here over github.com/pion/sctp on github.com/pion/dtls/v3 on UDP.
//
// The wire codecs are pure (no goroutines, no pion import) and build for
// every GOOS, js/wasm included:
//
//   - PPIDs 16 and 17 and the DDP Adaptation Indication (§5.1, §5.2, §12):
//     PPIDSegment, PPIDSessionControl, AdaptationIndicationDDP.
//   - The DDP-SSN (§5.2.1) with the serial-number arithmetic and in-flight
//     limit of §10: SSN, MaxInFlight, SSN.InWindow, CanSend.
//   - The DDP Segment Chunk (§5.2.2): SegmentChunk, ParseSegmentChunk.
//   - DDP Stream Session Control (§5.2.3) with RFC 5043's four function
//     codes and RFC 6581 §7's three enhanced ones, whose Private Data starts
//     with the IRD/ORD field of RFC 6581 §9: SessionControl,
//     ParseSessionControl, EnhancedData.
//   - The maximum DDP Segment size reported to DDP (§9): MULPDUForMTU,
//     CheckSegmentSize.
//
// Encoders are Append(b []byte) []byte with Len(); decoders are
// ParseX(b []byte) (X, int, error) and never panic. A decoded message
// aliases the buffer it was parsed from. Neither message type has a length
// field: one SCTP message is one chunk, and the message boundary ends it.
//
// The connection side (files built natively, not for js) sets up DTLS over
// UDP with pion/dtls/v3 and an SCTP association over it with pion/sctp:
// Listen, Dial, Listener, Association and Stream. Every Stream sends
// unordered, reliable DATA chunks, as §10 requires ("The adaptation layer
// MUST use the Unordered option on all Data Chunks"), and assigns DDP-SSNs
// in submission order.
//
// # Known deviations from RFC 5043
//
//   - §5.1 and §11.1: "We define an Adaptation Indication that MUST appear
//     in the INIT or INIT-ACK". pion/sctp has no way to add the RFC 5061
//     Adaptation Layer Indication parameter (type 0xC006) to its INIT or
//     INIT-ACK, and skips one it receives, so neither side sends or checks
//     it. Both ends of an association made by this package use it for DDP
//     only, which is what the indication would announce; a peer that is
//     not DDP-capable is caught by the DTLS authentication and the
//     DDP Stream Session exchange instead.
//   - §7.2 (multihoming): SCTP runs over one DTLS/UDP path, so there is a
//     single address per endpoint, which §7.2 allows.
//   - §13 (IPsec): the association is protected by DTLS (RFC 8261, as in
//     WebRTC) rather than IPsec.
//   - pion/sctp negotiates I-DATA (RFC 8260) by default; this package turns
//     it off so that segments travel in the DATA chunks RFC 5043 describes.
//   - On a WebRTC data channel (DataChannelStream) the PPID is implied by
//     content: the browser sends every binary message with PPID 53, so a
//     message whose third octet is 0x00 (the high octet of a Function Code,
//     1-7) is DDP Stream Session Control and any other a DDP Segment Chunk
//     (its DDP Control Field has DV = 01b); segments of another DDP version
//     are not sent.
//
// # Sessions
//
// Session binds a ULP endpoint (ddp.Endpoint: an rdmap.QueuePair) to a DDP
// stream for one DDP Stream Session (§6): Connect or ConnectStream on the
// active side, Association.Sessions or ReadInitiate and then
// SessionRequest.Accept or Reject on the passive side. IRD and ORD are
// negotiated with RFC 6581's enhanced function codes unless
// SessionConfig.Basic. Each DDP Segment's 16-bit DDP-SSN is widened to the
// DDP stream's 32-bit sequence: the segment is placed on arrival and its
// message delivered in DDP-SSN order. A message outside the legal
// sequences (a second Initiate, a forged or out-of-window DDP-SSN, an
// unknown PPID, oversized Private Data) terminates the session with a DDP
// Stream Session Terminate and flushes the endpoint; nothing more is
// placed.
//
// # Limits
//
// Every resource a remote peer can make this package hold has a limit, a
// deadline and a fair refusal (docs/security.md lists them with their
// defaults): a Listener demultiplexes its UDP socket itself, creates state
// only for a datagram that is a DTLS ClientHello, and caps the DTLS
// handshakes in progress in all and per peer, evicting those whose peer
// has not answered the cookie exchange (which a spoofed source cannot) to
// make room (Config.MaxHandshakes, MaxHandshakesPerPeer); it caps
// associations per peer IP address and in all (MaxAssociations,
// MaxAssociationsPerPeer, ErrTooManyAssociations) and the time they wait
// for Accept (AcceptTimeout); a SessionAcceptor caps the DDP Stream
// Sessions it holds per association, per peer and per Listener and the
// requests pending a decision (MaxSessions, MaxPeerSessions,
// MaxListenerSessions, MaxPendingSessions), answering any more Initiates
// with a Terminate (RFC 5043 §6.4); an association whose peer starts too
// many SCTP streams is closed (MaxStreams), and one whose peer has sent
// nothing for DeadPeerTimeout is closed with ErrPeerDead, each end sending
// a HEARTBEAT whenever it has sent nothing for HeartbeatInterval.
// Association.Err says why an association ended; Config.Refused hears
// every refusal.
//
// # Readings of the RFCs
//
//   - RFC 6581 §7 places the IRD/ORD field in the enhanced Initiate and
//     Accept; this package also carries it in the Enhanced Reject, since
//     §9.1 and §9.2 have the reject convey the responder's IRD/ORD and RTR
//     options (see FunctionCode.Enhanced).
//   - The function code 0xFFFF (RFC 6580, experimental) is rejected like an
//     unassigned code.
package sctpddp
