package mpa

import "github.com/iwarpgo/iwarp/ddp"

// EnhancedData is the enhanced RDMA connection establishment data that
// begins the Private Data of an MPA Request or Reply Frame with the S bit
// set (RFC 6581 §9). Its codec is shared with DDP over SCTP, which carries
// the same four octets (ddp.EnhancedData).
type EnhancedData = ddp.EnhancedData

// EnhancedDataLen is the length of the enhanced data (RFC 6581 §9): "The
// maximum amount of ULP-specified Private Data is therefore reduced by 4
// bytes."
const EnhancedDataLen = ddp.EnhancedDataLen

// ParseEnhancedData decodes the enhanced data at the start of b (normally
// a frame's PrivateData) and returns it with the number of octets it took.
// "On reception, if Control Flag A is set to 0, then Control Flags B, C,
// and D MUST be ignored." (RFC 6581 §9.2): they are reported as false.
// A b shorter than EnhancedDataLen gives an error wrapping
// term.MPAInvalidFrame and ErrShortFrame.
func ParseEnhancedData(b []byte) (EnhancedData, int, error) {
	e, ok := ddp.ParseEnhancedData(b)
	if !ok {
		return e, 0, shortFrame("enhanced connection data: %d of %d octets", len(b), EnhancedDataLen)
	}
	return e, EnhancedDataLen, nil
}
