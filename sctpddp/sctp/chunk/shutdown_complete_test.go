package chunk

import "testing"

func TestShutdownComplete(t *testing.T) {
	checkChunk(t, hexBytes(t, "0e000004"), ShutdownComplete{}, ParseShutdownComplete)
	checkChunk(t, hexBytes(t, "0e010004"), ShutdownComplete{T: true}, ParseShutdownComplete)
	if s, _, _ := ParseShutdownComplete(hexBytes(t, "0efe0004")); s.T {
		t.Error("reserved flags read as the T bit")
	}
}
