package sctpddp

import (
	"encoding/binary"
	"fmt"
)

// EnhancedDataLen is the length of the enhanced RDMA connection
// establishment data of RFC 6581 §9.
const EnhancedDataLen = 4

// IRDORDNoNegotiation is the all-ones IRD or ORD of RFC 6581 §9.1: "An all
// ones value (0x3FFF) indicates that automatic negotiation of the IRD or
// ORD is not desired, and that the ULP will be responsible for it." It is
// also the largest value the 14-bit fields hold.
const IRDORDNoNegotiation = 0x3FFF

// EnhancedData is the enhanced RDMA connection establishment data of
// RFC 6581 §9, the first 32 bits of the Private Data of the Enhanced DDP
// Stream Session Initiate, Accept and Reject messages (RFC 6581 §7):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|B|        IRD                |C|D|        ORD                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "Note that this field MUST be sent in network byte order, with the IRD
// and ORD encoded as 14-bit unsigned integers."
type EnhancedData struct {
	IRD uint16 // Inbound RDMA Read Queue Depth, 0..0x3FFF
	ORD uint16 // Outbound RDMA Read Queue Depth, 0..0x3FFF

	PeerToPeer bool // A: peer-to-peer connection model (else client-server)
	RTRSend    bool // B: zero-length FULPDU (Send) RTR indication
	RTRWrite   bool // C: zero-length RDMA Write RTR indication
	RTRRead    bool // D: zero-length RDMA Read RTR indication
}

const (
	enhFlagA   = 0x8000
	enhFlagB   = 0x4000
	enhFlagC   = 0x8000
	enhFlagD   = 0x4000
	enhIRDMask = 0x3FFF
)

// Validate reports whether d can be sent: IRD and ORD fit in 14 bits and,
// per RFC 6581 §9.2, "If Control Flag A is set to 0, then Control Flags B,
// C, and D MUST also be set to 0."
func (d EnhancedData) Validate() error {
	if d.IRD > IRDORDNoNegotiation || d.ORD > IRDORDNoNegotiation {
		return fmt.Errorf("%w: IRD %d / ORD %d do not fit in 14 bits", ErrInvalidIRDORD, d.IRD, d.ORD)
	}
	if !d.PeerToPeer && (d.RTRSend || d.RTRWrite || d.RTRRead) {
		return fmt.Errorf("%w: RTR flags B, C, D set without the peer-to-peer flag A", ErrInvalidIRDORD)
	}
	return nil
}

// Len returns EnhancedDataLen.
func (d EnhancedData) Len() int { return EnhancedDataLen }

// Append appends the 4 encoded bytes to b. IRD and ORD are masked to 14
// bits; call Validate first.
func (d EnhancedData) Append(b []byte) []byte {
	w0 := d.IRD & enhIRDMask
	w1 := d.ORD & enhIRDMask
	if d.PeerToPeer {
		w0 |= enhFlagA
	}
	if d.RTRSend {
		w0 |= enhFlagB
	}
	if d.RTRWrite {
		w1 |= enhFlagC
	}
	if d.RTRRead {
		w1 |= enhFlagD
	}
	b = binary.BigEndian.AppendUint16(b, w0)
	return binary.BigEndian.AppendUint16(b, w1)
}

// ParseEnhancedData decodes the first 4 bytes of b. Per RFC 6581 §9.2, "On
// reception, if Control Flag A is set to 0, then Control Flags B, C, and D
// MUST be ignored": they are cleared in the result.
func ParseEnhancedData(b []byte) (EnhancedData, int, error) {
	if len(b) < EnhancedDataLen {
		return EnhancedData{}, 0, fmt.Errorf("%w: enhanced connection establishment data of %d bytes, need 4", ErrTruncated, len(b))
	}
	w0 := binary.BigEndian.Uint16(b)
	w1 := binary.BigEndian.Uint16(b[2:])
	d := EnhancedData{
		IRD:        w0 & enhIRDMask,
		ORD:        w1 & enhIRDMask,
		PeerToPeer: w0&enhFlagA != 0,
	}
	if d.PeerToPeer {
		d.RTRSend = w0&enhFlagB != 0
		d.RTRWrite = w1&enhFlagC != 0
		d.RTRRead = w1&enhFlagD != 0
	}
	return d, EnhancedDataLen, nil
}
