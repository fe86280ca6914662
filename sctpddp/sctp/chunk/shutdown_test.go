package chunk

import "testing"

func TestShutdown(t *testing.T) {
	checkChunk(t, hexBytes(t, "07000008 89abcdef"), Shutdown{CumulativeTSNAck: 0x89abcdef}, ParseShutdown)
	_, _, err := ParseShutdown(hexBytes(t, "0700000c 00000001 00000000"))
	wantErr(t, "SHUTDOWN of Length 12", err, ErrLength)
}
