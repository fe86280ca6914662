package chunk

import (
	"errors"
	"testing"
)

func TestAbort(t *testing.T) {
	golden := hexBytes(t, `
		06 01 00 18 # Type 6, T bit, Length 24
		00 09 00 08 00 00 00 2a # No User Data, TSN 42
		00 0c 00 09 62 79 65 00 00 00 00 00 # User-Initiated Abort "bye\0\0", padding counted
	`)
	want := Abort{T: true, Causes: golden[4:]}
	checkChunk(t, golden, want, ParseAbort)
	checkChunk(t, hexBytes(t, "06000004"), Abort{}, ParseAbort)

	it := Causes(want.Causes)
	var codes []CauseCode
	for it.Next() {
		codes = append(codes, it.Cause().Code())
	}
	if it.Err() != nil || len(codes) != 2 || codes[0] != CauseNoUserData || codes[1] != CauseUserInitiatedAbort {
		t.Errorf("causes %v, err %v", codes, it.Err())
	}

	// A cause with a bad length makes the ABORT malformed ("If an endpoint
	// receives an ABORT chunk with a format error ... it MUST silently
	// discard it").
	_, _, err := ParseAbort(hexBytes(t, "0600000c 00040008 00000000"))
	var ce *CauseError
	if !errors.As(err, &ce) || ce.Code != CauseOutOfResource || !errors.Is(err, ErrLength) {
		t.Errorf("Out of Resource of length 8: %v", err)
	}
}
