package chunk

import "testing"

func TestShutdownAck(t *testing.T) {
	checkChunk(t, hexBytes(t, "08000004"), ShutdownAck{}, ParseShutdownAck)
	_, _, err := ParseShutdownAck(hexBytes(t, "08000008 00000000"))
	wantErr(t, "SHUTDOWN ACK of Length 8", err, ErrLength)
}
