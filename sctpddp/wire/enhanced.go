package wire

import (
	"fmt"

	"github.com/iwarpgo/iwarp/ddp"
)

// EnhancedData is the enhanced RDMA connection establishment data of
// RFC 6581 §9, the first 32 bits of the Private Data of the Enhanced DDP
// Stream Session Initiate, Accept and Reject messages (RFC 6581 §7). Its
// codec is shared with MPA, which carries the same four octets
// (ddp.EnhancedData).
type EnhancedData = ddp.EnhancedData

// EnhancedDataLen is the length of the enhanced data of RFC 6581 §9.
const EnhancedDataLen = ddp.EnhancedDataLen

// ParseEnhancedData decodes the first 4 bytes of b. Per RFC 6581 §9.2, "On
// reception, if Control Flag A is set to 0, then Control Flags B, C, and D
// MUST be ignored": they are cleared in the result.
func ParseEnhancedData(b []byte) (EnhancedData, int, error) {
	d, ok := ddp.ParseEnhancedData(b)
	if !ok {
		return d, 0, fmt.Errorf("%w: enhanced connection establishment data of %d bytes, need 4", ErrTruncated, len(b))
	}
	return d, EnhancedDataLen, nil
}
