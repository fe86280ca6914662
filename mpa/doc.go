// Package mpa is the wire side of MPA, Marker PDU Aligned Framing for TCP
// (RFC 5044), with the enhanced connection setup of RFC 6581: the lower
// layer protocol that carries DDP segments (RFC 5041) over a TCP byte
// stream.
//
// What it implements:
//
//   - RFC 5044 §7.1.1 and RFC 6581 §6: the MPA Request and Reply Frames
//     (Frame, ParseFrame, ReadFrame), with the M, C, R and S bits, Rev 1
//     and 2, and up to 512 octets of Private Data; Negotiate turns a
//     Request and a Reply into the Options of each half connection.
//   - RFC 6581 §9: the enhanced RDMA connection establishment data at the
//     start of the Private Data: IRD, ORD, the peer-to-peer bit and the
//     three RTR indication bits (EnhancedData).
//   - RFC 5044 §4.1: the FPDU: ULPDU_Length, ULPDU, PAD, CRC.
//   - RFC 5044 §4.2-4.3: Markers every 512 octets of the stream, counted
//     from the first octet of Full Operation, with FPDUPTR pointing back
//     at the ULPDU_Length field, 0x0000 for a Marker between FPDUs.
//   - RFC 5044 §4.4: CRC32c as iSCSI computes it, over the ULPDU_Length
//     field, the ULPDU, the PAD and every Marker of the FPDU, including a
//     Marker just before the ULPDU_Length field and one just before the
//     CRC field. The CRC field is sent least significant octet first, as
//     RFC 5044 Figures 5 and 6 show.
//   - RFC 5044 §4.5: MULPDU from the EMSS.
//   - RFC 5044 §6 and §8: FPDU identification by ULPDU_Length, CRC and
//     Marker checks, errors as term.Error with MPA's codes.
//
// The codecs (Frame, EnhancedData, Marker, AppendFPDU, ParseFPDU) work on
// byte slices. Writer and Reader are the streaming forms over a TCP
// connection: Writer sends each FPDU as one gather write without copying
// the payload; Reader reads each ULPDU straight into the caller's memory,
// stripping Markers and computing the CRC on the way. Neither allocates
// per FPDU.
//
// The connection (dial.go, conn.go) runs the Startup Phase (who sends
// which frame when, the timeouts, Rule 4 of §7.1.2 that the Responder
// receives an FPDU before it sends one, the RTR indication and IRD/ORD
// negotiation of RFC 6581) and then Full Operation for a ddp.Endpoint
// (an rdmap queue pair): Dial, Listen, Listener.Accept, Request.Accept
// or Reject, optionally over TLS.
//
// # Concurrency in Full Operation
//
//   - Sending: the DDP Sender's segments are written by whichever
//     goroutine holds the send side (Conn.WriteSegment): the endpoint's
//     send goroutine, a posting goroutine when the send queue is idle,
//     or the receive side answering an RDMA Read (Conn.BeginNoWait: a
//     writev(2) that never waits for socket space, trywrite_linux.go;
//     what the socket does not take is copied aside and written by the
//     connection's flusher goroutine or the next send). Between

//     PostBatch) whole messages wait in the Writer's gather list too and
//     leave together, up to 16 FPDUs per writev(2).
//   - Receiving (receive.go): one goroutine at a time holds the receive
//     token and reads FPDUs into registered memory: the connection's
//     receive goroutine, or a goroutine waiting on a completion queue
//     that only this connection's receives fill (Conn.Poll, ddp.Poller),
//     so that the network wakes the waiter directly. A waiter only starts
//     FPDUs already whole in its buffer; the receive goroutine takes the
//     token back after a lease in which the waiter did not come back,
//     interrupting a read the waiter is blocked in.
//
// Choices and known deviations:
//
//   - A Reader puts ULPDU octets into the caller's buffer before the CRC
//     at the end of the FPDU has been checked; RFC 5044 §6 says "An MPA
//     receiver MUST first verify the FPDU before passing the ULPDU to
//     DDP". The octets count as passed only when Finish returns nil: the
//     caller may place them but must not deliver them before. Linux siw
//     and iWARP hardware place before the CRC check in the same way.
//   - An ULPDU_Length below 14 (MinULPDU, the shortest DDP header) or
//     above Options.MaxULPDU is reported as term.MPAInvalidFrame (code 4,
//     whose registered name speaks of startup frames). RFC 5044 §8 has no
//     code for a bad ULPDU_Length; the framing after such a field cannot
//     be trusted, so the Reader stops there instead of reading up to
//     65535 octets to check a CRC.
//   - Markers are checked on every Marker, in order (RFC 5044 §8 makes
//     that optional for in-order reception); a mismatch is reported only
//     if the FPDU's CRC is valid, as §8 code 3 says.
//   - The Reader only reads in order; it does not use Markers to find
//     FPDUs after a gap (§6 methods 2-3 are for optimized MPA/TCP).
//   - A Marker can never fall inside the 2-octet ULPDU_Length field or
//     the CRC field: FPDUs and Markers are multiples of 4 octets and
//     start at SeqStart, so both fields begin 4-aligned.
//   - Rev: Rev 1 and Rev 2 are accepted; any other is an invalid frame.
//     In a Rev 1 frame the S bit is a reserved bit and is ignored.
//   - With CRCs off the Writer sends zero in the CRC field (RFC 5044
//     §4.4 allows generating them anyway; Linux siw sends zero).
//   - The FPDUs of one DDP message, and of a batch (Conn.Hold), leave in
//     one gather write, so TCP, not MPA, cuts them into segments. A run
//     of small FPDUs (RDMA Read Requests, short Sends) then shares a
//     segment, as §5.1 allows ("Multiple FPDUs MAY be packed into a
//     single TCP segment ... as long as they are entirely contained in
//     the TCP segment"); a write longer than the EMSS loses the FPDU
//     Alignment that §5.1 asks for with a SHOULD after its first
//     segment. Receivers "MUST NOT depend on FPDU Alignment" (Appendix
//     A). With Markers every FPDU is written on its own.
//
// Independent checks (see tshark_test.go, tshark_live_test.go and
// capture_test.go): Wireshark 4.0's dissector finds every FPDU this
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
