package sctpddp

// Framing of RFC 5043's Payload Data Chunks on a WebRTC data channel.
//
// A data channel carries whole messages, as an SCTP stream does, and each
// message here is exactly the user data of one of RFC 5043's chunks: a
// DDP-SSN followed by a DDP Segment (§5.2.2), or a DDP-SSN followed by a
// DDP Stream Session Control message (§5.2.3). What the data channel does
// not carry is the PPID that tells the two apart (§5.2: "The SCTP Payload
// Protocol Identifier (PPID) field of the Data Chunk is used to
// differentiate between the two types"): the browser sends every binary
// message with the WebRTC Binary PPID (53, RFC 8831 §8) and offers no way
// to choose another. So the receiver recovers the PPID from the message
// itself, from its third octet:
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
// Version is not 01b (DataChannelStream refuses to), since one with a zero
// control octet would be taken for session control.

// dataChannelKindOffset is the octet that tells a DDP Segment Chunk from a
// DDP Stream Session Control message: the first octet after the DDP-SSN.
const dataChannelKindOffset = SSNLen

// ddpVersionMask and ddpVersion1 are the DV field of the DDP Control Field
// and its only valid value (RFC 5041 §4.1).
const (
	ddpVersionMask = 0x03
	ddpVersion1    = 0x01
)

// DataChannelPPID returns the PPID RFC 5043 §5.2 would have given msg, a
// message received on a DDP data channel: PPIDSessionControl if its third
// octet is 0x00 (the high octet of a Function Code), PPIDSegment
// otherwise (a DDP Control Field). See the framing notes in this file's
// source and on DataChannelStream.
func DataChannelPPID(msg []byte) PPID {
	if len(msg) > dataChannelKindOffset && msg[dataChannelKindOffset] == 0 {
		return PPIDSessionControl
	}
	return PPIDSegment
}

// validDataChannelSegment reports whether a DDP Segment starting with the
// DDP Control Field control can be sent on a data channel: its DDP Version
// must be 01b, so that the receiver cannot take it for session control.
func validDataChannelSegment(control byte) bool {
	return control&ddpVersionMask == ddpVersion1
}
