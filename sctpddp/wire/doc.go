// Package wire encodes and decodes what DDP over SCTP (RFC 5043) puts in
// an SCTP DATA chunk, so that a DDP stream's messages can be written,
// read, numbered and checked without an SCTP association: by package
// sctpddp's sessions, by the browser peer over a WebRTC data channel, and
// by tools that read captures.
//
// Each SCTP message carries one of two Payload Data Chunks, told apart by
// the chunk's PPID: a DDP Segment Chunk (a DDP-SSN, then a DDP Segment) or
// a DDP Stream Session Control message (a DDP-SSN, a Function Code and
// Private Data). For example, the first DDP Segment after a session's
// Initiate, and the Terminate that ends the session:
//
//	seg := wire.SegmentChunk{SSN: 1, Segment: hdrAndPayload}.Append(nil) // PPID 16
//	end := wire.SessionControl{SSN: 2, Function: wire.FunctionTerminate}
//	msg := end.Append(nil) // PPID 17
//
//	c, _, err := wire.ParseSegmentChunk(seg) // c.Segment aliases seg
//	m, _, err := wire.ParseSessionControl(msg)
//
// It is pure: no goroutines, no timers, no connection state, no import of
// pion, and it builds for every GOOS, js/wasm included.
//
//   - PPIDs 16 and 17 and the DDP Adaptation Indication (RFC 5043 §5.1,
//     §5.2, §12): PPIDSegment, PPIDSessionControl, AdaptationIndicationDDP.
//   - The DDP-SSN (§5.2.1) with the serial-number arithmetic and in-flight
//     limit of §10: SSN, MaxInFlight, SSN.InWindow, CanSend.
//   - The DDP Segment Chunk (§5.2.2): SegmentChunk, ParseSegmentChunk,
//     AppendSegmentv for a segment given as its header and payload slices.
//   - DDP Stream Session Control (§5.2.3) with RFC 5043's four function
//     codes and RFC 6581 §7's three enhanced ones, whose Private Data starts
//     with the IRD/ORD field of RFC 6581 §9: SessionControl,
//     ParseSessionControl, EnhancedData.
//   - The maximum DDP Segment size reported to DDP (§9): MULPDUForMTU,
//     CheckSegmentSize.
//   - The same chunks on a WebRTC data channel, whose messages carry no
//     PPID of their own (DataChannelPPID, below).
//
// Encoders are Append(b []byte) []byte with Len(); decoders are
// ParseX(b []byte) (X, int, error) and never panic. A decoded message
// aliases the buffer it was parsed from. Neither message type has a length
// field: one SCTP message is one chunk, and the message boundary ends it.
//
// # Data channels: the PPID implied by the content
//
// A WebRTC data channel carries whole messages, as an SCTP stream does,
// and each message on a DDP data channel (one whose DCEP protocol is
// DataChannelProtocol) is exactly the user data of one of RFC 5043's
// chunks. What the channel does not carry is the PPID that tells the two
// apart (§5.2: "The SCTP Payload Protocol Identifier (PPID) field of the
// Data Chunk is used to differentiate between the two types"): a browser
// sends every binary message with the WebRTC Binary PPID (53, RFC 8831 §8)
// and offers no way to choose another. So the receiver recovers the PPID
// from the message's third octet (DataChannelPPID):
//
//   - In a DDP Stream Session Control message the third and fourth octets
//     are the 16-bit Function Code, whose defined values are 1 to 7 (RFC
//     5043 §5.2.3, RFC 6581 §7): the high octet is 0x00.
//   - In a DDP Segment Chunk the third octet is the first octet of the DDP
//     Header, the DDP Control Field (RFC 5041 §4.1): T, L, four reserved
//     bits and the 2-bit DDP Version, which "MUST be set to 01b" (RFC 5041
//     §4.1). That octet is never 0x00.
//
// Every message whose third octet is 0x00 is therefore session control,
// and every other one a DDP Segment Chunk. A session control message with
// an undefined Function Code whose high octet is not zero (0xFFFF, RFC
// 6580's experimental value, for one) reads as a DDP Segment with a DDP
// Version other than 01b, which DDP rejects; a message too short to have a
// third octet reads as a DDP Segment Chunk, which ParseSegmentChunk
// rejects as truncated. A sender must not send a DDP Segment whose DDP
// Version is not 01b (DataChannelFramable, ErrDataChannelFraming), since
// one with a zero control octet would be taken for session control.
//
// # Readings of the RFCs
//
//   - RFC 6581 §7 places the IRD/ORD field in the enhanced Initiate and
//     Accept; this package also carries it in the Enhanced Reject, since
//     §9.1 and §9.2 have the reject convey the responder's IRD/ORD and RTR
//     options (see FunctionCode.Enhanced).
//   - The function code 0xFFFF (RFC 6580, experimental) is rejected like an
//     unassigned code.
package wire
