package rdmap

import "fmt"

// Opcode is the RDMAP message opcode, RFC 5040 §4.1 Figure 4 and RFC
// 7306 §4.1 Figure 2.
type Opcode uint8

// The opcodes of RFC 5040 Figure 4 and of RFC 7306 Figure 2 (the IANA
// registry's 0x8-0xB, §10). 1100b to 1111b are reserved.
const (
	OpWrite            Opcode = 0x0
	OpReadRequest      Opcode = 0x1
	OpReadResponse     Opcode = 0x2
	OpSend             Opcode = 0x3
	OpSendInvalidate   Opcode = 0x4
	OpSendSE           Opcode = 0x5
	OpSendSEInvalidate Opcode = 0x6
	OpTerminate        Opcode = 0x7
	OpImmediate        Opcode = 0x8 // RFC 7306: Immediate Data
	OpImmediateSE      Opcode = 0x9 // RFC 7306: Immediate Data with Solicited Event
	OpAtomicRequest    Opcode = 0xa // RFC 7306: Atomic Request
	OpAtomicResponse   Opcode = 0xb // RFC 7306: Atomic Response
)

// The queue numbers RDMAP uses (RFC 5040 Figure 4, RFC 7306 Figure 2 and
// its "RDMAP DDP Untagged Queue Numbers" registry, §10.2).
const (
	QNSend       uint32 = 0 // Send and its variants; Immediate Data
	QNReadReq    uint32 = 1 // RDMA Read Request; Atomic Request
	QNTerminate  uint32 = 2 // Terminate
	QNAtomicResp uint32 = 3 // Atomic Response (RFC 7306 §4)
	NumQueues           = 4
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "RDMA Write"
	case OpReadRequest:
		return "RDMA Read Request"
	case OpReadResponse:
		return "RDMA Read Response"
	case OpSend:
		return "Send"
	case OpSendInvalidate:
		return "Send with Invalidate"
	case OpSendSE:
		return "Send with Solicited Event"
	case OpSendSEInvalidate:
		return "Send with Solicited Event and Invalidate"
	case OpTerminate:
		return "Terminate"
	case OpImmediate:
		return "Immediate Data"
	case OpImmediateSE:
		return "Immediate Data with Solicited Event"
	case OpAtomicRequest:
		return "Atomic Request"
	case OpAtomicResponse:
		return "Atomic Response"
	}
	return fmt.Sprintf("reserved opcode %#x", uint8(o))
}

// Valid reports whether o is one of the opcodes RFC 5040 and RFC 7306
// define.
func (o Opcode) Valid() bool { return o <= OpAtomicResponse }

// Tagged reports the value of the DDP Tagged flag that Figure 4 requires
// for o: RDMA Write and RDMA Read Response use the tagged model; every
// RFC 7306 message is untagged (its Figure 2: "Tagged Flag 0").
func (o Opcode) Tagged() bool { return o == OpWrite || o == OpReadResponse }

// QN returns the DDP Queue Number that RFC 5040 Figure 4 and RFC 7306
// Figure 2 require for an untagged opcode.
func (o Opcode) QN() uint32 {
	switch o {
	case OpReadRequest, OpAtomicRequest:
		// "Atomic Operation Request messages MUST use the same Queue
		// Number as RDMA Read Requests (QN=1)." (RFC 7306 §5.2)
		return QNReadReq
	case OpTerminate:
		return QNTerminate
	case OpAtomicResponse:
		// "Atomic Operation Response messages MUST set Queue Number (QN)
		// to 3 in the DDP header." (RFC 7306 §5.2)
		return QNAtomicResp
	}
	return QNSend
}

// IsImmediate reports whether o is Immediate Data, with or without
// Solicited Event.
func (o Opcode) IsImmediate() bool { return o == OpImmediate || o == OpImmediateSE }

// IsSend reports whether o is one of the four Send variants.
func (o Opcode) IsSend() bool { return o >= OpSend && o <= OpSendSEInvalidate }

// Invalidates reports whether o carries an Invalidate STag.
func (o Opcode) Invalidates() bool { return o == OpSendInvalidate || o == OpSendSEInvalidate }

// Solicited reports whether o asks for a Solicited Event.
func (o Opcode) Solicited() bool {
	return o == OpSendSE || o == OpSendSEInvalidate || o == OpImmediateSE
}

// Version is the RDMAP version this package sends: "01b for an RNIC that
// complies with this RDMA protocol specification" (RFC 5040 §4.1).
const Version = 1

// Control is the RDMAP Control Field, the first RsvdULP octet of every DDP
// header (RFC 5040 §4.1, Figure 3):
//
//	+-+-+-+-+-+-+-+-+
//	| RV|Rsv| Opcode|
//	+-+-+-+-+-+-+-+-+
type Control byte

// MakeControl returns the control field for opcode o with RV = 1 and the
// reserved bits zero ("MUST be set to zero by sender").
func MakeControl(o Opcode) Control { return Control(Version<<6 | uint8(o)&0x0f) }

// RV returns the RDMA Version field.
func (c Control) RV() uint8 { return uint8(c) >> 6 }

// Opcode returns the opcode field.
func (c Control) Opcode() Opcode { return Opcode(c & 0x0f) }

// ValidVersion reports whether RV is a version RFC 5040 accepts: "01b for
// an RNIC that complies with this RDMA protocol specification. 00b for an
// RNIC that complies with the RDMA Consortium's RDMA protocol
// specification. Both version numbers are valid."
func (c Control) ValidVersion() bool { return c.RV() <= 1 }
