// Package sctp is the SCTP association (RFC 9260) of sctp://, the
// transport that carries DDP over SCTP (RFC 5043) over DTLS over UDP
// (RFC 8261), written to replace pion/sctp beneath sctpddp. Its wire
// codec is package chunk. Like the codec, the package is protocol logic
// only: it starts no goroutines, reads no clock and owns no socket. The
// association's run loop hands it received packets, the time and a random
// source, and sends the packets it returns.
//
// # The handshake
//
// The four-way handshake of RFC 9260 §5.1 is four functions and two
// states. The passive side keeps nothing between INIT and COOKIE ECHO: what
// it will need is in the State Cookie it sends in its INIT ACK,
// authenticated with HMAC-SHA256 under CookieKeys, so a peer can make it
// hold nothing before the COOKIE ECHO. Answering an INIT or a COOKIE
// ECHO allocates nothing once the caller's buffer holds the reply, so a
// flood of either costs hashing, not memory.
//
//	// The passive side, for each packet whose first chunk is INIT:
//	res, err := sctp.HandleInit(buf, pkt, &cfg, &keys, rand.Reader, time.Now())
//	if res.Packet != nil {
//		send(res.Packet) // INIT ACK, or ABORT when err says why
//	}
//	// ... and for each whose first chunk is COOKIE ECHO, with no association:
//	reply, est, err := sctp.HandleCookieEcho(buf, pkt, &keys, time.Now())
//	if reply != nil {
//		send(reply) // COOKIE ACK, or ERROR with a Stale Cookie cause
//	}
//	if err == nil {
//		// est: tags, TSNs, a_rwnd, streams, est.PeerAdaptation.DDP()
//	}
//
//	// The active side:
//	w, err := sctp.NewCookieWait(&cfg, rand.Reader)
//	send(w.AppendInit(buf)) // again on T1-init
//	echo, e, err := w.HandleInitAck(buf, initAck)
//	if echo != nil {
//		send(echo) // COOKIE ECHO, or ABORT when err says why
//	}
//	send(e.AppendCookieEcho(buf)) // again on T1-cookie
//	est, err := e.HandleCookieAck(cookieAck)
//	// ... or, if the cookie came back stale, §5.2.6:
//	staleness, ok := e.HandleStaleCookie(errorPkt)
//
// An INIT for an existing association (§5.2.1, §5.2.2) is answered by
// HandleUnexpectedInit, which puts the association's Tie-Tags in the
// cookie; a COOKIE ECHO for one follows §5.2.4: OpenCookieEcho
// authenticates it and DecideCookieEcho says which of Table 12's actions
// applies (restart, collision, late cookie, duplicate), the association
// answering with StateCookie.AppendCookieAck or AppendStaleCookieError.
//
// Every INIT and INIT ACK carries an Adaptation Layer Indication (RFC 5043
// §11.1: "a DDP/SCTP adaptation layer MUST include an adaptation layer
// indication in its INIT or INIT-ACK") and, when
// HandshakeConfig.ZeroChecksum is set, Zero Checksum Acceptable with the
// DTLS EDMID (RFC 9653). The peer's indication is reported
// (Established.PeerAdaptation, whose DDP method applies §11.1's table),
// and refused with an ABORT under HandshakeConfig.RequireDDP.
//
// # Deviations and choices
//
//   - No IPv4 Address, IPv6 Address or Supported Address Types parameter
//     is sent, and those received are accepted and ignored: over DTLS
//     "The INIT and INIT-ACK chunk MUST NOT contain any IPv4 Address or
//     IPv6 Address parameters. The INIT chunk MUST NOT contain the
//     Supported Address Types parameter" and "SCTP should not process the
//     IP addresses used for the underlying communication" (RFC 8261 §6.1,
//     §8). Every association is single-homed on its DTLS connection.
//     Linux lists addresses and Supported Address Types in its INIT (with
//     RFC 6951 encapsulation too); they are accepted.
//   - An INIT whose Initiate Tag is 0 is silently discarded, as RFC 9260
//     §3.3.2 says, not answered with an ABORT: the ABORT's Verification
//     Tag would be that 0, which only an INIT may carry. An a_rwnd below
//     1500 or a stream count of 0 is answered with an ABORT with the
//     Invalid Mandatory Parameter cause.
//   - Unrecognized parameters are handled by their type's upper two bits
//     (§3.2.1). The processing that 00 and 01 stop does not include the
//     INIT ACK's State Cookie, which is mandatory and always echoed. At
//     most 512 bytes of parameters are reported back, however many
//     unknown parameters the peer sends. Forward-TSN-Supported (RFC 3758)
//     is not implemented and so is reported; a Supported Extensions
//     parameter is recognised and ignored, and none is sent: no extension
//     chunk is implemented yet.
//   - A Cookie Preservative is honoured up to
//     HandshakeConfig.MaxLifeSpanIncrement (1 s by default, §5.2.6).
//   - The State Cookie is 96 bytes: the association's parameters, the
//     key's epoch, the creation time in microseconds and the lifespan in
//     milliseconds, then the MAC. A cookie is checked in §5.1.5's order:
//     key, MAC (hmac.Equal), ports and Verification Tag, then staleness.
//     Its Tie-Tags are RFC 9260's, values of their own that the
//     association draws and keeps (§5.2.2: "populated with a random value
//     other than 0"), not RFC 4960's copies of the Verification Tags,
//     which pion/sctp compares: DecideCookieEcho matches them against the
//     association's Tie-Tags.
//   - RFC 9653's text was not at hand. As pion/sctp reads it, each
//     direction is announced on its own: Established.SendZeroChecksum
//     follows the peer's Zero Checksum Acceptable alone, and
//     ReceiveZeroChecksum this endpoint's.
//   - The handshake's packets always carry the CRC32c, even to a peer
//     that accepts zero checksums; the association's data packets (DATA,
//     SACK, HEARTBEAT ACK) go with a zero Checksum to a peer that
//     announced Zero Checksum Acceptable. The caller verifies the CRC32c of the INIT
//     and COOKIE ECHO it hands in; a zero Checksum is fine on an INIT ACK
//     after an INIT that announced Zero Checksum Acceptable (pion/sctp
//     sends one).
//   - HandshakeConfig.RequireDDP refuses a peer with an ABORT holding a
//     User-Initiated Abort cause: the refusal is the adaptation layer's,
//     and RFC 5043 defines no cause for it.
//
// # The association
//
// Association (association.go, shutdown.go) joins the pieces over a
// net.Conn of which one Read is one SCTP packet and one Write sends one
// (a DTLS connection, or a connected UDP socket for RFC 6951). Client and
// Server run the handshake and return it ESTABLISHED. Two goroutines
// serve it: the run loop, which owns the TCB, the Sender, the Receiver
// and one timer armed to the earliest deadline, and does all sending;
// and a reader that hands packets to the loop in a fixed set of 4
// buffers of 64 KiB, returned after each packet. SendMessage gathers a
// message into one buffer (one copy) that the Sender's chunks alias until
// acknowledged; a second copy puts them in the packet. Received messages
// are copied into their Stream (stream.go: OpenStream, AcceptStream),
// where they count against the receive window until Stream.ReadMessage
// takes them; Config.OnMessage instead receives the Receiver's messages
// on the loop, unfragmented ones in the packet itself. SACKs are bundled
// before DATA, DATA chunks fill packets up to Config.MTU, HEARTBEATs go
// on an idle path, a HEARTBEAT is answered by echoing its value whatever
// it holds, and the peer is dead after Association.Max.Retrans errors or
// Config.DeadPeerTimeout of silence. Limits: no restart or collision
// after the handshake (such COOKIE ECHOs are discarded, a duplicate is
// answered with COOKIE ACK), no ABORT to out-of-the-blue packets before
// the association exists, and ERROR chunks received are ignored.
package sctp
