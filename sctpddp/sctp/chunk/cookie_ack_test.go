package chunk

import "testing"

func TestCookieAck(t *testing.T) {
	checkChunk(t, hexBytes(t, "0b000004"), CookieAck{}, ParseCookieAck)
	_, _, err := ParseCookieAck(hexBytes(t, "0b000005 00000000"))
	wantErr(t, "COOKIE ACK of Length 5", err, ErrLength)
}
