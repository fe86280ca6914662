package wire

import "errors"

// Errors of the RFC 5043 codecs. RFC 5043 defines no
// Terminate error codes of its own (RFC 6581 §8: "[RFC5043] does not define
// any"), so malformed RFC 5043 framing is reported with these errors; where
// RFC 6581 assigns a Terminate triple (IRD/ORD negotiation), the error is a
// *term.Error.
//
// Decoders wrap these with details; test with errors.Is.
var (
	// ErrTruncated: the message is shorter than its fixed part.
	ErrTruncated = errors.New("sctpddp: truncated message")
	// ErrUnknownFunctionCode: a DDP Stream Session Control message with a
	// Function Code that neither RFC 5043 nor RFC 6581 defines.
	ErrUnknownFunctionCode = errors.New("sctpddp: unknown DDP Stream Session Control function code")
	// ErrPrivateDataTooLong: more than 512 bytes of Private Data.
	ErrPrivateDataTooLong = errors.New("sctpddp: private data longer than 512 bytes")
	// ErrPrivateDataInTerminate: a DDP Stream Session Terminate that carries
	// Private Data.
	ErrPrivateDataInTerminate = errors.New("sctpddp: private data in DDP Stream Session Terminate")
	// ErrInvalidIRDORD: an IRD or ORD that does not fit in 14 bits, or RTR
	// flags set without the peer-to-peer flag.
	ErrInvalidIRDORD = errors.New("sctpddp: invalid enhanced connection establishment data")
	// ErrSegmentTooLarge: a DDP Segment larger than the MULPDU.
	ErrSegmentTooLarge = errors.New("sctpddp: DDP segment larger than MULPDU")
	// ErrUnexpectedPPID: an SCTP message whose PPID is neither 16 nor 17.
	ErrUnexpectedPPID = errors.New("sctpddp: payload protocol identifier is not 16 or 17")
	// ErrDataChannelFraming: a DDP Segment whose DDP Version is not 01b,
	// which a data channel's receiver could not tell from session control
	// (DataChannelFramable).
	ErrDataChannelFraming = errors.New("sctpddp: DDP Segment without DDP Version 01b cannot be framed on a data channel")
)
