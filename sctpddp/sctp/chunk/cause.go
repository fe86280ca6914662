package chunk

import (
	"encoding/binary"
	"fmt"
)

// CauseCode is the Cause Code of an error cause (RFC 9260 §3.3.10).
type CauseCode uint16

// The error causes of RFC 9260 §3.3.10 (Table 11) and RFC 5061 §4.3 (Table
// 5). RFC 6525 defines none: it reports unsupported RE-CONFIG combinations
// with Protocol Violation.
const (
	CauseInvalidStreamIdentifier         CauseCode = 1  // §3.3.10.1
	CauseMissingMandatoryParameter       CauseCode = 2  // §3.3.10.2
	CauseStaleCookie                     CauseCode = 3  // §3.3.10.3
	CauseOutOfResource                   CauseCode = 4  // §3.3.10.4
	CauseUnresolvableAddress             CauseCode = 5  // §3.3.10.5
	CauseUnrecognizedChunkType           CauseCode = 6  // §3.3.10.6
	CauseInvalidMandatoryParameter       CauseCode = 7  // §3.3.10.7
	CauseUnrecognizedParameters          CauseCode = 8  // §3.3.10.8
	CauseNoUserData                      CauseCode = 9  // §3.3.10.9
	CauseCookieReceivedWhileShuttingDown CauseCode = 10 // §3.3.10.10
	CauseRestartWithNewAddresses         CauseCode = 11 // §3.3.10.11
	CauseUserInitiatedAbort              CauseCode = 12 // §3.3.10.12
	CauseProtocolViolation               CauseCode = 13 // §3.3.10.13

	CauseDeleteLastRemainingIPAddress CauseCode = 0x00A0 // RFC 5061 §4.3.1
	CauseResourceShortage             CauseCode = 0x00A1 // RFC 5061 §4.3.2
	CauseDeleteSourceIPAddress        CauseCode = 0x00A2 // RFC 5061 §4.3.3
	CauseIllegalASCONFAck             CauseCode = 0x00A3 // RFC 5061 §4.3.4
	CauseNoAuthorization              CauseCode = 0x00A4 // RFC 5061 §4.3.5
)

var causeNames = map[CauseCode]string{
	CauseInvalidStreamIdentifier:         "Invalid Stream Identifier",
	CauseMissingMandatoryParameter:       "Missing Mandatory Parameter",
	CauseStaleCookie:                     "Stale Cookie",
	CauseOutOfResource:                   "Out of Resource",
	CauseUnresolvableAddress:             "Unresolvable Address",
	CauseUnrecognizedChunkType:           "Unrecognized Chunk Type",
	CauseInvalidMandatoryParameter:       "Invalid Mandatory Parameter",
	CauseUnrecognizedParameters:          "Unrecognized Parameters",
	CauseNoUserData:                      "No User Data",
	CauseCookieReceivedWhileShuttingDown: "Cookie Received While Shutting Down",
	CauseRestartWithNewAddresses:         "Restart of an Association with New Addresses",
	CauseUserInitiatedAbort:              "User-Initiated Abort",
	CauseProtocolViolation:               "Protocol Violation",
	CauseDeleteLastRemainingIPAddress:    "Request to Delete Last Remaining IP Address",
	CauseResourceShortage:                "Operation Refused Due to Resource Shortage",
	CauseDeleteSourceIPAddress:           "Request to Delete Source IP Address",
	CauseIllegalASCONFAck:                "Association Aborted Due to Illegal ASCONF-ACK",
	CauseNoAuthorization:                 "Request Refused - No Authorization",
}

func (c CauseCode) String() string {
	if s, ok := causeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("cause code %d", uint16(c))
}

// causeRules are the Cause Lengths the causes allow, as paramRules are for
// parameters. Causes that copy a TLV or a chunk need room for its header.
var causeRules = map[CauseCode]paramRule{
	CauseInvalidStreamIdentifier:         {min: 8, max: 8},
	CauseMissingMandatoryParameter:       {min: 8, step: 2},
	CauseStaleCookie:                     {min: 8, max: 8},
	CauseOutOfResource:                   {min: 4, max: 4},
	CauseUnresolvableAddress:             {min: 8},
	CauseUnrecognizedChunkType:           {min: 8},
	CauseInvalidMandatoryParameter:       {min: 4, max: 4},
	CauseUnrecognizedParameters:          {min: 8},
	CauseNoUserData:                      {min: 8, max: 8},
	CauseCookieReceivedWhileShuttingDown: {min: 4, max: 4},
	CauseRestartWithNewAddresses:         {min: 8},
	CauseUserInitiatedAbort:              {min: 4},
	CauseProtocolViolation:               {min: 4},
	CauseDeleteLastRemainingIPAddress:    {min: 8},
	CauseResourceShortage:                {min: 8},
	CauseDeleteSourceIPAddress:           {min: 8},
	CauseIllegalASCONFAck:                {min: 4, max: 4},
	CauseNoAuthorization:                 {min: 8},
}

// Cause is a view of one error cause, without its padding (RFC 9260
// §3.3.10):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Cause Code           |         Cause Length          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	/                  Cause-Specific Information                   /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A Cause comes from ParseCause or CauseIter, which have checked its
// length. It aliases the chunk it was parsed from.
type Cause []byte

// Code returns the Cause Code.
func (c Cause) Code() CauseCode { return CauseCode(binary.BigEndian.Uint16(c)) }

// Length returns the Cause Length.
func (c Cause) Length() int { return len(c) }

// Info returns the Cause-Specific Information.
func (c Cause) Info() []byte { return c[paramHeaderLen:] }

// ParseCause checks the error cause at the start of b as ParseParam checks
// a parameter ("Error causes are defined as variable-length parameters
// using the format described in Section 3.2.1") and returns it without
// padding, and the bytes it occupies with the padding b holds.
func ParseCause(b []byte) (Cause, int, error) { return parseCause(b, 0) }

func parseCause(b []byte, off int) (Cause, int, error) {
	b = b[off:]
	if len(b) < paramHeaderLen {
		var c CauseCode
		if len(b) >= 2 {
			c = CauseCode(binary.BigEndian.Uint16(b))
		}
		return nil, 0, causeErr(c, off, ErrTruncated)
	}
	c := CauseCode(binary.BigEndian.Uint16(b))
	l := int(binary.BigEndian.Uint16(b[2:]))
	if l < paramHeaderLen {
		return nil, 0, causeErr(c, off, ErrLength)
	}
	if l > len(b) {
		return nil, 0, causeErr(c, off, ErrTruncated)
	}
	if r, ok := causeRules[c]; ok && !r.ok(l) {
		return nil, 0, causeErr(c, off, ErrLength)
	}
	if c == CauseMissingMandatoryParameter &&
		binary.BigEndian.Uint32(b[paramHeaderLen:]) != uint32(l-8)/2 {
		// "Number of Missing params: ... the number of parameters
		// contained in the Cause-Specific Information field."
		return nil, 0, causeErr(c, off, ErrLength)
	}
	return Cause(b[:l]), min(padLen(l), len(b)), nil
}

func parseCauseOf(b []byte, want CauseCode) (Cause, int, error) {
	if len(b) >= 2 {
		if c := CauseCode(binary.BigEndian.Uint16(b)); c != want {
			return nil, 0, causeErr(c, 0, ErrWrongType)
		}
	}
	return ParseCause(b)
}

// CauseIter iterates over the error causes of an ABORT or ERROR chunk, or
// of an Error Cause Indication, without allocating, checking each as
// ParseCause does. It is used as ParamIter is.
type CauseIter struct {
	b      []byte
	off    int
	cur    Cause
	curOff int
	err    error
}

// Causes returns an iterator over the error causes in b.
func Causes(b []byte) CauseIter { return CauseIter{b: b} }

// Next advances to the next error cause. It returns false at the end of
// the list or at a malformed cause, after which Err tells which.
func (it *CauseIter) Next() bool {
	if it.err != nil || it.off >= len(it.b) {
		return false
	}
	c, n, err := parseCause(it.b, it.off)
	if err != nil {
		it.err = err
		it.cur = nil
		return false
	}
	it.cur, it.curOff = c, it.off
	it.off += n
	return true
}

// Cause returns the current error cause, without padding.
func (it *CauseIter) Cause() Cause { return it.cur }

// Offset returns where the current error cause starts in the list.
func (it *CauseIter) Offset() int { return it.curOff }

// Err returns the error that stopped the iteration, or nil at the end of a
// well-formed list. It is a *CauseError.
func (it *CauseIter) Err() error { return it.err }

func checkCauses(b []byte) error {
	it := Causes(b)
	for it.Next() {
	}
	return it.Err()
}

// RawCause is an error cause whose Cause-Specific Information this package
// carries opaque:
//
//   - Out of Resource (4), Invalid Mandatory Parameter (7), Cookie Received
//     While Shutting Down (10) and Association Aborted Due to Illegal
//     ASCONF-ACK (0xA3) have none.
//   - Unresolvable Address (5) carries the complete address parameter,
//     Unrecognized Chunk Type (6) the complete chunk (Raw.Unpadded),
//     Unrecognized Parameters (8) the complete parameters, Restart of an
//     Association with New Addresses (11) the new address TLVs, and RFC
//     5061's 0xA0, 0xA1, 0xA2 and 0xA4 the TLV copied from the ASCONF.
//   - User-Initiated Abort (12) carries the Upper Layer Abort Reason and
//     Protocol Violation (13) the Additional Information.
//
// The causes with fixed fields have their own types.
type RawCause struct {
	Code CauseCode
	Info []byte
}

// Len returns the bytes Append adds, padding included.
func (c RawCause) Len() int { return padLen(paramHeaderLen + len(c.Info)) }

// Append appends the error cause and its padding to b.
func (c RawCause) Append(b []byte) []byte {
	return appendParam(b, ParamType(c.Code), c.Info)
}

// ParseRawCause parses the error cause at the start of b, of any code.
func ParseRawCause(b []byte) (RawCause, int, error) {
	c, n, err := ParseCause(b)
	if err != nil {
		return RawCause{}, 0, err
	}
	r := RawCause{Code: c.Code()}
	if len(c) > paramHeaderLen {
		r.Info = c.Info()
	}
	return r, n, nil
}

// InvalidStreamIdentifier is the Invalid Stream Identifier error cause (RFC
// 9260 §3.3.10.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Cause Code = 1         |       Cause Length = 8        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       Stream Identifier       |          (Reserved)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type InvalidStreamIdentifier struct {
	StreamID uint16
}

// Len returns the bytes Append adds.
func (c InvalidStreamIdentifier) Len() int { return 8 }

// Append appends the error cause to b; Reserved "is set to all 0's on
// transmit and ignored on receipt".
func (c InvalidStreamIdentifier) Append(b []byte) []byte {
	b = appendParamHeader(b, ParamType(CauseInvalidStreamIdentifier), 8)
	b = binary.BigEndian.AppendUint16(b, c.StreamID)
	return append(b, 0, 0)
}

// ParseInvalidStreamIdentifier parses the Invalid Stream Identifier error
// cause at the start of b.
func ParseInvalidStreamIdentifier(b []byte) (InvalidStreamIdentifier, int, error) {
	c, n, err := parseCauseOf(b, CauseInvalidStreamIdentifier)
	if err != nil {
		return InvalidStreamIdentifier{}, 0, err
	}
	return InvalidStreamIdentifier{StreamID: binary.BigEndian.Uint16(c.Info())}, n, nil
}

// MissingMandatoryParameter is the Missing Mandatory Parameter error cause
// (RFC 9260 §3.3.10.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Cause Code = 2         |   Cause Length = 8 + N * 2    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Number of missing params = N                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Missing Param Type #1     |     Missing Param Type #2     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Missing Param Type #N-1    |     Missing Param Type #N     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// ParseCause rejects a cause whose N does not match its length.
type MissingMandatoryParameter struct {
	Types ParamTypeList
}

// Len returns the bytes Append adds, padding included.
func (c MissingMandatoryParameter) Len() int { return padLen(8 + len(c.Types)) }

// Append appends the error cause and its padding to b.
func (c MissingMandatoryParameter) Append(b []byte) []byte {
	l := 8 + len(c.Types)
	b = appendParamHeader(b, ParamType(CauseMissingMandatoryParameter), l)
	b = binary.BigEndian.AppendUint32(b, uint32(c.Types.Len()))
	b = append(b, c.Types...)
	return appendPad(b, l)
}

// ParseMissingMandatoryParameter parses the Missing Mandatory Parameter
// error cause at the start of b. Types aliases b.
func ParseMissingMandatoryParameter(b []byte) (MissingMandatoryParameter, int, error) {
	c, n, err := parseCauseOf(b, CauseMissingMandatoryParameter)
	if err != nil {
		return MissingMandatoryParameter{}, 0, err
	}
	return MissingMandatoryParameter{Types: ParamTypeList(c.Info()[4:])}, n, nil
}

// StaleCookie is the Stale Cookie error cause (RFC 9260 §3.3.10.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Cause Code = 3         |       Cause Length = 8        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Measure of Staleness (usec.)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type StaleCookie struct {
	Staleness uint32 // Measure of Staleness, in microseconds
}

// Len returns the bytes Append adds.
func (c StaleCookie) Len() int { return 8 }

// Append appends the error cause to b.
func (c StaleCookie) Append(b []byte) []byte {
	return appendParamUint32(b, ParamType(CauseStaleCookie), c.Staleness)
}

// ParseStaleCookie parses the Stale Cookie error cause at the start of b.
func ParseStaleCookie(b []byte) (StaleCookie, int, error) {
	c, n, err := parseCauseOf(b, CauseStaleCookie)
	if err != nil {
		return StaleCookie{}, 0, err
	}
	return StaleCookie{Staleness: binary.BigEndian.Uint32(c.Info())}, n, nil
}

// NoUserData is the No User Data error cause (RFC 9260 §3.3.10.9):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Cause Code = 9         |       Cause Length = 8        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              TSN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type NoUserData struct {
	TSN uint32 // the TSN of the DATA chunk received with no User Data field
}

// Len returns the bytes Append adds.
func (c NoUserData) Len() int { return 8 }

// Append appends the error cause to b.
func (c NoUserData) Append(b []byte) []byte {
	return appendParamUint32(b, ParamType(CauseNoUserData), c.TSN)
}

// ParseNoUserData parses the No User Data error cause at the start of b.
func ParseNoUserData(b []byte) (NoUserData, int, error) {
	c, n, err := parseCauseOf(b, CauseNoUserData)
	if err != nil {
		return NoUserData{}, 0, err
	}
	return NoUserData{TSN: binary.BigEndian.Uint32(c.Info())}, n, nil
}
