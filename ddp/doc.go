// Package ddp implements the Direct Data Placement protocol, RFC 5041:
// the DDP headers, segmentation at the Data Source, and placement and
// delivery at the Data Sink. It knows no transport; a lower layer protocol
// (package mpa for TCP, package sctpddp for SCTP and WebRTC data channels,
// or a test pipe) drives it through a small contract.
//
// The package is for the authors of a transport (a lower layer protocol,
// LLP) and of an upper layer (a ULP: package rdmap); programs use rdmap's
// verbs and never call it. The two meet through two interfaces:
//
//	// The transport's side, which the ULP's Sender writes through:
//	type LLP interface {
//		MULPDU() int                                     // largest segment
//		WriteSegment(hdr []byte, payload [][]byte) error // one segment
//		Flush() error                                    // all written
//	}
//	// The ULP's side, which the transport starts and feeds:
//	type Endpoint interface {
//		Stream() *Stream
//		ReadLimits() (ird, ord int)
//		SetORD(ord int) error
//		Start(llp LLP, how Start) error
//		Terminated() <-chan struct{}
//	}
//
// A transport may offer two more (llp.go): NowWriter, a segment written
// from the receive side when it needs no wait, and Poller, its receive
// work done by the goroutine waiting for it. Package mpa over plain TCP
// offers both; each saves a goroutine wake-up per round trip.
//
// Sending: the ULP calls Sender.SendTagged or SendUntagged with a scatter
// list of registered memory; the Sender segments the message to the
// MULPDU (§5.2), numbers untagged messages per queue from MSN one (§4.3)
// and calls LLP.WriteSegment once per segment with the encoded header and
// slices of that memory. The LLP may keep the payload slices to write many
// segments in one gather write (writev) at Flush, without copying.
//
// Receiving: the LLP verifies each segment's framing first (MPA's CRC and
// Markers, SCTP's own checks) and only then hands the whole segment to
// Stream.Receive with its sequence number on the stream; the Stream checks
// it as §7.1 requires, reporting the exact Error Type and Error Code of
// §7.2, places it and delivers whole messages in order (§5.3, §5.4).
// Errors the LLP finds itself go to Stream.Fail or FailSegment, the end of
// the LLP stream to Stream.Close (ErrDisconnected for an orderly close,
// Lost for anything else). Endpoint.Start says how the stream starts: the
// RTR indication to send first and whether the LLP must receive before it
// sends (RFC 6581 §9.2, RFC 5044 §7.1.2).
//
// Offer, Answer and Settle are RFC 6581 §9's IRD, ORD and RTR
// negotiation, once for both transports (MPA's Request and Reply Frames,
// DDP over SCTP's Enhanced Initiate and Accept); EnhancedData is its
// codec.
//
// Placement and delivery are separate: segments may arrive in any order
// within the stream's window and are placed at once; a message is
// delivered only when all its segments and all earlier ones are placed
// (RFC 5041 §5.4), whatever order they arrived in. Untagged buffers are
// consumed in posting order: the first buffer posted to a queue takes MSN
// one.
//
// # Choices where the RFC leaves room
//
//   - RFC 5041 §7.1 check 2 (no buffer) and check 5 (MSN range) both fail
//     for an MSN without a posted buffer. This package reports "no buffer
//     available" (0x2/0x02) for an MSN a buffer could still be posted for
//     (less than QueueDepth ahead of the oldest posted buffer's MSN) and
//     "MSN range is not valid" (0x2/0x03) for one already consumed or
//     further ahead.
//   - Untagged checks 1, 2 and 5 are made for zero-length segments too,
//     since a zero-length message still consumes a buffer (RFC 5040 §5.3),
//     and so is a weaker check 3: a zero-length segment's MO may not lie
//     beyond its buffer (Invalid MO, 0x2/0x04), since it ends a message
//     MO octets long, which the ULP reads out of that buffer.
//   - A segment's tagged or untagged fields are checked before the ULP's
//     (RFC 5040 §7.2 lists DDP's checks first), except that for a tagged
//     segment the ULP's opcode check comes before the STag lookup, since
//     which rights the STag needs depends on the opcode.
//   - Buffer rights: an STag whose rights do not allow the placement is
//     reported as Invalid STag (0x1/0x00); RFC 5041 has no code for access
//     rights (Linux siw reports Base or bounds violation instead).
//
// Nothing in this package is OS-specific: it compiles for js/wasm.
package ddp
