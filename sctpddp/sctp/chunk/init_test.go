package chunk

import (
	"errors"
	"testing"
)

func TestInit(t *testing.T) {
	golden := hexBytes(t, `
		01 00 00 2d # Type 1, flags 0, Length 45
		a1 b2 c3 d4 # Initiate Tag
		00 01 00 00 # a_rwnd 65536
		00 0a 00 0b # OS 10, MIS 11
		00 00 03 e8 # Initial TSN 1000
		00 0c 00 06 00 05 00 00 # Supported Address Types: IPv4, padding
		80 00 00 04             # ECN Capable
		c0 06 00 08 00 00 00 01 # Adaptation Layer Indication: DDP
		80 08 00 05 82 00 00 00 # Supported Extensions: RE-CONFIG (last parameter: its padding is not in Length)
	`)
	params := hexBytes(t, "000c00060005 0000 80000004 c006000800000001 8008000582")
	want := Init{
		InitiateTag:        0xa1b2c3d4,
		ARwnd:              65536,
		NumOutboundStreams: 10,
		NumInboundStreams:  11,
		InitialTSN:         1000,
		Params:             params,
	}
	checkChunk(t, golden, want, ParseInit)

	var types []ParamType
	it := Params(want.Params)
	for it.Next() {
		types = append(types, it.Param().Type())
	}
	if it.Err() != nil || len(types) != 4 || types[3] != ParamSupportedExtensions {
		t.Errorf("parameters %v, err %v", types, it.Err())
	}
	if err := want.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestInitLastParamPadded(t *testing.T) {
	// RFC 9260 §3.2: "A robust implementation is expected to accept the
	// chunk whether or not the final padding has been included in the
	// Chunk Length."
	for _, length := range []byte{0x19, 0x1c} {
		b := hexBytes(t, "01000000 00000001 00001000 00010001 00000000 80080005 82000000")
		b[3] = length
		i, n, err := ParseInit(b)
		if err != nil || n != 28 {
			t.Fatalf("Length %d: n=%d err=%v", length, n, err)
		}
		it := Params(i.Params)
		if !it.Next() || it.Param().Type() != ParamSupportedExtensions || len(it.Param().Value()) != 1 || it.Next() || it.Err() != nil {
			t.Errorf("Length %d: parameters not read back", length)
		}
	}
}

func TestInitBadParams(t *testing.T) {
	for name, params := range map[string]string{
		"IPv4 Address of 12 bytes":  "0005000c 01020304 05060708",
		"parameter of length 2":     "00050002",
		"parameter past the end":    "00070010 0000",
		"Supported Address Types 7": "000c0007 000500",
		"Adaptation of 4 bytes":     "c0060004",
		"second padding missing":    "80080005 82 80000004",
	} {
		b := Init{InitiateTag: 1, ARwnd: 1500, NumOutboundStreams: 1, NumInboundStreams: 1, Params: hexBytes(t, params)}.Append(nil)
		_, _, err := ParseInit(b)
		var pe *ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%s: %v, want a *ParamError", name, err)
		}
	}
}

func TestInitCheck(t *testing.T) {
	good := Init{InitiateTag: 1, ARwnd: 1500, NumOutboundStreams: 1, NumInboundStreams: 1}
	for _, c := range []struct {
		name string
		edit func(*Init)
		want error
	}{
		{"Initiate Tag 0", func(i *Init) { i.InitiateTag = 0 }, ErrZeroInitiateTag},
		{"a_rwnd 1499", func(i *Init) { i.ARwnd = 1499 }, ErrSmallARwnd},
		{"OS 0", func(i *Init) { i.NumOutboundStreams = 0 }, ErrZeroStreams},
		{"MIS 0", func(i *Init) { i.NumInboundStreams = 0 }, ErrZeroStreams},
	} {
		i := good
		c.edit(&i)
		wantErr(t, c.name, i.Check(), c.want)
		wantErr(t, c.name+" (INIT ACK)", InitAck(i).Check(), c.want)
	}
	if err := good.Check(); err != nil {
		t.Errorf("good INIT: %v", err)
	}
}
