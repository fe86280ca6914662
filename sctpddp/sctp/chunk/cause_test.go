package chunk

import "testing"

func TestCauses(t *testing.T) {
	checkParamCodec(t, hexBytes(t, "00010008 00070000"), InvalidStreamIdentifier{StreamID: 7}, ParseInvalidStreamIdentifier, 8)
	checkParamCodec(t, hexBytes(t, `
		00 02 00 0c # Missing Mandatory Parameter, Length 12 (8 + 2 * 2)
		00 00 00 02 # N = 2
		00 07 00 05 # State Cookie, IPv4 Address
	`), MissingMandatoryParameter{Types: ParamTypeList(nil).AppendType(ParamStateCookie).AppendType(ParamIPv4Address)},
		ParseMissingMandatoryParameter, 12)
	checkParamCodec(t, hexBytes(t, "0002000a 00000001 00070000"),
		MissingMandatoryParameter{Types: ParamTypeList(nil).AppendType(ParamStateCookie)}, ParseMissingMandatoryParameter, 10)
	checkParamCodec(t, hexBytes(t, "00030008 000f4240"), StaleCookie{Staleness: 1000000}, ParseStaleCookie, 8)
	checkParamCodec(t, hexBytes(t, "00090008 0000002a"), NoUserData{TSN: 42}, ParseNoUserData, 8)

	for _, c := range []struct {
		golden string
		want   RawCause
		len    int
	}{
		{"00040004", RawCause{Code: CauseOutOfResource}, 4},
		{"0005000c 00050008 c0000201", RawCause{Code: CauseUnresolvableAddress, Info: hexBytes(t, "00050008 c0000201")}, 12},
		{"00060008 fe000004", RawCause{Code: CauseUnrecognizedChunkType, Info: hexBytes(t, "fe000004")}, 8},
		{"00070004", RawCause{Code: CauseInvalidMandatoryParameter}, 4},
		{"0008000a 12340006 abcd 0000", RawCause{Code: CauseUnrecognizedParameters, Info: hexBytes(t, "12340006 abcd")}, 10},
		{"000a0004", RawCause{Code: CauseCookieReceivedWhileShuttingDown}, 4},
		{"000b000c 00050008 0a000002", RawCause{Code: CauseRestartWithNewAddresses, Info: hexBytes(t, "00050008 0a000002")}, 12},
		{"000c0004", RawCause{Code: CauseUserInitiatedAbort}, 4},
		{"000d0007 6f6f7000", RawCause{Code: CauseProtocolViolation, Info: []byte("oop")}, 7},
		{"00a30004", RawCause{Code: CauseIllegalASCONFAck}, 4},
		{"00a10014 c0010010 01023474 00050008 c0000201", RawCause{Code: CauseResourceShortage,
			Info: hexBytes(t, "c0010010 01023474 00050008 c0000201")}, 20},
	} {
		checkParamCodec(t, hexBytes(t, c.golden), c.want, ParseRawCause, c.len)
	}

	for name, b := range map[string]string{
		"Invalid Stream Identifier of 4":   "00010004",
		"Missing Mandatory with wrong N":   "0002000c 00000001 00070005",
		"Missing Mandatory of odd length":  "0002000b 00000001 000700",
		"Out of Resource with information": "00040008 00000000",
		"No User Data of 12":               "0009000c 00000001 00000000",
		"Unrecognized Chunk Type of 6":     "00060006 fe00 0000",
		"Cause Length 2":                   "00050002",
	} {
		_, _, err := ParseCause(hexBytes(t, b))
		wantErr(t, name, err, ErrLength)
	}
	_, _, err := ParseStaleCookie(hexBytes(t, "00090008 0000002a"))
	wantErr(t, "No User Data handed to ParseStaleCookie", err, ErrWrongType)
}
