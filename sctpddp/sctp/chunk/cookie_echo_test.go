package chunk

import "testing"

func TestCookieEcho(t *testing.T) {
	golden := hexBytes(t, `
		0a 00 00 0b # Type 10, Length 11
		63 6f 6f 6b 69 65 21 00 # Cookie "cookie!", padding
	`)
	checkChunk(t, golden, CookieEcho{Cookie: []byte("cookie!")}, ParseCookieEcho)

	// "the data within the State Cookie's Parameter Value becomes the data
	// within the Cookie Echo's Chunk Value"
	initAck := InitAck{InitiateTag: 1, ARwnd: 1500, NumOutboundStreams: 1, NumInboundStreams: 1,
		Params: RawParam{Type: ParamStateCookie, Value: []byte("cookie!")}.Append(nil)}
	cookie, _ := StateCookie(initAck.Params)
	if string(CookieEcho{Cookie: cookie}.Append(nil)) != string(golden) {
		t.Error("COOKIE ECHO from the State Cookie differs")
	}
}
