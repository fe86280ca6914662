package chunk

import (
	"bytes"
	"testing"
)

func TestInitAck(t *testing.T) {
	golden := hexBytes(t, `
		02 00 00 2a # Type 2, flags 0, Length 42
		0b 0c 0d 0e # Initiate Tag
		00 00 05 dc # a_rwnd 1500
		00 01 00 01 # OS 1, MIS 1
		ff ff ff ff # Initial TSN
		00 07 00 09 63 6f 6f 6b 69 00 00 00 # State Cookie "cooki", padding counted
		00 08 00 0a 12 34 00 06 ab 00       # Unrecognized Parameter: the TLV 0x1234 of 6 bytes
		00 00       # chunk padding
	`)
	want := InitAck{
		InitiateTag:        0x0b0c0d0e,
		ARwnd:              1500,
		NumOutboundStreams: 1,
		NumInboundStreams:  1,
		InitialTSN:         0xffffffff,
		Params:             golden[20:42],
	}
	checkChunk(t, golden, want, ParseInitAck)
	cookie, ok := StateCookie(want.Params)
	if !ok || !bytes.Equal(cookie, []byte("cooki")) {
		t.Errorf("StateCookie = %q, %v", cookie, ok)
	}
	if err := want.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	noCookie := want
	noCookie.Params = golden[32:42]
	wantErr(t, "INIT ACK without State Cookie", noCookie.Check(), ErrMissingStateCookie)

	// The Unrecognized Parameter carries the TLV whole.
	it := Params(want.Params)
	it.Next()
	it.Next()
	if p := it.Param(); p.Type() != ParamUnrecognizedParameter || Param(p.Value()).Type() != 0x1234 {
		t.Errorf("Unrecognized Parameter: %x", p)
	}
}
