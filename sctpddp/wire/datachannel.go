package wire

import "github.com/iwarpgo/iwarp/ddp"

// DataChannelProtocol is the subprotocol string (RFC 8832's DCEP Protocol
// field, RTCDataChannelInit.protocol) that marks a WebRTC data channel as a
// DDP stream carrying RFC 5043's chunks.
const DataChannelProtocol = "iwarp-ddp"

// MaxDataChannelMULPDU is the largest DDP Segment a data channel carries:
// a 64 KiB message (pion's default largest SCTP message, and well below
// Chromium's 256 KiB) less the DDP-SSN.
const MaxDataChannelMULPDU = 64<<10 - SSNLen

// dataChannelKindOffset is the octet that tells a DDP Segment Chunk from a
// DDP Stream Session Control message: the first octet after the DDP-SSN.
const dataChannelKindOffset = SSNLen

// DataChannelPPID returns the PPID RFC 5043 §5.2 would have given msg, a
// message received on a DDP data channel: PPIDSessionControl if its third
// octet is 0x00 (the high octet of a Function Code), PPIDSegment
// otherwise (a DDP Control Field). See the package documentation.
func DataChannelPPID(msg []byte) PPID {
	if len(msg) > dataChannelKindOffset && msg[dataChannelKindOffset] == 0 {
		return PPIDSessionControl
	}
	return PPIDSegment
}

// DataChannelFramable reports whether the DDP Segment that starts with
// the DDP Header hdr can be sent on a data channel: its DDP Control Field's
// DDP Version must be 01b (RFC 5041 §4.1: "MUST be set to 01b"), so that
// the receiver cannot take it for session control.
func DataChannelFramable(hdr []byte) bool {
	return len(hdr) > 0 && ddp.Control(hdr[0]).DV() == ddp.Version
}
