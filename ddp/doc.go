// Package ddp implements the Direct Data Placement protocol, RFC 5041:
// the DDP headers, segmentation at the Data Source, and placement and
// delivery at the Data Sink. It knows no transport; a lower layer protocol
// (package mpa for TCP, package sctpddp for SCTP and WebRTC data channels,
// or a test pipe) drives it through a small contract.
//
// # What is where
//
//   - header.go: the DDP Control Field (§4.1) and the Tagged (§4.2) and
//     Untagged (§4.3) Buffer Model headers, as byte-slice views and as a
//     decoded Header with Append/ParseHeader.
//   - send.go: the LLP contract for sending (MULPDU and a gather write of
//     one segment) and the Sender, which segments messages (§5.2) and
//     numbers untagged messages per queue from MSN one (§4.3).
//   - stream.go: the Stream, which checks every incoming segment as §7.1
//     requires, reporting the exact Error Type and Error Code of §7.2,
//     places it, and delivers whole messages in order (§5.3, §5.4).
//   - target.go: Target, the window of registered memory into which an LLP
//     writes one segment's payload, with no intermediate copy.
//   - enhanced.go: the enhanced RDMA connection establishment data of
//     RFC 6581 §9 (IRD, ORD, connection model, RTR flags), which both
//     lower layers carry in their set-up's Private Data: one codec for
//     MPA's Request and Reply Frames and DDP over SCTP's Enhanced Session
//     Control messages.
//
// # The contract with a lower layer
//
// Sending: the ULP calls Sender.SendTagged or SendUntagged with a scatter
// list of registered memory; the Sender calls LLP.WriteSegment once per
// segment with the encoded header and slices of that memory, which the LLP
// writes as one gather write (writev) without copying the payload.
//
// Receiving: the LLP reads a segment's DDP header, calls Stream.Begin with
// the header, the payload length and the segment's sequence number on the
// stream, gets a Target, reads the payload straight into it (from the TCP
// socket, computing its CRC on the way, or from an SCTP message), and calls
// Stream.End. LLPs that hold a whole segment in memory call Receive.
// Errors the LLP detects itself go to Stream.Fail.
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
//     since a zero-length message still consumes a buffer (RFC 5040 §5.3).
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
