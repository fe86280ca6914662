// Package mpa carries DDP over TCP: MPA, Marker PDU Aligned Framing for
// TCP (RFC 5044), with the enhanced connection setup of RFC 6581. It is
// the lower layer that Linux siw and iWARP NICs speak.
//
// A queue pair connects with Dial (the Initiator) or through a Listener
// (the Responder), and then runs over the connection:
//
//	conn, err := mpa.Dial(ctx, "tcp", "server:4791", qp, nil) // nil: the defaults
//
//	l, err := mpa.Listen(ctx, "tcp", ":4791", nil)
//	req, err := l.Accept(ctx)     // a valid MPA Request: look at req.PrivateData
//	conn, err := req.Accept(qp, nil) // or req.Reject(why, ird, ord)
//
// # What it implements
//
//   - RFC 5044 §7.1 and RFC 6581 §6: the MPA Request and Reply Frames
//     (Frame, ParseFrame, ReadFrame), with the M, C, R and S bits, Rev 1
//     and 2, and up to 512 octets of Private Data; Negotiate turns a
//     Request and a Reply into the Options of each half connection. The
//     startup rules of §7.1.2: timeouts (HandshakeTimeout, from the TCP
//     connection to the first FPDU), rule 4 (the Responder receives an
//     FPDU before it sends one), rule 8 (Initiator/Initiator startups).
//   - RFC 6581 §9: the enhanced data (IRD, ORD, the peer-to-peer model,
//     the RTR indications), negotiated by ddp.Offer, ddp.Answer and
//     ddp.Settle, which DDP over SCTP shares.
//   - RFC 5044 §4.1: the FPDU: ULPDU_Length, ULPDU, PAD, CRC.
//   - RFC 5044 §4.2-4.3: Markers every 512 octets of the stream, counted
//     from the first octet of Full Operation, with FPDUPTR pointing back
//     at the ULPDU_Length field, 0x0000 for a Marker between FPDUs. FPDULen
//     and WireLen do the arithmetic; the Writer encodes and ParseFPDU
//     decodes.
//   - RFC 5044 §4.4: CRC32c as iSCSI computes it, over the ULPDU_Length
//     field, the ULPDU, the PAD and every Marker of the FPDU, including a
//     Marker just before the ULPDU_Length field and one just before the
//     CRC field. The CRC field is sent least significant octet first, as
//     RFC 5044 Figures 5 and 6 show.
//   - RFC 5044 §3 and §4.5: MULPDU from the EMSS, between 128 and 64768
//     octets ("The range of MULPDU values MUST be between 128 octets and
//     64768 octets, inclusive"); a Conn looks at the EMSS again every MiB
//     it sends, "If the TCP implementation needs to adjust EMSS ..., the
//     MULPDU value is changed accordingly" (Linux raises a loopback
//     connection's from 32741 to 65483 as the window opens).
//   - RFC 5044 §6 and §8: "An MPA receiver MUST first verify the FPDU
//     before passing the ULPDU to DDP": the Reader reads each FPDU whole
//     into its buffer, checks its CRC and Markers, and only then hands
//     the ULPDU to DDP, which copies it to its place; a CRC error places
//     nothing and is reported as term.MPACRCError.
//
// The codecs (Frame, Marker, AppendFPDU, ParseFPDU) work on byte slices.
// Writer and Reader are the streaming forms over a TCP connection: the
// Writer sends the FPDUs handed to it between two flushes as one gather
// write (writev(2), up to 128 FPDUs) without copying the payload; the
// Reader allocates its buffer once. Neither allocates per FPDU.
//
// # Concurrency in Full Operation
//
//   - Sending: the queue pair's one send route (a posting goroutine
//     that finds it idle, or its send goroutine) calls Conn.WriteSegment
//     per segment and Conn.Flush per batch. The receive side never waits
//     to write: answering a Read or Atomic Request while the send side
//     is idle, it calls Conn.WriteNow (ddp.NowWriter), one non-blocking
//     writev(2) of the Response's FPDU on Linux; what the socket does not
//     take at once leaves on the connection's writeLoop.
//   - Receiving: the holder of the receive token reads (poll.go): the
//     connection's receive goroutine, or a completion queue's waiter
//     whose next completion only this connection's FPDUs can bring
//     (Conn.Poll, ddp.Poller), so that the network wakes the waiter
//     directly.
//   - A stopped stream's last writes (a Terminate) and the graceful close
//     after them are bounded by TerminateTimeout.
//
// # Limits
//
// A Listener bounds what peers can make it hold: connections in their
// startup (MaxStartups running, as many parked, shared so that peers
// holding silent connections do not keep another out), connections per
// peer (MaxPerPeer; a peer is an IPv4 address or an IPv6 /64), Requests
// waiting for Accept (Backlog) and the time each step may take
// (HandshakeTimeout); a connection whose FPDU stays incomplete is cut off
// after PartialFPDUTimeout. docs/security.md lists them.
//
// # Choices and known deviations
//
//   - An ULPDU_Length below 14 (MinULPDU, the shortest DDP header) or
//     above Options.MaxULPDU is reported as term.MPAInvalidFrame (code 4,
//     whose registered name speaks of startup frames). RFC 5044 §8 has no
//     code for a bad ULPDU_Length; the framing after such a field cannot
//     be trusted, so the Reader stops there instead of reading up to
//     65535 octets to check a CRC. In Full Operation the Terminate
//     carrying that code goes out before the connection closes; an invalid
//     Request or Reply Frame closes it at once, as code 4 says.
//
//   - Markers are checked on every Marker, in order (RFC 5044 §8 makes
//     that optional for in-order reception); a mismatch is reported only
//     if the FPDU's CRC is valid, as §8 code 3 says.
//
//   - The Reader only reads in order; it does not use Markers to find
//     FPDUs after a gap (§6 methods 2-3 are for optimized MPA/TCP).
//
//   - A Marker can never fall inside the 2-octet ULPDU_Length field or
//     the CRC field: FPDUs and Markers are multiples of 4 octets and
//     start at SeqStart, so both fields begin 4-aligned.
//
//   - Rev: Rev 1 and Rev 2 are accepted; any other is an invalid frame.
//     In a Rev 1 frame the S bit is a reserved bit and is ignored.
//
//   - With CRCs off the Writer sends zero in the CRC field (RFC 5044
//     §4.4 allows generating them anyway; Linux siw sends zero).
//
//   - The FPDUs handed over between two flushes (one DDP message's, or a
//     batch's) leave in one gather write, so TCP, not MPA, cuts them
//     into segments. A run
//     of small FPDUs (RDMA Read Requests, short Sends) then shares a
//     segment, as §5.1 allows ("Multiple FPDUs MAY be packed into a
//     single TCP segment ... as long as they are entirely contained in
//     the TCP segment"); a write longer than the EMSS loses the FPDU
//     Alignment that §5.1 asks for with a SHOULD after its first
//     segment. Receivers "MUST NOT depend on FPDU Alignment" (Appendix
//     A). With Markers every FPDU is written on its own.
//
//   - Linux siw's responder echoes the Request's C bit in its Reply
//     (RFC 5044 §7.1.1 lets a Responder ask for CRCs whatever the
//     Initiator asked); both ends then use CRCs if either bit is set, as
//     the RFC says. Its responder also sends its Reply before it reads
//     the socket for FPDUs: Config.FirstFPDUDelay exists for that.
//
// Independent checks (the package's tshark and capture tests): Wireshark 4.0's dissector finds every FPDU this
// package writes, with "(Good CRC32)" and the same FPDUPTR values,
// including Markers between FPDUs and just before the CRC; it shows the
// CRC field's octets read big-endian, i.e. byte-swapped from the CRC32c
// value. Two limits of that dissector, not of this package: its Marker
// support assumes one FPDU per TCP segment (it takes the segment length
// as the FPDU's), and its ip.access heuristic claims a segment that
// starts with the all-zero first Marker unless gsm_ipa is disabled. The
// real capture of Linux siw (MPA Rev 1, CRCs and Markers off, zeros in
// the CRC field) parses with no error.
package mpa
