package mpa

import (
	"encoding/binary"
	"fmt"
)

// EnhancedDataLen is the length of the enhanced RDMA connection
// establishment data (RFC 6581 §9): "The maximum amount of ULP-specified
// Private Data is therefore reduced by 4 bytes."
const EnhancedDataLen = 4

// IRDORDAuto is the all-ones IRD or ORD value: "An all ones value (0x3FFF)
// indicates that automatic negotiation of the IRD or ORD is not desired,
// and that the ULP will be responsible for it." (RFC 6581 §9.1)
const IRDORDAuto = 0x3fff

// MaxIRDORD is the largest IRD or ORD: both are 14-bit unsigned integers.
const MaxIRDORD = 0x3fff

// Bits of the two 16-bit words.
const (
	enhA       = 0x8000 // first word: connection model (peer-to-peer)
	enhB       = 0x4000 // first word: zero-length Send RTR
	enhC       = 0x8000 // second word: zero-length RDMA Write RTR
	enhD       = 0x4000 // second word: zero-length RDMA Read RTR
	enhIRDMask = 0x3fff
)

// EnhancedData is the enhanced RDMA connection establishment data that
// begins the Private Data of an MPA Request or Reply Frame with the S bit
// set (RFC 6581 §9), sent in network byte order:
//
//	    0                   1                   2                   3
//	    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	0  |A|B|        IRD                |C|D|        ORD                |
//	4  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
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
func (e *EnhancedData) Len() int { return EnhancedDataLen }

// Append appends the encoded data to b. IRD and ORD are truncated to 14
// bits. When PeerToPeer is false the RTR flags are sent as zero: "If
// Control Flag A is set to 0, then Control Flags B, C, and D MUST also be
// set to 0." (RFC 6581 §9.2)
func (e *EnhancedData) Append(b []byte) []byte {
	w1 := e.IRD & enhIRDMask
	w2 := e.ORD & enhIRDMask
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

// ParseEnhancedData decodes the enhanced data at the start of b (normally
// a frame's PrivateData) and returns it with the number of octets it took.
// "On reception, if Control Flag A is set to 0, then Control Flags B, C,
// and D MUST be ignored." (RFC 6581 §9.2): they are reported as false.
// A b shorter than EnhancedDataLen gives an error wrapping
// term.MPAInvalidFrame and ErrShortFrame.
func ParseEnhancedData(b []byte) (EnhancedData, int, error) {
	var e EnhancedData
	if len(b) < EnhancedDataLen {
		return e, 0, shortFrame("enhanced connection data: %d of %d octets", len(b), EnhancedDataLen)
	}
	w1 := binary.BigEndian.Uint16(b[0:2])
	w2 := binary.BigEndian.Uint16(b[2:4])
	e.IRD = w1 & enhIRDMask
	e.ORD = w2 & enhIRDMask
	e.PeerToPeer = w1&enhA != 0
	if e.PeerToPeer {
		e.SendRTR = w1&enhB != 0
		e.WriteRTR = w2&enhC != 0
		e.ReadRTR = w2&enhD != 0
	}
	return e, EnhancedDataLen, nil
}

// AnyRTR reports whether at least one RTR indication flag is set.
func (e *EnhancedData) AnyRTR() bool { return e.SendRTR || e.WriteRTR || e.ReadRTR }

func (e EnhancedData) String() string {
	return fmt.Sprintf("EnhancedData{P2P:%t SendRTR:%t WriteRTR:%t ReadRTR:%t IRD:%d ORD:%d}",
		e.PeerToPeer, e.SendRTR, e.WriteRTR, e.ReadRTR, e.IRD, e.ORD)
}
