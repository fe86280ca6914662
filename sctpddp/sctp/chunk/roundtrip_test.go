package chunk

import (
	"bytes"
	"fmt"
)

// reencode parses chunk c by its type and encodes the result again. known
// is false for the types this package does not parse; err is the parse
// error.
func reencode(c Raw) (enc []byte, known bool, err error) {
	do := func(v codec, n int, err error) ([]byte, bool, error) {
		if err != nil {
			return nil, true, err
		}
		if n != len(c) {
			return nil, true, fmt.Errorf("consumed %d of %d bytes", n, len(c))
		}
		enc := v.Append(nil)
		if len(enc) != v.Len() {
			return nil, true, fmt.Errorf("Append wrote %d bytes, Len says %d", len(enc), v.Len())
		}
		return enc, true, nil
	}
	switch c.Type() {
	case TypeData:
		v, n, err := ParseData(c)
		return do(v, n, err)
	case TypeInit:
		v, n, err := ParseInit(c)
		return do(v, n, err)
	case TypeInitAck:
		v, n, err := ParseInitAck(c)
		return do(v, n, err)
	case TypeSACK:
		v, n, err := ParseSACK(c)
		return do(v, n, err)
	case TypeHeartbeat:
		v, n, err := ParseHeartbeat(c)
		return do(v, n, err)
	case TypeHeartbeatAck:
		v, n, err := ParseHeartbeatAck(c)
		return do(v, n, err)
	case TypeAbort:
		v, n, err := ParseAbort(c)
		return do(v, n, err)
	case TypeShutdown:
		v, n, err := ParseShutdown(c)
		return do(v, n, err)
	case TypeShutdownAck:
		v, n, err := ParseShutdownAck(c)
		return do(v, n, err)
	case TypeError:
		v, n, err := ParseOperationError(c)
		return do(v, n, err)
	case TypeCookieEcho:
		v, n, err := ParseCookieEcho(c)
		return do(v, n, err)
	case TypeCookieAck:
		v, n, err := ParseCookieAck(c)
		return do(v, n, err)
	case TypeShutdownComplete:
		v, n, err := ParseShutdownComplete(c)
		return do(v, n, err)
	case TypeForwardTSN:
		v, n, err := ParseForwardTSN(c)
		return do(v, n, err)
	case TypeReconfig:
		v, n, err := ParseReconfig(c)
		return do(v, n, err)
	case TypeIData:
		v, n, err := ParseIData(c)
		return do(v, n, err)
	case TypeIForwardTSN:
		v, n, err := ParseIForwardTSN(c)
		return do(v, n, err)
	case TypeASCONF:
		v, n, err := ParseASCONF(c)
		return do(v, n, err)
	case TypeASCONFAck:
		v, n, err := ParseASCONFAck(c)
		return do(v, n, err)
	}
	return nil, false, nil
}

// definedFlags returns the Chunk Flags bits type t defines; the others are
// reserved, sent as 0 and ignored on receipt.
func definedFlags(t Type) byte {
	switch t {
	case TypeData, TypeIData:
		return byte(dataFlagsMask)
	case TypeAbort, TypeShutdownComplete:
		return flagT
	}
	return 0
}

// sameModuloPadding reports whether enc, the re-encoding of chunk orig, is
// the same chunk: the same type and defined flags, the same value up to the
// shorter of the two Chunk Lengths, zero padding, and Chunk Lengths that
// differ only by final padding (orig may count its last parameter's
// padding). Reserved fields the parser ignores are masked out.
func sameModuloPadding(orig Raw, enc []byte) error {
	e, n, err := ParseRaw(enc)
	if err != nil || n != len(enc) {
		return fmt.Errorf("re-encoding %x is not one chunk: %v", enc, err)
	}
	if e.Type() != orig.Type() || e.Flags() != orig.Flags()&definedFlags(orig.Type()) {
		return fmt.Errorf("type/flags %v/%#x, want %v/%#x", e.Type(), e.Flags(), orig.Type(), orig.Flags())
	}
	lo, le := orig.Length(), e.Length()
	if padLen(lo) != padLen(le) || le > lo {
		return fmt.Errorf("Chunk Length %d re-encoded as %d", lo, le)
	}
	a, b := bytes.Clone(orig[4:le]), bytes.Clone(e[4:le])
	if orig.Type() == TypeIData {
		// I-DATA's Reserved field, ignored by the receiver.
		a[6], a[7] = 0, 0
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("value %x re-encoded as %x", a, b)
	}
	if !bytes.Equal(e[le:], make([]byte, len(e)-le)) {
		return fmt.Errorf("padding %x", e[le:])
	}
	return nil
}

// reencodeParam parses parameter p with the parser of its type, or as a
// RawParam, and encodes the result again, padding included.
func reencodeParam(p Param) ([]byte, error) {
	do := func(v codec, n int, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		if n != len(p) {
			return nil, fmt.Errorf("consumed %d of %d bytes", n, len(p))
		}
		return v.Append(nil), nil
	}
	switch p.Type() {
	case ParamIPv4Address:
		v, n, err := ParseIPv4Address(p)
		return do(v, n, err)
	case ParamIPv6Address:
		v, n, err := ParseIPv6Address(p)
		return do(v, n, err)
	case ParamCookiePreservative:
		v, n, err := ParseCookiePreservative(p)
		return do(v, n, err)
	case ParamSupportedAddressTypes:
		v, n, err := ParseSupportedAddressTypes(p)
		return do(v, n, err)
	case ParamSupportedExtensions:
		v, n, err := ParseSupportedExtensions(p)
		return do(v, n, err)
	case ParamAdaptationLayerIndication:
		v, n, err := ParseAdaptationLayerIndication(p)
		return do(v, n, err)
	case ParamZeroChecksumAcceptable:
		v, n, err := ParseZeroChecksumAcceptable(p)
		return do(v, n, err)
	case ParamOutgoingSSNResetRequest:
		v, n, err := ParseOutgoingSSNResetRequest(p)
		return do(v, n, err)
	case ParamIncomingSSNResetRequest:
		v, n, err := ParseIncomingSSNResetRequest(p)
		return do(v, n, err)
	case ParamSSNTSNResetRequest:
		v, n, err := ParseSSNTSNResetRequest(p)
		return do(v, n, err)
	case ParamReconfigResponse:
		v, n, err := ParseReconfigResponse(p)
		return do(v, n, err)
	case ParamAddOutgoingStreams, ParamAddIncomingStreams:
		v, n, err := ParseAddStreamsRequest(p)
		return do(v, n, err)
	case ParamAddIPAddress, ParamDeleteIPAddress, ParamSetPrimaryAddress:
		v, n, err := ParseAddressRequest(p)
		return do(v, n, err)
	case ParamErrorCauseIndication:
		v, n, err := ParseErrorCauseIndication(p)
		return do(v, n, err)
	case ParamSuccessIndication:
		v, n, err := ParseSuccessIndication(p)
		return do(v, n, err)
	}
	v, n, err := ParseRawParam(p)
	return do(v, n, err)
}

// reencodeCause is reencodeParam for error causes.
func reencodeCause(c Cause) ([]byte, error) {
	do := func(v codec, n int, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		if n != len(c) {
			return nil, fmt.Errorf("consumed %d of %d bytes", n, len(c))
		}
		return v.Append(nil), nil
	}
	switch c.Code() {
	case CauseInvalidStreamIdentifier:
		v, n, err := ParseInvalidStreamIdentifier(c)
		return do(v, n, err)
	case CauseMissingMandatoryParameter:
		v, n, err := ParseMissingMandatoryParameter(c)
		return do(v, n, err)
	case CauseStaleCookie:
		v, n, err := ParseStaleCookie(c)
		return do(v, n, err)
	case CauseNoUserData:
		v, n, err := ParseNoUserData(c)
		return do(v, n, err)
	}
	v, n, err := ParseRawCause(c)
	return do(v, n, err)
}

// maskReserved clears, in a copy of a parameter or error cause, the
// Reserved fields its parser ignores.
func maskReserved(tlv []byte) []byte {
	b := bytes.Clone(tlv)
	switch ParamType(uint16(b[0])<<8 | uint16(b[1])) {
	case ParamAddOutgoingStreams, ParamAddIncomingStreams:
		b[10], b[11] = 0, 0
	}
	return b
}

// maskCauseReserved is maskReserved for error causes.
func maskCauseReserved(tlv []byte) []byte {
	b := bytes.Clone(tlv)
	if CauseCode(uint16(b[0])<<8|uint16(b[1])) == CauseInvalidStreamIdentifier {
		b[6], b[7] = 0, 0
	}
	return b
}
