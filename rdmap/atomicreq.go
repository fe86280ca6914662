package rdmap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// AtomicRequestLen is the length of the Atomic Operation Request Header:
// "The RDMAP header for Atomic Request messages is 52 bytes long as
// specified in Figure 4" (RFC 7306 §4).
const AtomicRequestLen = 52

// AtomicOp is the 4-bit Atomic Operation Code (AOpCode) of an Atomic
// Operation Request, RFC 7306 §5.2.1 Figure 5 and the "RDMAP Message
// Atomic Operation Subcodes" registry of §10.1.
type AtomicOp uint8

// The Atomic Operation Codes of RFC 7306 Figure 5. 0001b is reserved;
// "All Atomic Operation Codes from Figure 5 MUST be implemented by an
// RNIC that supports Atomic Operations": both are.
const (
	FetchAdd AtomicOp = 0x0 // FetchAdd, §5.1.1: Add Data and Add Mask
	CmpSwap  AtomicOp = 0x2 // CmpSwap, §5.1.2: Swap Data and Mask, Compare Data and Mask
)

func (o AtomicOp) String() string {
	switch o {
	case FetchAdd:
		return "FetchAdd"
	case CmpSwap:
		return "CmpSwap"
	}
	return fmt.Sprintf("reserved AOpCode %#x", uint8(o))
}

// Supported reports whether o is one of Figure 5's operations.
func (o AtomicOp) Supported() bool { return o == FetchAdd || o == CmpSwap }

// AtomicRequest is the Atomic Operation Request Header, RFC 7306 §5.2.1
// Figure 4. It immediately follows the untagged DDP header (QN 1, opcode
// 1010b).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Reserved (Not Used)              |AOpCode|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Request Identifier                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Remote STag                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Remote Tagged Offset                     |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Add or Swap Data                        |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Add or Swap Mask                        |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Compare Data                          |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Compare Mask                          |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// "Reserved (Not Used): 28 bits. This field is set to zero on transmit,
// ignored on receive." Every field is big-endian on the wire ("The fields
// are in big-endian format on the wire", §5.1.1).
type AtomicRequest struct {
	Op          AtomicOp
	ReqID       uint32 // Request Identifier, chosen by the sender and reflected in the Response
	STag        uint32 // Remote STag
	TO          uint64 // Remote Tagged Offset: a 64-bit aligned ULP Buffer address
	AddSwapData uint64 // Add Data (FetchAdd) or Swap Data (CmpSwap)
	AddSwapMask uint64 // Add Mask (FetchAdd) or Swap Mask (CmpSwap)
	CompareData uint64 // Compare Data (CmpSwap; zero for FetchAdd)
	CompareMask uint64 // Compare Mask (CmpSwap; all ones for FetchAdd)
}

// ErrShortAtomicRequest is returned for fewer than AtomicRequestLen octets.
var ErrShortAtomicRequest = errors.New("rdmap: Atomic Operation Request Header shorter than 52 octets")

// Len returns AtomicRequestLen.
func (r *AtomicRequest) Len() int { return AtomicRequestLen }

// Append appends the wire form of r to b, the Reserved bits zero.
func (r *AtomicRequest) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(r.Op&0x0f))
	b = binary.BigEndian.AppendUint32(b, r.ReqID)
	b = binary.BigEndian.AppendUint32(b, r.STag)
	b = binary.BigEndian.AppendUint64(b, r.TO)
	b = binary.BigEndian.AppendUint64(b, r.AddSwapData)
	b = binary.BigEndian.AppendUint64(b, r.AddSwapMask)
	b = binary.BigEndian.AppendUint64(b, r.CompareData)
	return binary.BigEndian.AppendUint64(b, r.CompareMask)
}

// ParseAtomicRequest decodes an Atomic Operation Request Header. The
// Reserved bits are ignored; an AOpCode Figure 5 does not define is
// returned as it is (the caller answers it: §5.2.1 item 4).
func ParseAtomicRequest(b []byte) (AtomicRequest, int, error) {
	if len(b) < AtomicRequestLen {
		return AtomicRequest{}, 0, ErrShortAtomicRequest
	}
	return AtomicRequest{
		Op:          AtomicOp(b[3] & 0x0f),
		ReqID:       binary.BigEndian.Uint32(b[4:8]),
		STag:        binary.BigEndian.Uint32(b[8:12]),
		TO:          binary.BigEndian.Uint64(b[12:20]),
		AddSwapData: binary.BigEndian.Uint64(b[20:28]),
		AddSwapMask: binary.BigEndian.Uint64(b[28:36]),
		CompareData: binary.BigEndian.Uint64(b[36:44]),
		CompareMask: binary.BigEndian.Uint64(b[44:52]),
	}, AtomicRequestLen, nil
}

// Apply computes the operation on the Original Remote Data Value orig:
// the value the target holds afterwards, and whether the operation
// writes it (a CmpSwap whose comparison fails does not).
//
// FetchAdd (§5.1.1): "perform the FetchAdd operation on multiple fields
// of selectable length specified by 64-bit "Add Mask" ... A bit set in
// the Add Mask field specifies the field boundary; for each field, a bit
// is set at the most significant bit position for each field, causing
// any carry out of that bit position to be discarded when the addition
// is performed." "The setting of the Add Mask field to 0x0000000000000000
// results in Atomic Add of 64-bit Original Remote Data Value and 64-bit
// "Add Data"." The bit loop of the RFC's pseudocode is computed at once:
// adding the operands with the fields' top bits cleared leaves each
// field's carry-in at its top bit and carries nothing out of it; the top
// bit is then the sum modulo 2 of its two bits and that carry.
//
// CmpSwap (§5.1.2): "if (!((Compare Data ^ Original Remote Data Value) &
// Compare Mask)) then Remote Data Value = (Original Remote Data Value &
// ~(Swap Mask)) | (Swap Data & Swap Mask) else Remote Data Value =
// Original Remote Data Value".
func (r *AtomicRequest) Apply(orig uint64) (uint64, bool) {
	switch r.Op {
	case FetchAdd:
		m := r.AddSwapMask
		s := (orig &^ m) + (r.AddSwapData &^ m)
		return s ^ ((orig ^ r.AddSwapData) & m), true
	case CmpSwap:
		if (r.CompareData^orig)&r.CompareMask != 0 {
			return orig, false
		}
		return orig&^r.AddSwapMask | r.AddSwapData&r.AddSwapMask, true
	}
	return orig, false
}
