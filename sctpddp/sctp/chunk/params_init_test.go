package chunk

import (
	"errors"
	"testing"
)

func TestInitParams(t *testing.T) {
	checkParamCodec(t, hexBytes(t, "00050008 c0000201"), IPv4Address{Addr: [4]byte{192, 0, 2, 1}}, ParseIPv4Address, 8)
	checkParamCodec(t, hexBytes(t, "00060014 20010db8 00000000 00000000 00000001"),
		IPv6Address{Addr: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}}, ParseIPv6Address, 20)
	checkParamCodec(t, hexBytes(t, "00090008 00002710"), CookiePreservative{LifeSpanIncrement: 10000}, ParseCookiePreservative, 8)
	checkParamCodec(t, hexBytes(t, `
		00 0c 00 06 # Supported Address Types, Length 6
		00 05 00 00 # IPv4, padding
	`), SupportedAddressTypes{Types: ParamTypeList(nil).AppendType(ParamIPv4Address)}, ParseSupportedAddressTypes, 6)
	sat := SupportedAddressTypes{Types: ParamTypeList(nil).AppendType(ParamIPv4Address).AppendType(ParamIPv6Address)}
	checkParamCodec(t, hexBytes(t, "000c0008 00050006"), sat, ParseSupportedAddressTypes, 8)
	if !sat.Types.Contains(ParamIPv6Address) || sat.Types.Contains(ParamHostNameAddress) || sat.Types.Len() != 2 {
		t.Error("Supported Address Types lookups")
	}
	ext := SupportedExtensions{ChunkTypes: []byte{byte(TypeReconfig), byte(TypeForwardTSN), byte(TypeIData)}}
	checkParamCodec(t, hexBytes(t, `
		80 08 00 07 # Supported Extensions, Length 7
		82 c0 40 00 # RE-CONFIG, FORWARD TSN, I-DATA, padding
	`), ext, ParseSupportedExtensions, 7)
	if !ext.Has(TypeIData) || ext.Has(TypeASCONF) {
		t.Error("Supported Extensions lookups")
	}
	checkParamCodec(t, hexBytes(t, "c0060008 00000001"), AdaptationLayerIndication{AdaptationCodePoint: AdaptationCodePointDDP},
		ParseAdaptationLayerIndication, 8)
	checkParamCodec(t, hexBytes(t, "80010008 00000001"), ZeroChecksumAcceptable{EDMID: EDMIDDTLS}, ParseZeroChecksumAcceptable, 8)

	// The parameters carried opaque.
	for _, c := range []struct {
		golden string
		want   RawParam
		len    int
	}{
		{"80000004", RawParam{Type: ParamECNCapable}, 4},
		{"c0000004", RawParam{Type: ParamForwardTSNSupported}, 4},
		{"00070007 01020300", RawParam{Type: ParamStateCookie, Value: []byte{1, 2, 3}}, 7},
		{"80020024 " + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
			RawParam{Type: ParamRandom, Value: hexBytes(t, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")}, 36},
		{"80030006 0080 0000", RawParam{Type: ParamChunkList, Value: []byte{0x00, 0x80}}, 6},
		{"80040006 0001 0000", RawParam{Type: ParamRequestedHMACAlgorithm, Value: []byte{0, 1}}, 6},
	} {
		checkParamCodec(t, hexBytes(t, c.golden), c.want, ParseRawParam, c.len)
	}
	host := RawParam{Type: ParamHostNameAddress, Value: []byte("host.example\x00")}
	checkParamCodec(t, hexBytes(t, `
		00 0b 00 11 # Host Name Address, Length 17 (a null terminator included)
		68 6f 73 74 2e 65 78 61 6d 70 6c 65 00 # "host.example\0"
		00 00 00    # padding
	`), host, ParseRawParam, 17)
}

func TestParamWrongType(t *testing.T) {
	_, _, err := ParseIPv4Address(hexBytes(t, "00060014 00000000 00000000 00000000 00000000"))
	wantErr(t, "IPv6 handed to ParseIPv4Address", err, ErrWrongType)
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Type != ParamIPv6Address {
		t.Errorf("error %v does not name the IPv6 Address type", err)
	}
}

func TestParamIter(t *testing.T) {
	list := hexBytes(t, `
		00 05 00 08 0a 00 00 01 # IPv4 Address 10.0.0.1
		12 34 00 05 ff 00 00 00 # unknown 0x1234 (upper bits 00), 1 byte, padding
		80 08 00 05 82          # Supported Extensions, last, unpadded
	`)
	it := Params(list)
	var got []ParamType
	var offs []int
	for it.Next() {
		got = append(got, it.Param().Type())
		offs = append(offs, it.Offset())
	}
	if it.Err() != nil || len(got) != 3 || got[1] != 0x1234 || offs[2] != 16 {
		t.Errorf("types %v offsets %v err %v", got, offs, it.Err())
	}

	bad := Params(hexBytes(t, "00050008 0a000001 00050003"))
	n := 0
	for bad.Next() {
		n++
	}
	var pe *ParamError
	if n != 1 || !errors.As(bad.Err(), &pe) || pe.Offset != 8 || !errors.Is(pe, ErrLength) {
		t.Errorf("bad list: %d parameters, err %v", n, bad.Err())
	}
}

func TestParamUnrecognized(t *testing.T) {
	for typ, want := range map[ParamType]Action{
		0x0100:                         ActionStop,
		0x4100:                         ActionStopReport,
		ParamECNCapable:                ActionSkip,
		ParamZeroChecksumAcceptable:    ActionSkip,
		ParamSupportedExtensions:       ActionSkip,
		ParamForwardTSNSupported:       ActionSkipReport,
		ParamAdaptationLayerIndication: ActionSkipReport,
	} {
		if got := typ.Unrecognized(); got != want {
			t.Errorf("%v: %v, want %v", typ, got, want)
		}
	}
	if ParamOutgoingSSNResetRequest.Unrecognized() != ActionStop {
		t.Error("RFC 6525 §4: the receiver stops at an unknown reconfiguration parameter")
	}
}
