package chunk

import (
	"encoding/binary"
	"fmt"
)

// ParamType is an SCTP Parameter Type (RFC 9260 §3.2.1).
type ParamType uint16

// The parameter types this package knows, by the document defining them.
const (
	ParamHeartbeatInfo         ParamType = 1  // Heartbeat Info, RFC 9260 §3.3.5
	ParamIPv4Address           ParamType = 5  // IPv4 Address, §3.3.2.1.1
	ParamIPv6Address           ParamType = 6  // IPv6 Address, §3.3.2.1.2
	ParamStateCookie           ParamType = 7  // State Cookie, §3.3.3.1.1
	ParamUnrecognizedParameter ParamType = 8  // Unrecognized Parameter, §3.3.3.1.2
	ParamCookiePreservative    ParamType = 9  // Cookie Preservative, §3.3.2.1.3
	ParamHostNameAddress       ParamType = 11 // Host Name Address (deprecated), §3.3.2.1.4
	ParamSupportedAddressTypes ParamType = 12 // Supported Address Types, §3.3.2.1.5

	ParamOutgoingSSNResetRequest ParamType = 13 // RFC 6525 §4.1
	ParamIncomingSSNResetRequest ParamType = 14 // RFC 6525 §4.2
	ParamSSNTSNResetRequest      ParamType = 15 // RFC 6525 §4.3
	ParamReconfigResponse        ParamType = 16 // Re-configuration Response, RFC 6525 §4.4
	ParamAddOutgoingStreams      ParamType = 17 // Add Outgoing Streams Request, RFC 6525 §4.5
	ParamAddIncomingStreams      ParamType = 18 // Add Incoming Streams Request, RFC 6525 §4.6

	ParamECNCapable             ParamType = 0x8000 // Reserved for ECN Capable, RFC 9260 §3.3.2
	ParamZeroChecksumAcceptable ParamType = 0x8001 // Zero Checksum Acceptable, RFC 9653
	ParamRandom                 ParamType = 0x8002 // Random, RFC 4895 §3.1
	ParamChunkList              ParamType = 0x8003 // Chunk List, RFC 4895 §3.2
	ParamRequestedHMACAlgorithm ParamType = 0x8004 // Requested HMAC Algorithm, RFC 4895 §3.3
	ParamPadding                ParamType = 0x8005 // Padding, RFC 4820
	ParamSupportedExtensions    ParamType = 0x8008 // Supported Extensions, RFC 5061 §4.2.7

	ParamForwardTSNSupported       ParamType = 0xC000 // Forward-TSN-Supported, RFC 3758 §3.1
	ParamAddIPAddress              ParamType = 0xC001 // Add IP Address, RFC 5061 §4.2.1
	ParamDeleteIPAddress           ParamType = 0xC002 // Delete IP Address, RFC 5061 §4.2.2
	ParamErrorCauseIndication      ParamType = 0xC003 // Error Cause Indication, RFC 5061 §4.2.3
	ParamSetPrimaryAddress         ParamType = 0xC004 // Set Primary IP Address, RFC 5061 §4.2.4
	ParamSuccessIndication         ParamType = 0xC005 // Success Indication, RFC 5061 §4.2.5
	ParamAdaptationLayerIndication ParamType = 0xC006 // Adaptation Layer Indication, RFC 5061 §4.2.6
)

var paramNames = map[ParamType]string{
	ParamHeartbeatInfo:             "Heartbeat Info",
	ParamIPv4Address:               "IPv4 Address",
	ParamIPv6Address:               "IPv6 Address",
	ParamStateCookie:               "State Cookie",
	ParamUnrecognizedParameter:     "Unrecognized Parameter",
	ParamCookiePreservative:        "Cookie Preservative",
	ParamHostNameAddress:           "Host Name Address",
	ParamSupportedAddressTypes:     "Supported Address Types",
	ParamOutgoingSSNResetRequest:   "Outgoing SSN Reset Request",
	ParamIncomingSSNResetRequest:   "Incoming SSN Reset Request",
	ParamSSNTSNResetRequest:        "SSN/TSN Reset Request",
	ParamReconfigResponse:          "Re-configuration Response",
	ParamAddOutgoingStreams:        "Add Outgoing Streams Request",
	ParamAddIncomingStreams:        "Add Incoming Streams Request",
	ParamECNCapable:                "ECN Capable",
	ParamZeroChecksumAcceptable:    "Zero Checksum Acceptable",
	ParamRandom:                    "Random",
	ParamChunkList:                 "Chunk List",
	ParamRequestedHMACAlgorithm:    "Requested HMAC Algorithm",
	ParamPadding:                   "Padding",
	ParamSupportedExtensions:       "Supported Extensions",
	ParamForwardTSNSupported:       "Forward-TSN-Supported",
	ParamAddIPAddress:              "Add IP Address",
	ParamDeleteIPAddress:           "Delete IP Address",
	ParamErrorCauseIndication:      "Error Cause Indication",
	ParamSetPrimaryAddress:         "Set Primary IP Address",
	ParamSuccessIndication:         "Success Indication",
	ParamAdaptationLayerIndication: "Adaptation Layer Indication",
}

func (t ParamType) String() string {
	if s, ok := paramNames[t]; ok {
		return s
	}
	return fmt.Sprintf("parameter type %#04x", uint16(t))
}

// Unrecognized returns what a receiver that does not recognise parameter
// type t does with it: RFC 9260 §3.2.1 encodes the action in the type's
// highest-order 2 bits (Table 3). "In the 00 or 01 case, the processing of
// the parameters after the unknown parameter is canceled, but no processing
// already done is rolled back." Reports go in Unrecognized Parameter
// parameters of the INIT ACK answering an INIT, and otherwise in an
// Unrecognized Parameters error cause (§3.2.2).
func (t ParamType) Unrecognized() Action { return Action(t >> 14) }

// paramRule is the Parameter Length a parameter type allows: at least min,
// at most max (0: no bound), and min plus a multiple of step (0: any).
type paramRule struct{ min, max, step uint16 }

var paramRules = map[ParamType]paramRule{
	ParamHeartbeatInfo:             {min: 4},
	ParamIPv4Address:               {min: 8, max: 8},
	ParamIPv6Address:               {min: 20, max: 20},
	ParamStateCookie:               {min: 4},
	ParamUnrecognizedParameter:     {min: 8},
	ParamCookiePreservative:        {min: 8, max: 8},
	ParamHostNameAddress:           {min: 5},
	ParamSupportedAddressTypes:     {min: 6, step: 2},
	ParamOutgoingSSNResetRequest:   {min: 16, step: 2},
	ParamIncomingSSNResetRequest:   {min: 8, step: 2},
	ParamSSNTSNResetRequest:        {min: 8, max: 8},
	ParamReconfigResponse:          {min: 12, max: 20, step: 8},
	ParamAddOutgoingStreams:        {min: 12, max: 12},
	ParamAddIncomingStreams:        {min: 12, max: 12},
	ParamECNCapable:                {min: 4, max: 4},
	ParamZeroChecksumAcceptable:    {min: 8, max: 8},
	ParamForwardTSNSupported:       {min: 4, max: 4},
	ParamAddIPAddress:              {min: 16},
	ParamDeleteIPAddress:           {min: 16},
	ParamErrorCauseIndication:      {min: 8},
	ParamSetPrimaryAddress:         {min: 16},
	ParamSuccessIndication:         {min: 8, max: 8},
	ParamAdaptationLayerIndication: {min: 8, max: 8},
}

func (r paramRule) ok(l int) bool {
	if l < int(r.min) || (r.max != 0 && l > int(r.max)) {
		return false
	}
	return r.step == 0 || (l-int(r.min))%int(r.step) == 0
}

// Param is a view of one parameter in the Type-Length-Value format of RFC
// 9260 §3.2.1, without its padding:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Parameter Type         |       Parameter Length        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                        Parameter Value                        /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A Param comes from ParseParam or ParamIter, which have checked its
// length; it is the complete TLV an Unrecognized Parameter or an error cause
// copies. It aliases the chunk it was parsed from.
type Param []byte

const paramHeaderLen = 4

// Type returns the Parameter Type.
func (p Param) Type() ParamType { return ParamType(binary.BigEndian.Uint16(p)) }

// Length returns the Parameter Length.
func (p Param) Length() int { return len(p) }

// Value returns the Parameter Value.
func (p Param) Value() []byte { return p[paramHeaderLen:] }

// ParseParam checks the parameter at the start of b and returns it without
// padding, and the bytes it occupies with the padding that b holds.
//
// The Parameter Length must be at least 4 and lie within b, and for the
// types this package knows it must be one the type's definition allows
// (IPv4 Address: 8, Cookie Preservative: 8, Supported Address Types: 4 plus
// 2 per type, and so on). The padding may be short at the end of b: RFC 9260
// §3.2 leaves the last parameter's padding out of the Chunk Length. "The
// receiver MUST ignore the padding bytes", so their value is not checked.
func ParseParam(b []byte) (Param, int, error) { return parseParam(b, 0) }

func parseParam(b []byte, off int) (Param, int, error) {
	b = b[off:]
	if len(b) < paramHeaderLen {
		var t ParamType
		if len(b) >= 2 {
			t = ParamType(binary.BigEndian.Uint16(b))
		}
		return nil, 0, paramErr(t, off, ErrTruncated)
	}
	t := ParamType(binary.BigEndian.Uint16(b))
	l := int(binary.BigEndian.Uint16(b[2:]))
	if l < paramHeaderLen {
		return nil, 0, paramErr(t, off, ErrLength)
	}
	if l > len(b) {
		return nil, 0, paramErr(t, off, ErrTruncated)
	}
	if r, ok := paramRules[t]; ok && !r.ok(l) {
		return nil, 0, paramErr(t, off, ErrLength)
	}
	return Param(b[:l]), min(padLen(l), len(b)), nil
}

// parseParamOf is ParseParam for a parameter of type want.
func parseParamOf(b []byte, want ParamType) (Param, int, error) {
	if len(b) >= 2 {
		if t := ParamType(binary.BigEndian.Uint16(b)); t != want {
			return nil, 0, paramErr(t, 0, ErrWrongType)
		}
	}
	return ParseParam(b)
}

// ParamIter iterates over a list of parameters (the Optional/Variable-Length
// Parameters of an INIT, say) without allocating, checking each as
// ParseParam does:
//
//	it := chunk.Params(init.Params)
//	for it.Next() {
//		p := it.Param()
//		switch p.Type() { ... }
//	}
//	if err := it.Err(); err != nil { ... }
type ParamIter struct {
	b      []byte
	off    int
	cur    Param
	curOff int
	err    error
}

// Params returns an iterator over the parameters in b.
func Params(b []byte) ParamIter { return ParamIter{b: b} }

// Next advances to the next parameter. It returns false at the end of the
// list or at a malformed parameter, after which Err tells which.
func (it *ParamIter) Next() bool {
	if it.err != nil || it.off >= len(it.b) {
		return false
	}
	p, n, err := parseParam(it.b, it.off)
	if err != nil {
		it.err = err
		it.cur = nil
		return false
	}
	it.cur, it.curOff = p, it.off
	it.off += n
	return true
}

// Param returns the current parameter, without padding.
func (it *ParamIter) Param() Param { return it.cur }

// Offset returns where the current parameter starts in the list.
func (it *ParamIter) Offset() int { return it.curOff }

// Err returns the error that stopped the iteration, or nil at the end of a
// well-formed list. It is a *ParamError.
func (it *ParamIter) Err() error { return it.err }

// checkParams checks every parameter of a list and returns how many there
// are.
func checkParams(b []byte) (int, error) {
	n := 0
	it := Params(b)
	for it.Next() {
		n++
	}
	return n, it.Err()
}

// RawParam is a parameter whose value this package carries opaque: a State
// Cookie, a Heartbeat Info, a Host Name Address, an Unrecognized Parameter
// (Value is the complete unrecognized TLV), the RFC 4895 Random, Chunk List
// and Requested HMAC Algorithm parameters, or ECN Capable and
// Forward-TSN-Supported, whose value is empty. Any other parameter can be
// built with it too.
type RawParam struct {
	Type  ParamType
	Value []byte
}

// Len returns the bytes Append adds, padding included.
func (p RawParam) Len() int { return padLen(paramHeaderLen + len(p.Value)) }

// Append appends the parameter and its padding to b.
func (p RawParam) Append(b []byte) []byte { return appendParam(b, p.Type, p.Value) }

// ParseRawParam parses the parameter at the start of b, of any type.
func ParseRawParam(b []byte) (RawParam, int, error) {
	p, n, err := ParseParam(b)
	if err != nil {
		return RawParam{}, 0, err
	}
	r := RawParam{Type: p.Type()}
	if len(p) > paramHeaderLen {
		r.Value = p.Value()
	}
	return r, n, nil
}

// appendParamHeader appends a parameter header for a parameter of length
// bytes (header and value, no padding).
func appendParamHeader(b []byte, t ParamType, length int) []byte {
	if length > 0xFFFF {
		// A programming error of the caller, as in appendChunkHeader.
		panic(fmt.Sprintf("sctp: %v parameter of %d bytes exceeds the Parameter Length field (a programming error of the caller)", t, length))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(t))
	return binary.BigEndian.AppendUint16(b, uint16(length))
}

// appendParam appends a parameter whose value is value, with its padding.
func appendParam(b []byte, t ParamType, value []byte) []byte {
	l := paramHeaderLen + len(value)
	b = appendParamHeader(b, t, l)
	b = append(b, value...)
	return appendPad(b, l)
}

// appendParamUint32 appends a parameter whose value is one 32-bit integer.
func appendParamUint32(b []byte, t ParamType, v uint32) []byte {
	b = appendParamHeader(b, t, 8)
	return binary.BigEndian.AppendUint32(b, v)
}
