package chunk

import "encoding/binary"

// The ASCONF parameters of RFC 5061 §4.2.1 to §4.2.5, carried in ASCONF and
// ASCONF-ACK chunks.

// AddressRequest is one of the three ASCONF request parameters, which share
// a layout: Add IP Address (Type 0xC001, §4.2.1), Delete IP Address (0xC002,
// §4.2.2) and Set Primary IP Address (0xC004, §4.2.4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Type = 0xC001          |    Length = Variable          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               ASCONF-Request Correlation ID                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Address Parameter                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Address is the complete IPv4 or IPv6 Address parameter ("The complete
// TLV is wrapped within this parameter").
type AddressRequest struct {
	Type          ParamType // ParamAddIPAddress, ParamDeleteIPAddress or ParamSetPrimaryAddress
	CorrelationID uint32    // ASCONF-Request Correlation ID
	Address       Param
}

// Len returns the bytes Append adds.
func (p AddressRequest) Len() int { return padLen(8 + len(p.Address)) }

// Append appends the parameter to b.
func (p AddressRequest) Append(b []byte) []byte {
	l := 8 + len(p.Address)
	b = appendParamHeader(b, p.Type, l)
	b = binary.BigEndian.AppendUint32(b, p.CorrelationID)
	b = append(b, p.Address...)
	return appendPad(b, l)
}

// ParseAddressRequest parses an Add IP Address, Delete IP Address or Set
// Primary IP Address parameter at the start of b. The wrapped parameter
// must be an IPv4 or IPv6 Address filling the rest of the value. Address
// aliases b.
func ParseAddressRequest(b []byte) (AddressRequest, int, error) {
	p, n, err := ParseParam(b)
	if err != nil {
		return AddressRequest{}, 0, err
	}
	t := p.Type()
	if t != ParamAddIPAddress && t != ParamDeleteIPAddress && t != ParamSetPrimaryAddress {
		return AddressRequest{}, 0, paramErr(t, 0, ErrWrongType)
	}
	v := p.Value()
	addr, _, err := ParseParam(v[4:])
	if err != nil {
		return AddressRequest{}, 0, paramErr(t, 0, ErrLength)
	}
	if at := addr.Type(); (at != ParamIPv4Address && at != ParamIPv6Address) || len(addr) != len(v)-4 {
		return AddressRequest{}, 0, paramErr(t, 0, ErrLength)
	}
	return AddressRequest{Type: t, CorrelationID: binary.BigEndian.Uint32(v), Address: addr}, n, nil
}

// ErrorCauseIndication is the Error Cause Indication parameter (RFC 5061
// §4.2.3) of an ASCONF-ACK:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Type = 0xC003              |      Length = Variable        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|             ASCONF-Response Correlation ID                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|             Error Cause(s) or Success Indication              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Causes holds the wrapped error causes in wire form, read with Causes.
type ErrorCauseIndication struct {
	CorrelationID uint32 // ASCONF-Response Correlation ID
	Causes        []byte
}

// Len returns the bytes Append adds, padding included.
func (p ErrorCauseIndication) Len() int { return padLen(8 + len(p.Causes)) }

// Append appends the parameter and its padding to b.
func (p ErrorCauseIndication) Append(b []byte) []byte {
	l := 8 + len(p.Causes)
	b = appendParamHeader(b, ParamErrorCauseIndication, l)
	b = binary.BigEndian.AppendUint32(b, p.CorrelationID)
	b = append(b, p.Causes...)
	return appendPad(b, l)
}

// ParseErrorCauseIndication parses the Error Cause Indication parameter at
// the start of b, checking the wrapped causes' lengths. Causes aliases b.
func ParseErrorCauseIndication(b []byte) (ErrorCauseIndication, int, error) {
	p, n, err := parseParamOf(b, ParamErrorCauseIndication)
	if err != nil {
		return ErrorCauseIndication{}, 0, err
	}
	v := p.Value()
	if err := checkCauses(v[4:]); err != nil {
		return ErrorCauseIndication{}, 0, &ParamError{Type: ParamErrorCauseIndication, Err: err}
	}
	e := ErrorCauseIndication{CorrelationID: binary.BigEndian.Uint32(v)}
	if len(v) > 4 {
		e.Causes = v[4:]
	}
	return e, n, nil
}

// SuccessIndication is the Success Indication parameter (RFC 5061 §4.2.5)
// of an ASCONF-ACK:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Type = 0xC005          |      Length = 8               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               ASCONF-Response Correlation ID                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type SuccessIndication struct {
	CorrelationID uint32 // ASCONF-Response Correlation ID
}

// Len returns the bytes Append adds.
func (p SuccessIndication) Len() int { return 8 }

// Append appends the parameter to b.
func (p SuccessIndication) Append(b []byte) []byte {
	return appendParamUint32(b, ParamSuccessIndication, p.CorrelationID)
}

// ParseSuccessIndication parses the Success Indication parameter at the
// start of b.
func ParseSuccessIndication(b []byte) (SuccessIndication, int, error) {
	p, n, err := parseParamOf(b, ParamSuccessIndication)
	if err != nil {
		return SuccessIndication{}, 0, err
	}
	return SuccessIndication{CorrelationID: binary.BigEndian.Uint32(p.Value())}, n, nil
}
