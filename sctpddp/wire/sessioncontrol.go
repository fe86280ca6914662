package wire

import (
	"encoding/binary"
	"fmt"
)

// FunctionCode is the 16-bit Function Code of a DDP Stream Session Control
// message (RFC 5043 §5.2.3), registered in "SCTP Function Codes for DDP
// Session Control" (RFC 6580 §3.5).
type FunctionCode uint16

// The function codes of RFC 5043 §5.2.3 and RFC 6581 §7.
const (
	FunctionInitiate  FunctionCode = 0x0001 // DDP Stream Session Initiate
	FunctionAccept    FunctionCode = 0x0002 // DDP Stream Session Accept
	FunctionReject    FunctionCode = 0x0003 // DDP Stream Session Reject
	FunctionTerminate FunctionCode = 0x0004 // DDP Stream Session Terminate

	FunctionEnhancedInitiate FunctionCode = 0x0005 // Enhanced DDP Stream Session Initiate
	FunctionEnhancedAccept   FunctionCode = 0x0006 // Enhanced DDP Stream Session Accept
	FunctionEnhancedReject   FunctionCode = 0x0007 // Enhanced DDP Stream Session Reject

	// FunctionExperimental is "0xFFFF, Reserved (Experimental)" (RFC 6580
	// §3.5). No experiment is defined, so it is rejected like an
	// unassigned code.
	FunctionExperimental FunctionCode = 0xFFFF
)

func (f FunctionCode) String() string {
	switch f {
	case FunctionInitiate:
		return "DDP Stream Session Initiate"
	case FunctionAccept:
		return "DDP Stream Session Accept"
	case FunctionReject:
		return "DDP Stream Session Reject"
	case FunctionTerminate:
		return "DDP Stream Session Terminate"
	case FunctionEnhancedInitiate:
		return "Enhanced DDP Stream Session Initiate"
	case FunctionEnhancedAccept:
		return "Enhanced DDP Stream Session Accept"
	case FunctionEnhancedReject:
		return "Enhanced DDP Stream Session Reject"
	case FunctionExperimental:
		return "Reserved (Experimental)"
	}
	return fmt.Sprintf("FunctionCode(%#04x)", uint16(f))
}

// Known reports whether f is one of the seven function codes this package
// implements.
func (f FunctionCode) Known() bool {
	return f >= FunctionInitiate && f <= FunctionEnhancedReject
}

// Enhanced reports whether f is one of RFC 6581's enhanced function codes,
// whose Private Data starts with EnhancedData.
//
// RFC 6581 §7 requires the enhanced data in "the DDP Stream Session
// Initiate and the Enhanced DDP Stream Session Accept messages"; this
// package also carries it in the Enhanced Reject, because §9.1 and §9.2
// have the responder report its IRD/ORD and its supported RTR indications
// in a reject ("The initiator MUST pass the responder provided IRD and ORD
// to the ULP for both MPA Accept and Reject messages"), which only that
// field can carry.
func (f FunctionCode) Enhanced() bool {
	return f >= FunctionEnhancedInitiate && f <= FunctionEnhancedReject
}

// Size limits of DDP Stream Session Control messages.
const (
	// MaxPrivateData: "Private Data length MUST NOT exceed 512 bytes in any
	// message." (RFC 5043 §5.2.3)
	MaxPrivateData = 512
	// MaxEnhancedPrivateData is the ULP Private Data left after the
	// enhanced data: "Private Data length MUST NOT exceed 512 bytes in any
	// message, including enhanced RDMA connection establishment data."
	// (RFC 6581 §7)
	MaxEnhancedPrivateData = MaxPrivateData - EnhancedDataLen

	sessionControlHeaderLen = SSNLen + 2
	// MaxSessionControlLen is the longest message: 4 + 512 = 516 bytes,
	// RFC 5043 §9's minimum MULPDU.
	MaxSessionControlLen = sessionControlHeaderLen + MaxPrivateData
)

// SessionControl is a DDP Stream Session Control message, the user data
// of an SCTP DATA chunk with PPID 17 (RFC 5043 §5.2.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          DDP-SSN              |    Function Code              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Private Data (Dependent on Function Code)          |
//	|                         ...                                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// For the enhanced function codes (RFC 6581 §7) the Private Data starts
// with the 4-byte EnhancedData, then the ULP's Private Data. There is no
// length field: the SCTP message boundary ends the Private Data.
type SessionControl struct {
	SSN      SSN
	Function FunctionCode
	// Enhanced is sent only when Function.Enhanced(); otherwise it is
	// ignored by Append and zero after parsing.
	Enhanced EnhancedData
	// PrivateData is the ULP's Private Data (after the enhanced data, if
	// any). "ULP-supplied Private Data MUST be included for DDP Stream
	// Session Initiate, DDP Stream Session Accept, and DDP Stream Session
	// Reject messages. However, the ULP supplied Private DATA MAY be of
	// zero length." After ParseSessionControl it aliases the parsed buffer.
	PrivateData []byte
}

// privateLen returns the on-the-wire Private Data length, enhanced data
// included.
func (m *SessionControl) privateLen() int {
	if m.Function == FunctionTerminate {
		return 0
	}
	n := len(m.PrivateData)
	if m.Function.Enhanced() {
		n += EnhancedDataLen
	}
	return n
}

// Validate reports whether m can be sent: the function code is known, a
// Terminate has no Private Data, the Private Data is within 512 bytes, and
// the enhanced data is valid.
func (m *SessionControl) Validate() error {
	if !m.Function.Known() {
		return fmt.Errorf("%w: %v", ErrUnknownFunctionCode, m.Function)
	}
	if m.Function == FunctionTerminate {
		// "Private Data MUST NOT be included in the DDP Stream Session
		// Terminate message." (RFC 5043 §5.2.3)
		if len(m.PrivateData) != 0 {
			return fmt.Errorf("%w: %d bytes", ErrPrivateDataInTerminate, len(m.PrivateData))
		}
		return nil
	}
	// "Private Data length MUST NOT exceed 512 bytes in any message."
	// (RFC 5043 §5.2.3), "including enhanced RDMA connection establishment
	// data" (RFC 6581 §7).
	if n := m.privateLen(); n > MaxPrivateData {
		return fmt.Errorf("%w: %d bytes in %v", ErrPrivateDataTooLong, n, m.Function)
	}
	if m.Function.Enhanced() {
		if err := m.Enhanced.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidIRDORD, err)
		}
	}
	return nil
}

// Len returns the encoded length.
func (m *SessionControl) Len() int { return sessionControlHeaderLen + m.privateLen() }

// Append appends the encoded message to b. It encodes what m holds (no
// Private Data for a Terminate, enhanced data only for enhanced function
// codes); call Validate first to be sure the result is a valid message.
func (m *SessionControl) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(m.SSN))
	b = binary.BigEndian.AppendUint16(b, uint16(m.Function))
	if m.Function == FunctionTerminate {
		return b
	}
	if m.Function.Enhanced() {
		b = m.Enhanced.Append(b)
	}
	return append(b, m.PrivateData...)
}

// ParseSessionControl decodes the user data of one PPID 17 message. The
// whole of b is the message, so on success it consumes len(b) bytes. It
// rejects unknown function codes, a Terminate with Private Data, Private
// Data over 512 bytes, and an enhanced message too short for its enhanced
// data.
func ParseSessionControl(b []byte) (SessionControl, int, error) {
	if len(b) < sessionControlHeaderLen {
		return SessionControl{}, 0, fmt.Errorf("%w: DDP Stream Session Control of %d bytes, need 4", ErrTruncated, len(b))
	}
	m := SessionControl{
		SSN:      SSN(binary.BigEndian.Uint16(b)),
		Function: FunctionCode(binary.BigEndian.Uint16(b[2:])),
	}
	if !m.Function.Known() {
		return SessionControl{}, 0, fmt.Errorf("%w: %v", ErrUnknownFunctionCode, m.Function)
	}
	priv := b[sessionControlHeaderLen:]
	if m.Function == FunctionTerminate {
		// "Private Data MUST NOT be included in the DDP Stream Session
		// Terminate message." (RFC 5043 §5.2.3)
		if len(priv) != 0 {
			return SessionControl{}, 0, fmt.Errorf("%w: %d bytes", ErrPrivateDataInTerminate, len(priv))
		}
		return m, len(b), nil
	}
	// "Private Data length MUST NOT exceed 512 bytes in any message."
	// (RFC 5043 §5.2.3; RFC 6581 §7 counts the enhanced data in.)
	if len(priv) > MaxPrivateData {
		return SessionControl{}, 0, fmt.Errorf("%w: %d bytes in %v", ErrPrivateDataTooLong, len(priv), m.Function)
	}
	if m.Function.Enhanced() {
		// "ULP-supplied Private Data MUST be included for Enhanced DDP
		// Stream Session Initiate, Enhanced DDP Stream Session Accept, and
		// Enhanced DDP Stream Session Reject messages, and MUST follow the
		// enhanced RDMA connection establishment data" (RFC 6581 §7).
		d, n, err := ParseEnhancedData(priv)
		if err != nil {
			return SessionControl{}, 0, fmt.Errorf("%v: %w", m.Function, err)
		}
		m.Enhanced = d
		priv = priv[n:]
	}
	m.PrivateData = priv[:len(priv):len(priv)]
	return m, len(b), nil
}
