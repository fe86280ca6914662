package ddp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// EnhancedDataLen is the length of the enhanced RDMA connection
// establishment data (RFC 6581 §9): "The maximum amount of ULP-specified
// Private Data is therefore reduced by 4 bytes."
const EnhancedDataLen = 4

// IRDORDNoNegotiation is the all-ones IRD or ORD: "An all ones value
// (0x3FFF) indicates that automatic negotiation of the IRD or ORD is not
// desired, and that the ULP will be responsible for it." (RFC 6581 §9.1)
// It is also the largest value the 14-bit fields hold.
const IRDORDNoNegotiation = 0x3fff

// Bits of the two 16-bit words.
const (
	enhA    = 0x8000 // first word: connection model (peer-to-peer)
	enhB    = 0x4000 // first word: zero-length Send RTR
	enhC    = 0x8000 // second word: zero-length RDMA Write RTR
	enhD    = 0x4000 // second word: zero-length RDMA Read RTR
	enhMask = 0x3fff // IRD, ORD
)

// ErrEnhancedData reports enhanced connection establishment data that
// must not be sent (EnhancedData.Validate).
var ErrEnhancedData = errors.New("invalid enhanced connection establishment data")

// EnhancedData is the enhanced RDMA connection establishment data of
// RFC 6581 §9, which both lower layers carry at the start of their
// connection set-up's Private Data: MPA in its Request and Reply Frames
// with the Enhanced bit (RFC 6581 §5), DDP over SCTP in its Enhanced DDP
// Stream Session Initiate, Accept and Reject (RFC 6581 §7). "Note that
// this field MUST be sent in network byte order, with the IRD and ORD
// encoded as 14-bit unsigned integers."
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|B|        IRD                |C|D|        ORD                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type EnhancedData struct {
	// PeerToPeer is Control Flag A: 1 for the peer-to-peer connection
	// model, 0 for client-server (RFC 6581 §9.2).
	PeerToPeer bool
	// SendRTR is Control Flag B: a zero-length FULPDU (Send) RTR
	// indication is requested (Request) or supported (Reply).
	SendRTR bool
	// WriteRTR is Control Flag C: a zero-length RDMA Write RTR indication.
	WriteRTR bool
	// ReadRTR is Control Flag D: a zero-length RDMA Read RTR indication.
	ReadRTR bool
	// IRD is the Inbound RDMA Read Queue Depth, 14 bits.
	IRD uint16
	// ORD is the Outbound RDMA Read Queue Depth, 14 bits.
	ORD uint16
}

// Len returns EnhancedDataLen.
func (e EnhancedData) Len() int { return EnhancedDataLen }

// Validate reports whether e can be sent as it is: IRD and ORD fit in 14
// bits and, "If Control Flag A is set to 0, then Control Flags B, C, and D
// MUST also be set to 0." (RFC 6581 §9.2). The error wraps
// ErrEnhancedData.
func (e EnhancedData) Validate() error {
	if e.IRD > IRDORDNoNegotiation || e.ORD > IRDORDNoNegotiation {
		return fmt.Errorf("%w: IRD %d / ORD %d do not fit in 14 bits", ErrEnhancedData, e.IRD, e.ORD)
	}
	if !e.PeerToPeer && e.AnyRTR() {
		return fmt.Errorf("%w: RTR flags B, C, D set without the peer-to-peer flag A", ErrEnhancedData)
	}
	return nil
}

// Append appends the encoded data to b. IRD and ORD are truncated to 14
// bits, and when PeerToPeer is false the RTR flags are sent as zero, as
// RFC 6581 §9.2 requires; Validate reports both.
func (e EnhancedData) Append(b []byte) []byte {
	w1 := e.IRD & enhMask
	w2 := e.ORD & enhMask
	if e.PeerToPeer {
		w1 |= enhA
		if e.SendRTR {
			w1 |= enhB
		}
		if e.WriteRTR {
			w2 |= enhC
		}
		if e.ReadRTR {
			w2 |= enhD
		}
	}
	b = binary.BigEndian.AppendUint16(b, w1)
	return binary.BigEndian.AppendUint16(b, w2)
}

// ParseEnhancedData decodes the enhanced data at the start of b; ok is
// false when b is shorter than EnhancedDataLen. "On reception, if Control
// Flag A is set to 0, then Control Flags B, C, and D MUST be ignored."
// (RFC 6581 §9.2): they are reported as false.
func ParseEnhancedData(b []byte) (e EnhancedData, ok bool) {
	if len(b) < EnhancedDataLen {
		return e, false
	}
	w1 := binary.BigEndian.Uint16(b[0:2])
	w2 := binary.BigEndian.Uint16(b[2:4])
	e.IRD = w1 & enhMask
	e.ORD = w2 & enhMask
	e.PeerToPeer = w1&enhA != 0
	if e.PeerToPeer {
		e.SendRTR = w1&enhB != 0
		e.WriteRTR = w2&enhC != 0
		e.ReadRTR = w2&enhD != 0
	}
	return e, true
}

// AnyRTR reports whether at least one RTR indication flag is set.
func (e EnhancedData) AnyRTR() bool { return e.SendRTR || e.WriteRTR || e.ReadRTR }

func (e EnhancedData) String() string {
	return fmt.Sprintf("EnhancedData{P2P:%t SendRTR:%t WriteRTR:%t ReadRTR:%t IRD:%d ORD:%d}",
		e.PeerToPeer, e.SendRTR, e.WriteRTR, e.ReadRTR, e.IRD, e.ORD)
}
